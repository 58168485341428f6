"""Files attached to a chat message: stored as references on the user event (artifact_delta),
given to the model as parts (the real google-genai client against the fake Gemini server),
acknowledged by the offline model; another user's or an unknown file id stores nothing."""

import base64
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connections
from django.test import Client

from agents_app import memory_provider
from agents_app.runtime.agents import agent_for_app
from agents_app.runtime.runner import Runner
from chatapp.asgi import application
from core.gemini import GeminiModel
from sessions_app import selectors, services
from sessions_app.models import EventRecord
from sessions_app.uploads import uploads_check
from tests.factories import UserFactory
from tests.fake_gemini import Reply, final_chunk, text_chunk
from tests.sample_files import image_bytes, pdf_bytes
from tests.websocket_client import WebsocketClient

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

APP = "chat"
WAIT = 20
PNG = image_bytes("PNG")
PDF = pdf_bytes(3)


@pytest.fixture(autouse=True)
def chat_settings(settings):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.001
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
    }


@pytest.fixture(autouse=True)
async def close_thread_connections(transactional_db):
    yield
    await database_sync_to_async(connections.close_all)()
    await sync_to_async(connections.close_all)()
    await memory_provider._presence_hop(connections.close_all)()


def attach(user, session_id):
    return services.attachments_store(
        app_name=APP,
        user_id=str(user.pk),
        session_id=session_id,
        uploads=uploads_check([("logo.png", PNG), ("spec.pdf", PDF)]),
    )


async def open_socket(user, session_id):
    client = Client()
    await sync_to_async(client.force_login)(user)
    name = settings.SESSION_COOKIE_NAME
    cookie = f"{name}={client.cookies[name].value}".encode()
    communicator = WebsocketClient(
        application,
        f"/ws/chat/{session_id}/",
        headers=[(b"host", b"testserver"), (b"origin", b"http://testserver"), (b"cookie", cookie)],
    )
    connected, _ = await communicator.connect(timeout=WAIT)
    assert connected
    return communicator


async def frames_until(communicator, frame_type):
    frames = []
    while True:
        frame = await communicator.receive_json_from(timeout=WAIT)
        frames.append(frame)
        if frame["type"] == frame_type:
            return frames


async def test_the_offline_model_acknowledges_the_attached_files_by_name_type_and_size():
    user = await sync_to_async(UserFactory)()
    session = await sync_to_async(services.session_create)(app_name=APP, user_id=str(user.pk))
    logo, spec = await sync_to_async(attach)(user, session.id)
    communicator = await open_socket(user, session.id)

    await communicator.send_json_to(
        {
            "type": "user_message",
            "text": "What are these?",
            "client_message_id": "m1",
            "attachments": [str(logo.pk), str(spec.pk)],
        }
    )
    frames = await frames_until(communicator, "turn_complete")
    await communicator.disconnect()

    events = [frame["event"] for frame in frames if frame["type"] == "event"]
    user_event, reply = events[0], events[-1]
    assert user_event["actions"]["artifact_delta"] == {"logo.png": 0, "spec.pdf": 0}
    assert [
        part.get("file_data", {}).get("display_name") for part in user_event["content"]["parts"]
    ] == [
        None,
        "logo.png",
        "spec.pdf",
    ]
    assert [each["filename"] for each in user_event["custom_metadata"]["attachments"]] == [
        "logo.png",
        "spec.pdf",
    ]
    assert reply["content"]["parts"][0]["text"].startswith(
        f"I received logo.png (a PNG image, {len(PNG)} bytes) and "
        f"spec.pdf (a PDF document, {len(PDF)} bytes). You said: “What are these?”"
    )


async def test_an_attachment_alone_needs_no_text():
    user = await sync_to_async(UserFactory)()
    session = await sync_to_async(services.session_create)(app_name=APP, user_id=str(user.pk))
    logo, _ = await sync_to_async(attach)(user, session.id)
    communicator = await open_socket(user, session.id)

    await communicator.send_json_to(
        {
            "type": "user_message",
            "text": "",
            "client_message_id": "m1",
            "attachments": [str(logo.pk)],
        }
    )
    frames = await frames_until(communicator, "turn_complete")
    await communicator.disconnect()

    reply = [frame["event"] for frame in frames if frame["type"] == "event"][-1]
    assert (
        reply["content"]["parts"][0]["text"]
        == f"I received logo.png (a PNG image, {len(PNG)} bytes)."
    )


@pytest.mark.parametrize("whose", ["another user's", "another session's", "unknown", "malformed"])
async def test_a_file_that_is_not_this_chats_is_refused_and_nothing_is_stored(whose):
    user = await sync_to_async(UserFactory)()
    other = await sync_to_async(UserFactory)()
    session = await sync_to_async(services.session_create)(app_name=APP, user_id=str(user.pk))
    if whose == "another user's":
        theirs = await sync_to_async(services.session_create)(app_name=APP, user_id=str(other.pk))
        artifact_id = str((await sync_to_async(attach)(other, theirs.id))[0].pk)
    elif whose == "another session's":
        mine = await sync_to_async(services.session_create)(app_name=APP, user_id=str(user.pk))
        artifact_id = str((await sync_to_async(attach)(user, mine.id))[0].pk)
    elif whose == "unknown":
        artifact_id = str(uuid.uuid4())
    else:
        artifact_id = "../../etc/passwd"
    communicator = await open_socket(user, session.id)

    await communicator.send_json_to(
        {
            "type": "user_message",
            "text": "Look",
            "client_message_id": "m1",
            "attachments": [artifact_id],
        }
    )
    frame = await communicator.receive_json_from(timeout=WAIT)
    await communicator.disconnect()

    assert frame["type"] == "error"
    assert frame["code"] == "attachment_not_found"
    assert not await sync_to_async(
        EventRecord.objects.filter(session__session_id=session.id).exists
    )()


async def test_too_many_or_malformed_attachments_are_refused(settings):
    settings.ATTACHMENT_MAX_COUNT = 1
    user = await sync_to_async(UserFactory)()
    session = await sync_to_async(services.session_create)(app_name=APP, user_id=str(user.pk))
    communicator = await open_socket(user, session.id)

    for attachments in (["a", "b"], "not-a-list", [1]):
        await communicator.send_json_to(
            {
                "type": "user_message",
                "text": "x",
                "client_message_id": "m1",
                "attachments": attachments,
            }
        )
        frame = await communicator.receive_json_from(timeout=WAIT)
        assert (frame["type"], frame["code"]) == ("error", "invalid_frame")
    await communicator.disconnect()


async def test_gemini_receives_the_image_inline_and_the_large_pdf_through_the_files_api(
    fake_gemini, settings
):
    settings.ATTACHMENT_INLINE_MAX_BYTES = len(PNG) + 1
    user = await sync_to_async(UserFactory)()
    session = await sync_to_async(services.session_create)(app_name=APP, user_id=str(user.pk))
    logo, spec = await sync_to_async(attach)(user, session.id)
    agent = await sync_to_async(agent_for_app)(APP)
    model = GeminiModel("gemini-2.5-flash")
    runner = Runner(agent=agent, model=model)
    fake_gemini.push(Reply([text_chunk("A red logo and a three-page PDF."), final_chunk()]))

    from google.genai import types

    events = [
        event
        async for event in runner.run_async(
            user_id=str(user.pk),
            session_id=session.id,
            new_message=types.Content(role="user", parts=[types.Part(text="What are these?")]),
            attachments=[logo, spec],
        )
    ]
    await model.aclose()

    assert events[-1].text() == "A red logo and a three-page PDF."
    [request] = [each for each in fake_gemini.requests if each.action == "streamGenerateContent"]
    parts = request.body["contents"][-1]["parts"]
    [uploaded] = fake_gemini.files.values()
    assert parts[0] == {"text": "What are these?"}
    assert parts[1] == {"text": f"[Attached file logo.png: image/png, {len(PNG)} bytes]"}
    assert base64.urlsafe_b64decode(parts[2]["inlineData"]["data"]) == PNG
    assert parts[2]["inlineData"]["mime_type"] == "image/png"
    assert parts[3] == {"text": f"[Attached file spec.pdf: application/pdf, {len(PDF)} bytes]"}
    assert parts[4] == {"fileData": {"file_uri": uploaded.uri, "mime_type": "application/pdf"}}
    assert (uploaded.data, uploaded.mime_type) == (PDF, "application/pdf")
    stored = await sync_to_async(selectors.stored_event_of_id_get)(
        app_name=APP, user_pk=user.pk, session_id=session.id, event_id=events[0].id
    )
    assert stored.event.actions.artifact_delta == {"logo.png": 0, "spec.pdf": 0}
