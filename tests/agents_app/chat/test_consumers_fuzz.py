"""Stateful fuzzing of the chat socket's frames: whatever a client sends, the socket answers and
stays open.

Each example opens a socket on a chat that already holds a turn, sends a sequence of frames
drawn by Hypothesis (``user_message``, ``edit``, ``regenerate``, ``retry``, ``cancel`` and
``ping`` with the chat's real ids, made-up ones and hostile ones: NUL characters, lone
surrogates, wrong types, over-long strings) and after each frame a ``ping``, whose ``pong``
must come back: a socket closed by the server (1011 was the crash of an ``edit`` naming
``"a\\u0000"``) or an exception in the consumer fails the example. Bounded in examples and
derandomised, so it takes seconds and gives the same verdict every time; raise
``FUZZ_FRAME_EXAMPLES`` for a longer hunt.
"""

from __future__ import annotations

import os

import pytest
from channels.db import database_sync_to_async
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions_app.models import EventRecord
from tests.agents_app.chat.test_consumers import (
    _cookie,
    _open,
    _send_message,
    _until,
    chat_settings,  # noqa: F401 (autouse fixture)
    close_thread_connections,  # noqa: F401 (autouse fixture)
)
from tests.factories import UserFactory
from tests.hostile_text import hostile_strings

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(300)]

EXAMPLES = int(os.environ.get("FUZZ_FRAME_EXAMPLES", "25"))
SEED_MESSAGE_ID = "seed-1"
# The chat's stored event ids, read once the seed turn has run (a message, a reply).
_stored_ids: list[str] = []

client_message_id = st.one_of(st.sampled_from([SEED_MESSAGE_ID, "m-1", "m-2"]), hostile_strings)
message_id = st.one_of(st.deferred(lambda: st.sampled_from(_stored_ids)), hostile_strings)
text = st.one_of(st.sampled_from(["hello", "tell me more"]), hostile_strings)
odd_value = st.one_of(st.integers(), st.none(), st.lists(st.text(max_size=3), max_size=2))


def _frame(frame_type: str, **fields: st.SearchStrategy) -> st.SearchStrategy:
    """A frame of ``frame_type`` with ``fields``; one in four has one of them left out or of
    another JSON type."""
    complete = st.fixed_dictionaries({"type": st.just(frame_type), **fields})
    if not fields:
        return complete
    odd = st.tuples(complete, st.sampled_from(sorted(fields)), st.one_of(st.none(), odd_value))
    return st.one_of(
        complete,
        complete,
        complete,
        odd.map(lambda drawn: _with(drawn[0], drawn[1], drawn[2])),
    )


def _with(frame: dict, name: str, value: object) -> dict:
    if value is None:
        return {key: item for key, item in frame.items() if key != name}
    return {**frame, name: value}


frames = st.one_of(
    _frame("user_message", text=text, client_message_id=client_message_id),
    _frame("edit", message_id=message_id, text=text, client_message_id=client_message_id),
    _frame("regenerate", message_id=message_id, client_message_id=client_message_id),
    _frame("retry", client_message_id=client_message_id),
    _frame("cancel"),
    _frame("ping", note=hostile_strings),
    st.fixed_dictionaries({"type": hostile_strings}),
)


@database_sync_to_async
def _event_ids(session_id: str) -> list[str]:
    return list(
        EventRecord.objects.filter(session__session_id=session_id).values_list("id", flat=True)
    )


@pytest.fixture
async def seeded_chat():
    """A user, the cookie of their sign-in and a chat holding one turn (its ids in
    ``_stored_ids``)."""
    from sessions_app import services

    user = await database_sync_to_async(UserFactory)()
    session = await database_sync_to_async(services.session_create)(
        app_name="chat", user_id=str(user.pk)
    )
    cookie = await database_sync_to_async(_cookie)(user)
    communicator = await _open(session.id, cookie)
    await _send_message(communicator, "My name is Ada", SEED_MESSAGE_ID)
    await _until(communicator, "turn_complete")
    await communicator.disconnect()
    _stored_ids[:] = await _event_ids(session.id)
    yield session.id, cookie
    _stored_ids.clear()


async def _answered(communicator) -> None:
    """Send a ping and read up to its pong (the frames of a turn may come first); a close or a
    crash of the consumer raises here."""
    await communicator.send_json_to({"type": "ping"})
    while True:
        output = await communicator.receive_output(timeout=20)
        assert output["type"] == "websocket.send", f"the socket ended: {output}"
        if '"type": "pong"' in output["text"]:
            return


@given(sequence=st.lists(frames, min_size=1, max_size=6))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
async def test_no_sequence_of_frames_ends_the_socket(seeded_chat, sequence):
    session_id, cookie = seeded_chat
    communicator = await _open(session_id, cookie)
    try:
        for frame in sequence:
            await communicator.send_json_to(frame)
            await _answered(communicator)
        await communicator.send_json_to({"type": "cancel"})
        await _answered(communicator)
    finally:
        await communicator.disconnect()
