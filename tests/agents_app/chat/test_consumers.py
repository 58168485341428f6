"""The chat WebSocket as a browser uses it: through the real ASGI application, with the
Origin check, the session cookie of a signed-in user, and the offline model.

Runs on whichever channel layer and cache the settings choose: in-memory by
default, channels-redis and the Redis cache when ``REDIS_URL`` is set.
"""

import asyncio
import json
import time
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connections
from django.test import Client
from google.genai import types

from agents_app import memory_provider
from agents_app.chat.consumers import chat_sockets_restart
from agents_app.chat.turn_claims import turn_claim_take
from agents_app.models import TurnClaim
from agents_app.runtime.turns import CANCEL_SHUTDOWN, SERVER_STOPPED
from chatapp.asgi import application
from core import rate_limits, shutdown
from core.notices import user_group_name, user_notice_send
from sessions_app import selectors, services
from sessions_app.events import Event, new_invocation_id
from sessions_app.models import EventRecord
from tests.agents_app.chat.conftest import turns_ended
from tests.factories import session_key
from tests.websocket_client import WebsocketClient

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
    """Close the connections the consumer opened on worker threads (the database thread, the
    memory presence thread) before the database is flushed, so PostgreSQL can drop the test
    database at the end."""
    yield
    await database_sync_to_async(connections.close_all)()
    await sync_to_async(connections.close_all)()
    await memory_provider._presence_hop(connections.close_all)()


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
    headers = [(b"host", b"testserver")] + ([(b"origin", origin)] if origin else [])
    if cookie:
        headers.append((b"cookie", cookie))
    return WebsocketClient(application, f"/ws/chat/{session_id}/", headers=headers)


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
    return list(EventRecord.objects.filter(session__session_id=session_id).order_by("sequence"))


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
    assert _event_text(events[3]) == "Nice to meet you, Ada! I'll call you that in all your chats."
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


def _streamed(frames):
    return "".join(frame["text"] for frame in frames if frame["type"] == "delta")


def _chat_errors(caplog):
    return [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]


async def _resent_after_a_lost_socket(session_id, cookie, text, client_message_id):
    """Send a message, lose the socket at the reply's first ``delta``, then open another and
    send the message again (a reload mid-reply): the new socket, and what the first one got."""
    communicator = await _open(session_id, cookie)
    await _send_message(communicator, text, client_message_id)
    before = await _until(communicator, "delta")
    await communicator.disconnect()
    communicator = await _open(session_id, cookie)
    await _send_message(communicator, text, client_message_id)
    return communicator, before


async def test_a_turn_goes_on_after_its_socket_is_lost_and_streams_on_to_the_next(
    settings, caplog, cookie, chat_session
):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    communicator, before = await _resent_after_a_lost_socket(
        chat_session.id, cookie, "tell me " + "a long story " * 40, "lost-1"
    )
    frames = await _until(communicator, "turn_complete")

    assert _types(frames)[:3] == ["event", "turn_running", "delta"]
    assert frames[0]["event"]["author"] == "user"
    caught_up = frames[2]
    assert caught_up["text"].startswith(_streamed(before))
    seqs = [frame["seq"] for frame in frames if frame["type"] == "delta"]
    assert seqs == sorted(set(seqs))
    reply = frames[-2]["event"]
    assert not reply.get("interrupted")
    assert _event_text(reply) == _streamed(frames)
    assert _streamed(frames).startswith("You said: \u201ctell me a long story")
    assert frames[-1]["duplicate"] is True and frames[-1]["interrupted"] is False
    stored = await _stored(chat_session.id)
    assert [(record.author, bool(record.interrupted)) for record in stored] == [
        ("user", False),
        ("assistant", False),
    ]
    await communicator.disconnect()
    await turns_ended()
    assert _chat_errors(caplog) == []


async def test_a_reply_relayed_late_still_streams_to_its_end_on_the_next_socket(
    settings, monkeypatch, cookie, chat_session
):
    """The channel layer lags: the reply's last chunk and its end reach the watching socket
    after the turn was stored, later than that socket next looks at the database. The reply it
    streamed still ends as stored, not a chunk short."""
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.02
    layer = get_channel_layer()
    group_send = layer.group_send

    async def late_last_chunk(group, message):
        frame = message.get("frame") or {}
        if frame.get("type") == "delta" and frame["text"].endswith("\u201d."):
            await asyncio.sleep(1.3)
        await group_send(group, message)

    monkeypatch.setattr(layer, "group_send", late_last_chunk)
    communicator, _ = await _resent_after_a_lost_socket(
        chat_session.id, cookie, "tell me " + "a long story " * 20, "late-1"
    )
    frames = await _until(communicator, "turn_complete")

    reply = frames[-2]["event"]
    assert _streamed(frames) == _event_text(reply)
    assert _event_text(reply).endswith("\u201d.")
    await communicator.disconnect()
    await turns_ended()


async def test_a_cancel_after_a_reconnect_stops_the_turn_that_went_on(
    settings, cookie, chat_session
):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    text = "tell me " + "a long story " * 40
    communicator, _ = await _resent_after_a_lost_socket(chat_session.id, cookie, text, "lost-2")
    frames = await _until(communicator, "delta")

    await communicator.send_json_to({"type": "cancel"})
    frames += await _until(communicator, "turn_complete")

    assert "error" not in _types(frames)
    assert frames[-1]["interrupted"] is True
    stored = await _stored(chat_session.id)
    assert [(record.author, bool(record.interrupted)) for record in stored] == [
        ("user", False),
        ("assistant", True),
    ]
    assert _stored_text(stored[1]).startswith(_streamed(frames))
    assert len(_stored_text(stored[1])) < len(f"You said: \u201c{text}\u201d.")
    await communicator.disconnect()


async def test_a_stop_reaches_only_the_users_own_turn_when_ids_are_alike(
    settings, user, other_user, cookie
):
    """Session ids are unique per app and user, and message ids are the client's: two users
    may hold the same pair, and one's Stop of a turn it watches after a reload must not cut
    the other's reply."""
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    text = "tell me " + "a long story " * 40
    for owner in (user, other_user):
        await database_sync_to_async(services.session_create)(
            app_name=APP, user_id=str(owner.pk), session_id="alike"
        )
    theirs = await _open("alike", await database_sync_to_async(_cookie)(other_user))
    mine = await _open("alike", cookie)
    await _send_message(theirs, text, "same")
    await _send_message(mine, text, "same")
    await _until(theirs, "delta")
    await _until(mine, "delta")
    await mine.disconnect()  # a reload: the turn goes on, and the new socket watches it
    mine = await _open("alike", cookie)
    await _send_message(mine, text, "same")
    await _until(mine, "delta")

    await mine.send_json_to({"type": "cancel"})

    assert (await _until(mine, "turn_complete"))[-1]["interrupted"] is True
    assert (await _until(theirs, "turn_complete"))[-1]["interrupted"] is False
    await mine.disconnect()
    await theirs.disconnect()


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
        (
            '{"type": "edit", "message_id": "a\\u0000", "text": "hi", "client_message_id": "a"}',
            "invalid_frame",
        ),
        (
            '{"type": "regenerate", "message_id": "\\u0000", "client_message_id": "a"}',
            "invalid_frame",
        ),
        (
            '{"type": "edit", "message_id": "\\ud800", "text": "hi", "client_message_id": "a"}',
            "invalid_frame",
        ),
        (
            '{"type": "regenerate", "message_id": "\\ud800", "client_message_id": "a"}',
            "invalid_frame",
        ),
        ('{"type": "ping", "note": "\\ud800"}', "invalid_frame"),
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


async def test_a_message_the_server_dropped_unkept_is_refused_and_the_socket_stays_usable(
    cookie, chat_session
):
    """chatapp.webserver reads a message longer than it keeps to its end and tells the
    consumer only its length (``websocket.receive.too_large``)."""
    communicator = await _open(chat_session.id, cookie)

    await communicator.send_input(
        {"type": "websocket.receive.too_large", "bytes_received": 64_000_090, "binary": False}
    )
    error = await _receive(communicator)
    await _send_message(communicator, "still there?")
    frames = await _until(communicator, "turn_complete")

    assert (error["type"], error["code"]) == ("error", "frame_too_large")
    assert "its frame is 61 MB; at most" in error["message"]
    assert frames[-1]["interrupted"] is False
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


@database_sync_to_async
def _departures():
    from memory_app.models import SessionDeparture

    return set(SessionDeparture.objects.values_list("session__session_id", flat=True))


async def _departures_become(expected, *, within=10.0):
    """The departures once they are ``expected``: a socket records its opening after the
    handshake, on a thread of its own, so the handshake's end does not wait for it."""
    deadline = asyncio.get_running_loop().time() + within
    while (found := await _departures()) != expected:
        if asyncio.get_running_loop().time() > deadline:
            return found
        await asyncio.sleep(0.05)
    return found


async def test_closing_a_chat_records_a_departure_and_reopening_it_forgets_it(
    user, cookie, chat_session
):
    communicator = await _open(chat_session.id, cookie)
    await _send_message(communicator, "My name is Dana and I live in Lisbon.")
    await _until(communicator, "turn_complete")
    await communicator.disconnect()

    assert await _departures() == {chat_session.id}

    communicator = await _open(chat_session.id, cookie)  # a page reload
    assert await _departures_become(set()) == set()
    await communicator.disconnect()


async def test_opening_another_chat_leaves_the_one_with_unprocessed_turns(
    user, cookie, chat_session
):
    first = await _open(chat_session.id, cookie)
    await _send_message(first, "I live in Lisbon.")
    await _until(first, "turn_complete")
    other = await database_sync_to_async(services.session_create)(
        app_name=APP, user_id=str(user.pk)
    )

    second = await _open(other.id, cookie)  # the first chat is still open in another tab

    assert await _departures_become({chat_session.id}) == {chat_session.id}
    await first.disconnect()
    await second.disconnect()


# --- Resume, Retry, turns running elsewhere, shutdown (issue 16) ------------------------------


@database_sync_to_async
def _died_after_storing(session, client_message_id, text, *, silent_for=3600.0):
    """A turn whose process died right after storing the user's message: the message, and a
    claim whose holder has not renewed it for ``silent_for`` seconds."""
    event = Event(
        id=f"msg-{client_message_id}",
        invocation_id=new_invocation_id(),
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        custom_metadata={"client_message_id": client_message_id},
    )
    services.event_append(session=session, event=event)
    claim = turn_claim_take(
        session_id=session_key(session), user_event_id=event.id, holder="host:1:dead-socket"
    )
    TurnClaim.objects.filter(pk=claim.id).update(renewed_at=time.time() - silent_for)
    return event, claim


async def test_a_resent_message_whose_process_died_runs_its_turn_once(user, cookie, chat_session):
    user_event, _ = await _died_after_storing(chat_session, "died-1", "are you there")
    communicator = await _open(chat_session.id, cookie)

    await _send_message(communicator, "are you there", "died-1")
    frames = await _until(communicator, "turn_complete")

    assert frames[0] == {
        "type": "turn_started",
        "client_message_id": "died-1",
        "invocation_id": user_event.invocation_id,
        "resumed": True,
    }
    assert frames[1]["event"]["id"] == "msg-died-1"
    assert "delta" in _types(frames)
    final = frames[-2]["event"]
    assert (final["id"], final["turn_complete"]) == ("msg-died-1.1", True)
    assert frames[-1]["duplicate"] is False and frames[-1]["interrupted"] is False
    assert [record.event_id for record in await _stored(chat_session.id)] == [
        "msg-died-1",
        "msg-died-1.1",
    ]
    assert not await database_sync_to_async(TurnClaim.objects.exists)()

    await _send_message(communicator, "are you there", "died-1")
    again = await _until(communicator, "turn_complete")
    assert again[-1]["duplicate"] is True
    assert len(await _stored(chat_session.id)) == 2
    await communicator.disconnect()


async def test_two_sockets_resending_a_dead_turn_run_it_once(settings, user, cookie, chat_session):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.02
    await _died_after_storing(chat_session, "twice", "hello both")
    first = await _open(chat_session.id, cookie)
    second = await _open(chat_session.id, cookie)

    await _send_message(first, "hello both", "twice")
    await _send_message(second, "hello both", "twice")
    frames = await asyncio.gather(_until(first, "turn_complete"), _until(second, "turn_complete"))

    started = [f for socket_frames in frames for f in socket_frames if f["type"] == "turn_started"]
    assert len(started) == 1
    duplicates = sorted(socket_frames[-1]["duplicate"] for socket_frames in frames)
    assert duplicates == [False, True], "the other socket watched it, or replayed it if late"
    finals = [socket_frames[-2]["event"]["id"] for socket_frames in frames]
    assert finals == ["msg-twice.1", "msg-twice.1"], "both sockets end with the one reply"
    assert [record.event_id for record in await _stored(chat_session.id)] == [
        "msg-twice",
        "msg-twice.1",
    ]
    for communicator in (first, second):
        await communicator.disconnect()


async def test_a_turn_running_on_another_socket_is_watched_not_run_again(
    settings, cookie, chat_session
):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    running = await _open(chat_session.id, cookie)
    watching = await _open(chat_session.id, cookie)
    text = "a long one " * 30  # about 1.5 s of streaming

    await _send_message(running, text, "busy")
    await _until(running, "delta")
    await _send_message(watching, text, "busy")
    watched = await _until(watching, "turn_complete")
    ran = await _until(running, "turn_complete")

    assert _types(watched)[:3] == ["event", "turn_running", "delta"]
    assert _streamed(watched) == _event_text(ran[-2]["event"])
    assert watched[-2]["event"] == ran[-2]["event"]
    assert watched[-1]["duplicate"] is True and ran[-1]["duplicate"] is False
    assert len(await _stored(chat_session.id)) == 2
    for communicator in (running, watching):
        await communicator.disconnect()


async def test_a_stop_from_a_socket_watching_reaches_the_turn_of_an_open_socket(
    settings, cookie, chat_session
):
    """While the socket running a turn is open, asks for the turn reach it through the
    user's group: another tab's Stop stops it, and both end with the interrupted reply."""
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    running = await _open(chat_session.id, cookie)
    watching = await _open(chat_session.id, cookie)
    text = "a long one " * 30

    await _send_message(running, text, "stopped")
    await _until(running, "delta")
    await _send_message(watching, text, "stopped")
    await _until(watching, "delta")
    await watching.send_json_to({"type": "cancel"})

    ran = await _until(running, "turn_complete")
    watched = await _until(watching, "turn_complete")
    assert ran[-1]["interrupted"] is True and watched[-1]["interrupted"] is True
    assert watched[-2]["event"] == ran[-2]["event"]
    stored = await _stored(chat_session.id)
    assert [(record.author, bool(record.interrupted)) for record in stored] == [
        ("user", False),
        ("assistant", True),
    ]
    for communicator in (running, watching):
        await communicator.disconnect()


async def test_a_watched_turn_whose_holder_goes_silent_is_taken_over(
    settings, cookie, chat_session
):
    settings.TURN_LEASE_SECONDS = 1.0
    await _died_after_storing(chat_session, "silent", "still there?", silent_for=0)
    communicator = await _open(chat_session.id, cookie)

    await _send_message(communicator, "still there?", "silent")
    frames = await _until(communicator, "turn_complete")

    assert _types(frames)[:2] == ["event", "turn_running"]
    assert {"type": "turn_started", "resumed": True}.items() <= next(
        frame for frame in frames if frame["type"] == "turn_started"
    ).items()
    assert frames[-2]["event"]["id"] == "msg-silent.1"
    assert frames[-1]["duplicate"] is False
    await communicator.disconnect()


async def _interrupted_turn(communicator, client_message_id, settings):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    await _send_message(communicator, "tell me " + "a long story " * 20, client_message_id)
    await _until(communicator, "delta")
    await communicator.send_json_to({"type": "cancel"})
    frames = await _until(communicator, "turn_complete")
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0
    return frames


async def test_retry_runs_an_interrupted_turn_again_once(settings, cookie, chat_session):
    communicator = await _open(chat_session.id, cookie)
    interrupted = await _interrupted_turn(communicator, "stop-1", settings)
    assert interrupted[-1]["interrupted"] is True

    await communicator.send_json_to({"type": "retry", "client_message_id": "stop-1"})
    retried = await _until(communicator, "turn_complete")
    await communicator.send_json_to({"type": "retry", "client_message_id": "stop-1"})
    second = await _until(communicator, "turn_complete")

    assert retried[0]["type"] == "turn_started" and retried[0]["resumed"] is True
    final = retried[-2]["event"]
    assert final["id"] == "msg-stop-1.2" and not final.get("interrupted")
    assert _event_text(final).startswith("You said: \u201ctell me a long story")
    assert (retried[-1]["interrupted"], retried[-1]["duplicate"]) == (False, False)
    assert "turn_started" not in _types(second), "the second Retry replays the answer"
    assert second[-1]["duplicate"] is True and second[-1]["message_id"] == final["id"]
    assert [record.event_id for record in await _stored(chat_session.id)] == [
        "msg-stop-1",
        "msg-stop-1.1",
        "msg-stop-1.2",
    ]
    await communicator.disconnect()


async def test_retry_of_an_unknown_or_malformed_message_is_refused(cookie, chat_session):
    communicator = await _open(chat_session.id, cookie)

    await communicator.send_json_to({"type": "retry", "client_message_id": "never-sent"})
    unknown = await _receive(communicator)
    await communicator.send_json_to({"type": "retry", "client_message_id": "bad id!"})
    malformed = await _receive(communicator)

    assert unknown == {
        "type": "error",
        "code": "turn_not_found",
        "message": "This chat has no message with that id.",
    }
    assert malformed["code"] == "invalid_frame"
    assert await _stored(chat_session.id) == []
    await communicator.disconnect()


async def test_a_draining_process_refuses_new_turns_and_new_sockets(
    monkeypatch, cookie, chat_session
):
    communicator = await _open(chat_session.id, cookie)
    monkeypatch.setattr(shutdown, "_draining", True)

    await _send_message(communicator, "hello", "late")
    refused = await _receive(communicator)
    late = _communicator(chat_session.id, cookie=cookie)
    connected, _ = await late.connect(timeout=WAIT)
    greeting = await _receive(late)
    closed = await late.receive_output(timeout=WAIT)

    assert refused["code"] == "server_shutting_down"
    assert connected and greeting["code"] == "server_shutting_down"
    assert closed == {"type": "websocket.close", "code": 4012}
    assert await _stored(chat_session.id) == []
    await communicator.disconnect()


async def test_a_shutdown_lets_short_turns_finish_and_stores_the_rest_as_stopped(
    settings, monkeypatch, cookie, chat_session
):
    monkeypatch.setattr(shutdown, "_draining", False)
    monkeypatch.setattr(shutdown, "_after_drain", [chat_sockets_restart])
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    communicator = await _open(chat_session.id, cookie)
    await _send_message(communicator, "tell me " + "a long story " * 40, "cut")
    await _until(communicator, "delta")

    report = await shutdown.drain(grace_seconds=0.3, cancel_message=CANCEL_SHUTDOWN)
    frames = await _until(communicator, "turn_complete")
    closed = await communicator.receive_output(timeout=WAIT)

    assert (report.finished, report.cut_short) == (0, 1)
    final = frames[-3]["event"]
    assert (final["interrupted"], final["error_code"]) == (True, SERVER_STOPPED)
    assert frames[-2] == {
        "type": "error",
        "code": SERVER_STOPPED,
        "message": final["error_message"],
    }
    assert frames[-1]["interrupted"] is True
    assert closed == {"type": "websocket.close", "code": 4012}
    assert not await database_sync_to_async(TurnClaim.objects.exists)()


async def test_a_redacting_app_streams_its_events_as_they_were_stored(user, cookie, chat_session):
    from agents_app.models import App

    await database_sync_to_async(App.objects.create)(name=APP, pii_redaction=True)
    communicator = await _open(chat_session.id, cookie)

    await _send_message(communicator, "mail me at ada@lovelace.example", "m-pii")
    frames = await _until(communicator, "turn_complete")

    events = [frame["event"] for frame in frames if frame["type"] == "event"]
    assert _event_text(events[0]) == "mail me at [email]"
    assert "ada@lovelace.example" not in json.dumps(events)
    assert await _rest_events(user, chat_session.id) == events
    await communicator.disconnect()
