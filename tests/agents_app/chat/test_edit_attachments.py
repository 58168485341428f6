"""Editing or regenerating a message that carried files runs the new turn with the same files:
the new user event holds them again, the model reads them again (the offline model names them,
the fake Gemini server receives their bytes), and the replaced turn's are kept out of the
history the model reads."""

import base64

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async

from sessions_app import services
from sessions_app.models import ArtifactRecord
from tests.agents_app.chat.test_attachments import PDF, PNG, attach, frames_until, open_socket
from tests.agents_app.chat.test_consumers import (
    APP,
    _event_text,
    _rest_events,
    chat_settings,  # noqa: F401 (autouse fixture)
    close_thread_connections,  # noqa: F401 (autouse fixture)
)
from tests.factories import UserFactory
from tests.fake_gemini import Reply, final_chunk, text_chunk

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

ACKNOWLEDGED = (
    f"I received logo.png (a PNG image, {len(PNG)} bytes) and "
    f"spec.pdf (a PDF document, {len(PDF)} bytes)."
)


async def _chat_with_files():
    """A user, their session, and a socket on which a message with a logo and a PDF was sent."""
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
    return user, session, communicator, frames


def _events(frames):
    return [frame["event"] for frame in frames if frame["type"] == "event"]


def _attached_names(event):
    return [
        each["filename"] for each in (event.get("custom_metadata") or {}).get("attachments", [])
    ]


async def test_an_edited_message_runs_again_with_its_files():
    user, session, communicator, _ = await _chat_with_files()

    await communicator.send_json_to(
        {
            "type": "edit",
            "message_id": "msg-m1",
            "text": "Describe the logo",
            "client_message_id": "m1e",
        }
    )
    frames = await frames_until(communicator, "turn_complete")
    await communicator.disconnect()

    rewind, user_event, *_, reply = _events(frames)
    assert rewind["custom_metadata"]["rewrite"] == "edit"
    assert user_event["id"] == "msg-m1e"
    assert _event_text(user_event) == "Describe the logo"
    assert _attached_names(user_event) == ["logo.png", "spec.pdf"]
    assert user_event["actions"]["artifact_delta"] == {"logo.png": 0, "spec.pdf": 0}
    assert _event_text(reply).startswith(f"{ACKNOWLEDGED[:-1]}. You said: “Describe the logo”")
    history = [event for event in await _rest_events(user, session.id) if not event.get("rewound")]
    messages = [event for event in history if event["author"] == "user" and event.get("content")]
    assert [_attached_names(event) for event in messages] == [["logo.png", "spec.pdf"]]


async def test_a_regenerated_reply_reads_the_files_again():
    _user, _session, communicator, first = await _chat_with_files()
    reply_id = first[-1]["message_id"]

    await communicator.send_json_to(
        {"type": "regenerate", "message_id": reply_id, "client_message_id": "m1r"}
    )
    frames = await frames_until(communicator, "turn_complete")
    await communicator.disconnect()

    _, user_event, *_, reply = _events(frames)
    assert _event_text(user_event) == "What are these?"
    assert _attached_names(user_event) == ["logo.png", "spec.pdf"]
    assert _event_text(reply).startswith(ACKNOWLEDGED)
    assert frames[-1]["message_id"] == "msg-m1r.1" and frames[-1]["interrupted"] is False


async def test_a_file_deleted_since_is_left_out_and_the_rest_go_again():
    _user, session, communicator, _ = await _chat_with_files()
    await database_sync_to_async(
        lambda: ArtifactRecord.objects.filter(
            session__session_id=session.id, filename="spec.pdf"
        ).delete()
    )()

    await communicator.send_json_to(
        {"type": "edit", "message_id": "msg-m1", "text": "And now?", "client_message_id": "m1e"}
    )
    frames = await frames_until(communicator, "turn_complete")
    await communicator.disconnect()

    _, user_event, *_, reply = _events(frames)
    assert _attached_names(user_event) == ["logo.png"]
    assert _event_text(reply).startswith(f"I received logo.png (a PNG image, {len(PNG)} bytes).")


async def test_a_message_of_files_alone_can_be_edited_into_words():
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
    await frames_until(communicator, "turn_complete")

    await communicator.send_json_to(
        {"type": "edit", "message_id": "msg-m1", "text": "Is it red?", "client_message_id": "m1e"}
    )
    frames = await frames_until(communicator, "turn_complete")
    await communicator.disconnect()

    _, user_event, *_, reply = _events(frames)
    assert _attached_names(user_event) == ["logo.png"]
    assert _event_text(reply).startswith(
        f"I received logo.png (a PNG image, {len(PNG)} bytes). You said: “Is it red?”"
    )


async def test_gemini_receives_the_files_again_on_regenerate(fake_gemini):
    fake_gemini.push(
        Reply([text_chunk("A logo and a spec."), final_chunk()]),
        Reply([text_chunk("Again: a logo and a spec."), final_chunk()]),
    )
    _user, _session, communicator, first = await _chat_with_files()

    await communicator.send_json_to(
        {"type": "regenerate", "message_id": first[-1]["message_id"], "client_message_id": "m1r"}
    )
    frames = await frames_until(communicator, "turn_complete")
    await communicator.disconnect()

    assert _event_text(_events(frames)[-1]) == "Again: a logo and a spec."
    generations = [
        request.body["contents"]
        for request in fake_gemini.requests
        if request.action == "streamGenerateContent"
    ]
    assert len(generations) == 2
    contents = generations[-1]
    # The replaced turn is out of the history: one user message, with both files again.
    assert [content["role"] for content in contents] == ["user"]
    parts = contents[0]["parts"]
    assert parts[0] == {"text": "What are these?"}
    assert parts[1] == {"text": f"[Attached file logo.png: image/png, {len(PNG)} bytes]"}
    assert base64.urlsafe_b64decode(parts[2]["inlineData"]["data"]) == PNG
    assert parts[3] == {"text": f"[Attached file spec.pdf: application/pdf, {len(PDF)} bytes]"}
    assert base64.urlsafe_b64decode(parts[4]["inlineData"]["data"]) == PDF


async def test_regenerating_a_message_of_files_all_deleted_since_is_refused_and_changes_nothing():
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
    first = await frames_until(communicator, "turn_complete")
    await database_sync_to_async(
        lambda: ArtifactRecord.objects.filter(session__session_id=session.id).delete()
    )()
    before = await _rest_events(user, session.id)

    await communicator.send_json_to(
        {"type": "regenerate", "message_id": first[-1]["message_id"], "client_message_id": "m1r"}
    )
    answer = await communicator.receive_json_from(timeout=20)
    await communicator.disconnect()

    assert (answer["type"], answer["code"]) == ("error", "invalid_frame")
    assert await _rest_events(user, session.id) == before
