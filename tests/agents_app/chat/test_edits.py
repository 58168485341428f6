"""Editing a sent message and regenerating the last reply over the chat WebSocket: the session
is rewound before that turn and the new turn runs, once, whatever is re-sent."""

import uuid

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from agents_app.chat.protocol import TURN_BLOCKED_CODE
from agents_app.chat.turn_claims import turn_claim_release, turn_claim_take
from agents_app.models import TurnClaim
from agents_app.runtime.turn_context import turn_session_load
from agents_app.services import app_ensure
from core.background import background_wait_idle
from memory_app.models import Memory
from sessions_app import services
from sessions_app.events import Event
from sessions_app.models import EventRecord
from tests.agents_app.chat.test_consumers import (
    APP,
    _cookie,
    _event_text,
    _open,
    _rest_events,
    _send_message,
    _types,
    _until,
    chat_settings,  # noqa: F401 (autouse fixture)
    close_thread_connections,  # noqa: F401 (autouse fixture)
)
from tests.factories import UserFactory, session_key
from tests.memory_app.support import memory_make

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


@pytest.fixture
def cookie(user):
    return _cookie(user)


@pytest.fixture
def chat_session(user):
    # The chat app is a row its migration made, and a transactional test before this one
    # may have emptied the table: the REST rewind below checks the app exists.
    app_ensure(name=APP)
    return services.session_create(app_name=APP, user_id=str(user.pk))


async def _turn(communicator, text, client_message_id):
    await _send_message(communicator, text, client_message_id)
    return await _until(communicator, "turn_complete")


async def _frame(communicator, frame):
    await communicator.send_json_to(frame)
    return await _until(communicator, "turn_complete")


@database_sync_to_async
def _rest_rewind(user, session_id, invocation_id):
    client = Client()
    client.force_login(user)
    return client.post(
        f"/api/sessions/{session_id}/rewind/",
        {"invocation_id": invocation_id},
        content_type="application/json",
    )


def _history_texts(events):
    return [(event["author"], _event_text(event)) for event in events if _event_text(event)]


async def test_editing_a_message_rewinds_to_before_it_and_runs_the_edit(user, cookie, chat_session):
    communicator = await _open(chat_session.id, cookie)
    await _turn(communicator, "My name is Ada", "m-1")
    await _turn(communicator, "I live in Porto", "m-2")
    await _turn(communicator, "I like tea", "m-3")

    frames = await _frame(
        communicator,
        {
            "type": "edit",
            "message_id": "msg-m-2",
            "text": "I live in Lisbon",
            "client_message_id": "m-2b",
        },
    )

    rewind, started = frames[0], frames[1]
    assert rewind["type"] == "event"
    assert rewind["event"]["id"] == "edit-m-2b"
    assert rewind["event"]["custom_metadata"]["rewrite"] == "edit"
    assert started["type"] == "turn_started"
    assert frames[2]["event"]["id"] == "msg-m-2b"
    assert _event_text(frames[2]["event"]) == "I live in Lisbon"
    assert frames[-1]["interrupted"] is False and frames[-1]["duplicate"] is False
    history = await _rest_events(user, chat_session.id)
    texts = _history_texts(history)
    assert [text for author, text in texts if author == "user"] == [
        "My name is Ada",
        "I live in Lisbon",
    ]
    assert len(texts) == 4  # each message with its one reply
    rewound = await database_sync_to_async(
        lambda: set(
            EventRecord.objects.filter(
                session__session_id=chat_session.id, rewound=True
            ).values_list("event_id", flat=True)
        )
    )()
    assert {"msg-m-2", "msg-m-2.1", "msg-m-3", "msg-m-3.1"} <= rewound
    await communicator.disconnect()


async def test_regenerating_the_last_reply_sends_its_message_again(user, cookie, chat_session):
    communicator = await _open(chat_session.id, cookie)
    await _turn(communicator, "My name is Ada", "m-1")
    first = await _turn(communicator, "What is my name?", "m-2")
    reply_id = first[-1]["message_id"]

    frames = await _frame(
        communicator,
        {"type": "regenerate", "message_id": reply_id, "client_message_id": "m-2r"},
    )

    assert frames[0]["event"]["custom_metadata"]["rewrite"] == "regenerate"
    assert _event_text(frames[2]["event"]) == "What is my name?"
    assert frames[-1]["message_id"] == "msg-m-2r.1"
    texts = _history_texts(await _rest_events(user, chat_session.id))
    assert [text for author, text in texts if author == "user"] == [
        "My name is Ada",
        "What is my name?",
    ]
    assert texts[-1][0] == "assistant"
    await communicator.disconnect()


async def test_a_resent_edit_rewinds_and_runs_once(user, cookie, chat_session):
    communicator = await _open(chat_session.id, cookie)
    await _turn(communicator, "My name is Ada", "m-1")
    edit = {"type": "edit", "message_id": "msg-m-1", "text": "My name is Bo"}
    edit["client_message_id"] = "e"
    await _frame(communicator, edit)

    again = await _frame(communicator, edit)

    assert _types(again)[-1] == "turn_complete" and again[-1]["duplicate"] is True
    rewinds = await database_sync_to_async(
        lambda: EventRecord.objects.filter(
            session__session_id=chat_session.id, actions__rewind_before_invocation_id__isnull=False
        ).count()
    )()
    assert rewinds == 1
    texts = _history_texts(await _rest_events(user, chat_session.id))
    assert [text for author, text in texts if author == "user"] == ["My name is Bo"]
    await communicator.disconnect()


async def test_only_the_users_messages_and_the_last_reply_can_be_rewritten(
    user, cookie, chat_session
):
    communicator = await _open(chat_session.id, cookie)
    await _turn(communicator, "My name is Ada", "m-1")
    await _turn(communicator, "I live in Porto", "m-2")
    refusals = [
        ({"type": "edit", "message_id": "msg-m-1.1", "text": "x"}, "invalid_frame"),
        ({"type": "edit", "message_id": "msg-nope", "text": "x"}, "turn_not_found"),
        ({"type": "regenerate", "message_id": "msg-m-1.1"}, "invalid_frame"),
        ({"type": "regenerate", "message_id": "msg-m-2"}, "invalid_frame"),
        ({"type": "edit", "message_id": "", "text": "x"}, "invalid_frame"),
        ({"type": "edit", "message_id": "msg-m-1", "text": "   "}, "invalid_frame"),
        ({"type": "regenerate", "message_id": 7}, "invalid_frame"),
    ]
    for frame, code in refusals:
        await communicator.send_json_to({**frame, "client_message_id": uuid.uuid4().hex})
        answer = await communicator.receive_json_from(timeout=20)
        assert answer["type"] == "error" and answer["code"] == code, frame
    # Nothing was rewound and the socket still chats.
    texts = _history_texts(await _rest_events(user, chat_session.id))
    assert [text for author, text in texts if author == "user"] == [
        "My name is Ada",
        "I live in Porto",
    ]
    frames = await _turn(communicator, "Still here", "m-3")
    assert frames[-1]["interrupted"] is False
    await communicator.disconnect()


async def test_another_users_message_cannot_be_rewritten(user, cookie, chat_session):
    other = await database_sync_to_async(UserFactory)()
    theirs = await database_sync_to_async(services.session_create)(
        app_name=APP, user_id=str(other.pk)
    )
    other_communicator = await _open(theirs.id, await database_sync_to_async(_cookie)(other))
    await _turn(other_communicator, "My secret is 42", "o-1")
    communicator = await _open(chat_session.id, cookie)

    await communicator.send_json_to(
        {"type": "edit", "message_id": "msg-o-1", "text": "x", "client_message_id": "e"}
    )

    answer = await communicator.receive_json_from(timeout=20)
    assert answer["code"] == "turn_not_found"
    texts = _history_texts(await _rest_events(other, theirs.id))
    assert [text for author, text in texts if author == "user"] == ["My secret is 42"]
    await communicator.disconnect()
    await other_communicator.disconnect()


async def test_memories_of_an_edited_turn_are_revised(settings, user, cookie, chat_session):
    settings.BACKGROUND_TASKS = "inprocess"
    communicator = await _open(chat_session.id, cookie)
    await _turn(communicator, "I have a cat called Miso", "m-1")
    source = await database_sync_to_async(
        lambda: EventRecord.objects.get(session__session_id=chat_session.id, event_id="msg-m-1")
    )()
    memory = await database_sync_to_async(memory_make)(
        user=user, text="The user has a cat called Miso", sources=[source]
    )

    await _frame(
        communicator,
        {
            "type": "edit",
            "message_id": "msg-m-1",
            "text": "I have a dog called Miso",
            "client_message_id": "m-1b",
        },
    )
    await database_sync_to_async(background_wait_idle)()

    exists = await database_sync_to_async(Memory.objects.filter(pk=memory.pk).exists)()
    assert not exists
    await communicator.disconnect()


async def test_a_rewrite_while_another_turn_holds_its_claim_is_refused_and_changes_nothing(
    user, cookie, chat_session
):
    communicator = await _open(chat_session.id, cookie)
    await _turn(communicator, "My name is Ada", "m-1")
    first = await _turn(communicator, "I live in Porto", "m-2")
    # Another connection (or process) is writing the reply to a third message.
    key = await database_sync_to_async(session_key)(chat_session)
    held = await database_sync_to_async(turn_claim_take)(
        session_id=key, user_event_id="msg-m-3", holder="host:1:other-socket"
    )
    before = await _rest_events(user, chat_session.id)

    for frame in (
        {"type": "edit", "message_id": "msg-m-1", "text": "My name is Bo"},
        {"type": "regenerate", "message_id": first[-1]["message_id"]},
    ):
        await communicator.send_json_to({**frame, "client_message_id": f"{frame['type']}-1"})
        answer = await communicator.receive_json_from(timeout=20)
        assert (answer["type"], answer["code"]) == ("error", "turn_in_progress"), frame

    assert await _rest_events(user, chat_session.id) == before
    claims = await database_sync_to_async(
        lambda: list(
            TurnClaim.objects.filter(session__session_id=chat_session.id).values_list(
                "pk", flat=True
            )
        )
    )()
    assert claims == [held.id]
    # Once that turn is over, the same edit goes through.
    await database_sync_to_async(turn_claim_release)(claim=held)
    frames = await _frame(
        communicator,
        {
            "type": "edit",
            "message_id": "msg-m-1",
            "text": "My name is Bo",
            "client_message_id": "edit-1",
        },
    )
    assert frames[0]["event"]["id"] == "edit-edit-1" and frames[-1]["interrupted"] is False
    texts = _history_texts(await _rest_events(user, chat_session.id))
    assert [text for author, text in texts if author == "user"] == ["My name is Bo"]
    await communicator.disconnect()


async def test_a_rewrite_while_this_sockets_own_turn_streams_is_refused(
    settings, user, cookie, chat_session
):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.2
    communicator = await _open(chat_session.id, cookie)
    await _send_message(communicator, "Tell me a long story", "m-1")
    await _until(communicator, "delta")

    await communicator.send_json_to(
        {"type": "edit", "message_id": "msg-m-1", "text": "Short one", "client_message_id": "e-1"}
    )
    frames = await _until(communicator, "error")
    assert frames[-1]["code"] == "turn_in_progress"
    done = await _until(communicator, "turn_complete")
    assert done[-1]["client_message_id"] == "m-1" and done[-1]["interrupted"] is False
    texts = _history_texts(await _rest_events(user, chat_session.id))
    assert [text for author, text in texts if author == "user"] == ["Tell me a long story"]
    rewinds = await database_sync_to_async(
        lambda: EventRecord.objects.filter(
            session__session_id=chat_session.id, actions__rewind_before_invocation_id__isnull=False
        ).count()
    )()
    assert rewinds == 0
    await communicator.disconnect()


async def test_an_edit_whose_rewind_id_holds_another_event_is_refused_and_changes_nothing(
    user, cookie, chat_session
):
    """An event stored as ``edit-e1`` before the API refused the server's ids is no rewind: the
    edit of client message ``e1`` is refused with ``turn_blocked``, and the socket goes on."""
    communicator = await _open(chat_session.id, cookie)
    await _turn(communicator, "My name is Ada", "m-1")
    await database_sync_to_async(services.event_append)(
        session=chat_session, event=Event(id="edit-e1", author="user")
    )
    before = await _rest_events(user, chat_session.id)

    await communicator.send_json_to(
        {
            "type": "edit",
            "message_id": "msg-m-1",
            "text": "My name is Bo",
            "client_message_id": "e1",
        }
    )
    refused = await _until(communicator, "error")

    assert refused[-1]["code"] == TURN_BLOCKED_CODE
    assert await _rest_events(user, chat_session.id) == before
    assert _types(await _turn(communicator, "Still here?", "m-2"))[-1] == "turn_complete"


async def test_a_rewind_to_a_turn_an_edit_took_out_brings_back_what_it_replaced(
    user, cookie, chat_session
):
    communicator = await _open(chat_session.id, cookie)
    await _turn(communicator, "My name is Ada", "m-1")
    await _turn(communicator, "I live in Porto", "m-2")
    await _turn(communicator, "I like tea", "m-3")
    await _frame(
        communicator,
        {
            "type": "edit",
            "message_id": "msg-m-2",
            "text": "I live in Lisbon",
            "client_message_id": "m-2b",
        },
    )
    third = await database_sync_to_async(
        lambda: (
            EventRecord.objects.get(
                session__session_id=chat_session.id, event_id="msg-m-3"
            ).invocation_id
        )
    )()

    response = await _rest_rewind(user, chat_session.id, third)

    assert response.status_code == 201, response.content
    texts = _history_texts(await _rest_events(user, chat_session.id))
    assert [text for author, text in texts if author == "user"] == [
        "My name is Ada",
        "I live in Porto",
    ]
    session, _, _ = await turn_session_load(
        app_name=APP, user_id=str(user.pk), session_id=chat_session.id, max_events=50
    )
    said = [event.text() for event in session.events if event.content and event.author == "user"]
    assert said == ["My name is Ada", "I live in Porto"]
    frames = await _turn(communicator, "I like coffee", "m-4")
    assert frames[-1]["interrupted"] is False
    texts = _history_texts(await _rest_events(user, chat_session.id))
    assert [text for author, text in texts if author == "user"][-2:] == [
        "I live in Porto",
        "I like coffee",
    ]
    await communicator.disconnect()
