"""The chat WebSocket as a browser uses it: through the real ASGI application, with the
Origin check, the session cookie of a signed-in user, and the offline model.

Runs on whichever channel layer and cache the settings choose: in-memory by
default, channels-redis and the Redis cache when ``REDIS_URL`` is set.
"""

import asyncio
import json
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.db import connections
from django.test import Client

from chatapp.asgi import application
from sessions_app import rate_limits, selectors, services
from sessions_app.models import EventRecord
from sessions_app.notices import user_group_name, user_notice_send

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

APP = "chat"
ORIGIN = b"http://testserver"
WAIT = 20  # seconds a frame may take before the test gives up (not an assertion)


@pytest.fixture(autouse=True)
def chat_settings(settings):
    """Fast streaming, and rate-limit counters of this test only (even in a shared Redis)."""
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.001
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
    }


@pytest.fixture(autouse=True)
async def close_thread_connections(transactional_db):
    """Close the connections the consumer opened on worker threads before the database
    is flushed, so PostgreSQL can drop the test database at the end."""
    yield
    await database_sync_to_async(connections.close_all)()
    await sync_to_async(connections.close_all)()


def _cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    name = settings.SESSION_COOKIE_NAME
    return f"{name}={client.cookies[name].value}".encode()


@pytest.fixture
def cookie(user):
    return _cookie(user)


@pytest.fixture
def chat_session(user):
    return services.session_create(app_name=APP, user_id=str(user.pk))


def _communicator(session_id, *, cookie=None, origin=ORIGIN):
    headers = [(b"origin", origin)] if origin else []
    if cookie:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(application, f"/ws/chat/{session_id}/", headers=headers)


async def _open(session_id, cookie):
    communicator = _communicator(session_id, cookie=cookie)
    connected, _ = await communicator.connect(timeout=WAIT)
    assert connected
    return communicator


async def _send_message(communicator, text, client_message_id=None):
    await communicator.send_json_to(
        {
            "type": "user_message",
            "text": text,
            "client_message_id": client_message_id or uuid.uuid4().hex,
        }
    )


async def _receive(communicator):
    return await communicator.receive_json_from(timeout=WAIT)


async def _until(communicator, frame_type):
    """Frames up to and including the first of ``frame_type``."""
    frames = []
    while True:
        frame = await _receive(communicator)
        frames.append(frame)
        if frame["type"] == frame_type:
            return frames


def _types(frames):
    return [frame["type"] for frame in frames]


def _event_text(event):
    return "".join(part.get("text", "") for part in (event.get("content") or {}).get("parts", []))


@database_sync_to_async
def _stored(session_id):
    return list(EventRecord.objects.filter(session_id=session_id).order_by("sequence"))


@database_sync_to_async
def _rest_events(user, session_id):
    client = Client()
    client.force_login(user)
    response = client.get(f"/api/sessions/{session_id}/events/")
    assert response.status_code == 200
    return response.json()["results"]


def _stored_text(record):
    return "".join(part.get("text", "") for part in (record.content or {}).get("parts", []))


async def test_a_turn_streams_in_the_documented_order(user, cookie, chat_session):
    communicator = await _open(chat_session.id, cookie)

    await _send_message(communicator, "Hello **there**", "m-1")
    frames = await _until(communicator, "turn_complete")

    types = _types(frames)
    deltas = [frame for frame in frames if frame["type"] == "delta"]
    assert types == ["turn_started", "event", *["delta"] * len(deltas), "event", "turn_complete"]
    assert deltas
    started, user_event, final_event, complete = frames[0], frames[1], frames[-2], frames[-1]
    invocation_id = started["invocation_id"]
    assert started["client_message_id"] == "m-1"
    assert user_event["event"]["author"] == "user"
    assert _event_text(user_event["event"]) == "Hello **there**"
    assert user_event["event"]["html"] == "<p>Hello <strong>there</strong></p>\n"
    final = final_event["event"]
    assert final["author"] == "assistant"
    assert "".join(delta["text"] for delta in deltas) == _event_text(final)
    assert [delta["seq"] for delta in deltas] == list(range(len(deltas)))
    assert {delta["message_id"] for delta in deltas} == {final["id"]}
    assert {delta["invocation_id"] for delta in deltas} == {invocation_id}
    assert final["invocation_id"] == user_event["event"]["invocation_id"] == invocation_id
    assert final["html"].startswith("<p>")
    assert final["custom_metadata"]["context"]["offline"] is True
    assert complete == {
        "type": "turn_complete",
        "client_message_id": "m-1",
        "invocation_id": invocation_id,
        "message_id": final["id"],
        "interrupted": False,
        "duplicate": False,
        "context": final["custom_metadata"]["context"],
    }
    # Each event frame is the event exactly as the REST API shows it.
    assert await _rest_events(user, chat_session.id) == [user_event["event"], final]
    await communicator.disconnect()


async def test_a_tool_turn_sends_the_call_and_response_and_stores_the_state(
    user, cookie, chat_session
):
    communicator = await _open(chat_session.id, cookie)

    await _send_message(communicator, "my name is Ada")
    frames = await _until(communicator, "turn_complete")

    events = [frame["event"] for frame in frames if frame["type"] == "event"]
    assert _types(frames)[:5] == ["turn_started", "event", "event", "event", "delta"]
    assert _types(frames)[-2:] == ["event", "turn_complete"]
    call = events[1]["content"]["parts"][0]["function_call"]
    response = events[2]["content"]["parts"][0]["function_response"]
    assert (call["name"], call["args"]) == ("set_state", {"key": "user:name", "value": "Ada"})
    assert response["name"] == "set_state"
    assert events[2]["actions"]["state_delta"] == {"user:name": "Ada"}
    assert _event_text(events[3]) == "Saved user:name."
    state = await database_sync_to_async(selectors.session_scoped_state)(
        app_name=APP, user_pk=user.pk, session_id=chat_session.id
    )
    assert state.user == {"name": "Ada"}

    await _send_message(communicator, "hello again")
    frames = await _until(communicator, "turn_complete")
    assert _event_text(frames[-2]["event"]).startswith("Hi Ada!")
    await communicator.disconnect()


async def test_cancel_mid_stream_stores_the_reply_so_far_as_interrupted(
    settings, cookie, chat_session
):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    communicator = await _open(chat_session.id, cookie)

    await _send_message(communicator, "tell me " + "a long story " * 40, "long-1")
    frames = await _until(communicator, "delta")
    await communicator.send_json_to({"type": "cancel"})
    frames += await _until(communicator, "turn_complete")

    complete = frames[-1]
    deltas = "".join(frame["text"] for frame in frames if frame["type"] == "delta")
    assert complete["interrupted"] is True
    assert complete["duplicate"] is False
    interrupted_reply = frames[-2]["event"]
    assert interrupted_reply["interrupted"] is True
    assert interrupted_reply["id"] == complete["message_id"]
    assert _event_text(interrupted_reply) == deltas
    stored = await _stored(chat_session.id)
    assert [record.author for record in stored] == ["user", "assistant"]
    assert _stored_text(stored[0]).startswith("tell me a long story")
    assert stored[1].interrupted is True
    assert _stored_text(stored[1]) == deltas
    assert len(deltas) < len(_stored_text(stored[0]))

    # The socket goes on working.
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0
    await _send_message(communicator, "short one")
    frames = await _until(communicator, "turn_complete")
    assert frames[-1]["interrupted"] is False
    await communicator.disconnect()


async def test_a_repeated_client_message_id_replays_the_turn_instead_of_running_it(
    cookie, chat_session
):
    communicator = await _open(chat_session.id, cookie)
    await _send_message(communicator, "only once", "same-id")
    first = await _until(communicator, "turn_complete")

    await _send_message(communicator, "only once", "same-id")
    second = await _until(communicator, "turn_complete")

    assert _types(second) == ["event", "event", "turn_complete"]
    first_events = [frame for frame in first if frame["type"] == "event"]
    assert second[:2] == first_events
    assert second[-1] == {**first[-1], "duplicate": True}
    stored = await _stored(chat_session.id)
    assert [record.author for record in stored] == ["user", "assistant"]
    await communicator.disconnect()


async def test_reconnecting_and_resending_after_a_lost_socket_runs_no_second_turn(
    settings, cookie, chat_session
):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    communicator = await _open(chat_session.id, cookie)
    await _send_message(communicator, "tell me " + "a long story " * 40, "lost-1")
    await _until(communicator, "delta")
    await communicator.disconnect()

    communicator = await _open(chat_session.id, cookie)
    await _send_message(communicator, "tell me " + "a long story " * 40, "lost-1")
    frames = await _until(communicator, "turn_complete")

    assert _types(frames) == ["event", "event", "turn_complete"]
    assert frames[0]["event"]["author"] == "user"
    assert frames[1]["event"]["interrupted"] is True
    assert frames[-1]["duplicate"] is True
    assert frames[-1]["interrupted"] is True
    stored = await _stored(chat_session.id)
    assert [record.author for record in stored] == ["user", "assistant"]
    assert stored[1].interrupted is True
    await communicator.disconnect()


async def test_a_too_long_message_is_refused_and_the_socket_stays_usable(
    settings, cookie, chat_session
):
    settings.CHAT_MAX_MESSAGE_CHARS = 100
    communicator = await _open(chat_session.id, cookie)

    await _send_message(communicator, "x" * 101)
    error = await _receive(communicator)
    await _send_message(communicator, "y" * 100)
    frames = await _until(communicator, "turn_complete")

    assert error["type"] == "error"
    assert error["code"] == "message_too_large"
    assert frames[-1]["interrupted"] is False
    stored = await _stored(chat_session.id)
    assert [_stored_text(record) for record in stored if record.author == "user"] == ["y" * 100]
    await communicator.disconnect()


async def test_turns_over_the_rate_limit_are_refused(settings, monkeypatch, cookie, chat_session):
    settings.CHAT_TURNS_PER_MINUTE = 2
    monkeypatch.setattr(rate_limits, "_clock", lambda: 1_000_020.0)
    communicator = await _open(chat_session.id, cookie)

    for text in ("one", "two"):
        await _send_message(communicator, text)
        await _until(communicator, "turn_complete")
    await _send_message(communicator, "three")
    error = await _receive(communicator)
    await communicator.send_json_to({"type": "ping"})
    pong = await _receive(communicator)

    assert (error["type"], error["code"]) == ("error", "rate_limited")
    assert pong == {"type": "pong"}
    stored = await _stored(chat_session.id)
    assert [_stored_text(r) for r in stored if r.author == "user"] == ["one", "two"]
    await communicator.disconnect()


async def test_a_resent_message_is_replayed_even_at_the_rate_limit(
    settings, monkeypatch, cookie, chat_session
):
    settings.CHAT_TURNS_PER_MINUTE = 1
    monkeypatch.setattr(rate_limits, "_clock", lambda: 1_000_020.0)
    communicator = await _open(chat_session.id, cookie)
    await _send_message(communicator, "only once", client_message_id="resent-1")
    first = await _until(communicator, "turn_complete")
    await _send_message(communicator, "only once", client_message_id="resent-1")
    replay = await _until(communicator, "turn_complete")

    assert [f["type"] for f in replay if f["type"] == "error"] == []
    assert replay[-1]["duplicate"] is True
    replayed = [f["event"]["id"] for f in replay if f["type"] == "event"]
    assert replayed == [f["event"]["id"] for f in first if f["type"] == "event"]
    stored = await _stored(chat_session.id)
    assert [_stored_text(r) for r in stored if r.author == "user"] == ["only once"]
    await communicator.disconnect()


async def test_a_second_message_during_a_turn_is_refused(settings, cookie, chat_session):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    communicator = await _open(chat_session.id, cookie)
    await _send_message(communicator, "tell me " + "a long story " * 20)
    await _until(communicator, "delta")

    await _send_message(communicator, "me too")
    frames = await _until(communicator, "turn_complete")

    errors = [frame for frame in frames if frame["type"] == "error"]
    assert [error["code"] for error in errors] == ["turn_in_progress"]
    stored = await _stored(chat_session.id)
    assert [record.author for record in stored] == ["user", "assistant"]
    await communicator.disconnect()


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not json", "invalid_json"),
        ("", "invalid_json"),
        ('{"type": "ping"', "invalid_json"),
        ('{"type": "user_message", "text": NaN}', "invalid_json"),
        ("[" * 50_000, "invalid_json"),  # nested too deep, yet under the frame size limit
        ("[1, 2]", "invalid_frame"),
        ('"user_message"', "invalid_frame"),
        ("{}", "invalid_frame"),
        ('{"type": 7}', "invalid_frame"),
        ('{"type": "user_message"}', "invalid_frame"),
        ('{"type": "user_message", "text": "hi"}', "invalid_frame"),
        ('{"type": "user_message", "client_message_id": "a"}', "invalid_frame"),
        ('{"type": "user_message", "text": "   ", "client_message_id": "a"}', "invalid_frame"),
        ('{"type": "user_message", "text": ["hi"], "client_message_id": "a"}', "invalid_frame"),
        ('{"type": "user_message", "text": "hi", "client_message_id": "a b"}', "invalid_frame"),
        ('{"type": "user_message", "text": "hi", "client_message_id": 5}', "invalid_frame"),
        (
            json.dumps({"type": "user_message", "text": "hi", "client_message_id": "x" * 65}),
            "invalid_frame",
        ),
        (
            '{"type": "user_message", "text": "a\\u0000b", "client_message_id": "a"}',
            "invalid_frame",
        ),
        ('{"type": "user_message", "text": "\\ud800", "client_message_id": "a"}', "invalid_frame"),
        ('{"type": "subscribe"}', "unknown_type"),
    ],
)
async def test_a_malformed_frame_gets_an_error_and_the_socket_stays_usable(
    cookie, chat_session, frame, code
):
    communicator = await _open(chat_session.id, cookie)

    await communicator.send_input({"type": "websocket.receive", "text": frame})
    error = await _receive(communicator)
    await _send_message(communicator, "still there?")
    frames = await _until(communicator, "turn_complete")

    assert error["type"] == "error"
    assert error["code"] == code
    assert error["message"]
    assert frames[-1]["interrupted"] is False
    stored = await _stored(chat_session.id)
    assert [_stored_text(r) for r in stored if r.author == "user"] == ["still there?"]
    await communicator.disconnect()


@pytest.mark.parametrize(
    "frame",
    [
        json.dumps({"type": "user_message", "text": "x" * 2_000_000, "client_message_id": "big-1"}),
        json.dumps({"type": "ping", "padding": "x" * 2_000_000}),
        "{" * 2_000_000,
        "not json " * 300_000,
    ],
    ids=["huge-message", "huge-ping", "huge-nesting", "huge-garbage"],
)
async def test_an_oversized_frame_is_refused_unread_and_the_socket_stays_usable(
    cookie, chat_session, frame
):
    communicator = await _open(chat_session.id, cookie)

    await communicator.send_input({"type": "websocket.receive", "text": frame})
    error = await _receive(communicator)
    await _send_message(communicator, "still there?")
    frames = await _until(communicator, "turn_complete")

    assert (error["type"], error["code"]) == ("error", "frame_too_large")
    assert str(len(frame)) in error["message"]
    assert frames[-1]["interrupted"] is False
    stored = await _stored(chat_session.id)
    assert [_stored_text(r) for r in stored if r.author == "user"] == ["still there?"]
    await communicator.disconnect()


async def test_a_frame_just_under_the_limit_is_read(settings, cookie, chat_session):
    """The limit leaves room for the longest message a user may send, fully escaped."""
    settings.CHAT_MAX_MESSAGE_CHARS = 100
    communicator = await _open(chat_session.id, cookie)
    text = "\\u00e9" * 100  # é, each escaped as six characters in the frame
    frame = '{"type": "user_message", "client_message_id": "esc-1", "text": "' + text + '"}'

    await communicator.send_input({"type": "websocket.receive", "text": frame})
    frames = await _until(communicator, "turn_complete")

    assert [f["code"] for f in frames if f["type"] == "error"] == []
    stored = await _stored(chat_session.id)
    assert [_stored_text(r) for r in stored if r.author == "user"] == ["\u00e9" * 100]
    await communicator.disconnect()


async def test_a_binary_frame_gets_an_error_and_the_socket_stays_usable(cookie, chat_session):
    communicator = await _open(chat_session.id, cookie)

    await communicator.send_to(bytes_data=b'{"type": "ping"}')
    error = await _receive(communicator)
    await communicator.send_json_to({"type": "ping"})

    assert (error["type"], error["code"]) == ("error", "invalid_frame")
    assert await _receive(communicator) == {"type": "pong"}
    await communicator.disconnect()


async def test_another_users_session_is_refused_like_an_unknown_one(other_user, chat_session):
    other_cookie = await database_sync_to_async(_cookie)(other_user)

    refusals = []
    for session_id in (chat_session.id, "no-such-session", "bad%20id"):
        communicator = _communicator(session_id, cookie=other_cookie)
        refusals.append(await communicator.connect(timeout=WAIT))
        await communicator.disconnect()

    assert refusals == [(False, 4404)] * 3


async def test_an_anonymous_socket_is_refused(chat_session):
    communicator = _communicator(chat_session.id)

    connected, code = await communicator.connect(timeout=WAIT)
    await communicator.disconnect()

    assert (connected, code) == (False, 4401)


async def test_a_foreign_origin_is_refused(cookie, chat_session):
    for origin in (b"https://evil.example", None):
        communicator = _communicator(chat_session.id, cookie=cookie, origin=origin)

        connected, _ = await communicator.connect(timeout=WAIT)
        await communicator.disconnect()

        assert connected is False


async def test_notices_reach_only_the_user_they_name(user, other_user, cookie, chat_session):
    communicator = await _open(chat_session.id, cookie)

    await get_channel_layer().group_send(
        user_group_name(user.pk),
        {"type": "notice", "user_id": other_user.pk, "notice": {"kind": "not for you"}},
    )
    await user_notice_send(user_pk=user.pk, notice={"kind": "memory_saved", "id": 7})

    assert await _receive(communicator) == {
        "type": "notice",
        "notice": {"kind": "memory_saved", "id": 7},
    }
    await communicator.disconnect()


async def test_each_socket_of_the_user_gets_a_notice(user, cookie, chat_session):
    second_session = await database_sync_to_async(services.session_create)(
        app_name=APP, user_id=str(user.pk)
    )
    sockets = [await _open(chat_session.id, cookie), await _open(second_session.id, cookie)]

    await user_notice_send(user_pk=user.pk, notice={"kind": "hello"})

    received = await asyncio.gather(*(_receive(socket) for socket in sockets))
    assert received == [{"type": "notice", "notice": {"kind": "hello"}}] * 2
    for socket in sockets:
        await socket.disconnect()


async def test_a_session_deleted_while_open_is_reported(user, cookie, chat_session):
    communicator = await _open(chat_session.id, cookie)
    await database_sync_to_async(services.session_delete)(
        app_name=APP, user_id=str(user.pk), session_id=chat_session.id
    )

    await _send_message(communicator, "anyone?", "gone-1")
    frames = await _until(communicator, "turn_complete")

    assert frames[0] == {
        "type": "error",
        "code": "session_not_found",
        "message": "This session no longer exists.",
    }
    assert frames[-1]["client_message_id"] == "gone-1"
    await communicator.disconnect()
