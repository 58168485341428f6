"""A turn no process can end is given up with an error, not retried for ever (issue 27): its
next event id holds an event of another invocation (one stored under a turn's id before the
API refused such ids), so its reply can never be stored there."""

import pytest
from channels.db import database_sync_to_async
from google.genai import types

from agents_app.chat.protocol import TURN_BLOCKED_CODE
from agents_app.models import TurnClaim
from sessions_app import services
from sessions_app.events import Event
from tests.agents_app.chat.test_consumers import (
    _cookie,
    _open,
    _send_message,
    _types,
    _until,
    chat_settings,  # noqa: F401 (autouse fixture)
    close_thread_connections,  # noqa: F401 (autouse fixture)
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


def _event_at_the_turns_place(session):
    """An event of its own invocation stored as ``msg-p1.1``: the place of the first reply of
    the turn of client message ``p1``."""
    services.event_append(
        session=session,
        event=Event(
            id="msg-p1.1",
            invocation_id="e-elsewhere",
            author="user",
            content=types.Content(role="user", parts=[types.Part(text="planted")]),
        ),
    )


async def test_a_turn_whose_place_is_taken_ends_with_an_error_and_releases_its_claim(user, session):
    await database_sync_to_async(_event_at_the_turns_place)(session)
    communicator = await _open(session.id, await database_sync_to_async(_cookie)(user))

    await _send_message(communicator, "hello", "p1")
    frames = await _until(communicator, "turn_complete")

    errors = [frame["code"] for frame in frames if frame["type"] == "error"]
    assert errors == [TURN_BLOCKED_CODE]
    assert frames[-1]["interrupted"] is True
    assert not await database_sync_to_async(TurnClaim.objects.exists)()

    # Sent again, it is given up again at once, never left running.
    await _send_message(communicator, "hello", "p1")
    again = await _until(communicator, "turn_complete")
    assert [frame["code"] for frame in again if frame["type"] == "error"] == [TURN_BLOCKED_CODE]
    assert not await database_sync_to_async(TurnClaim.objects.exists)()

    # The message can be edited: no turn of the chat is left in progress.
    await communicator.send_json_to(
        {"type": "edit", "message_id": "msg-p1", "text": "hello again", "client_message_id": "p2"}
    )
    edited = await _until(communicator, "turn_complete")
    assert "turn_started" in _types(edited)
    assert [frame for frame in edited if frame["type"] == "error"] == []
    assert edited[-1]["interrupted"] is False
    await communicator.disconnect()


async def test_a_stopped_turn_whose_claim_renewal_finds_it_released_still_ends(
    user, session, settings, monkeypatch
):
    """A stopped (or shut down) turn releases its claim once its reply is stored; a renewal
    that then finds the claim gone must not cut the turn short again as taken over, or the
    chat never hears that it ended. Here the renewal's answer comes just before the
    release's, as it can on a loaded machine."""
    import asyncio

    from agents_app.chat import turn_driver

    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05
    released = asyncio.Event()
    release = turn_driver.turn_claim_release_if_ended_async

    async def keep(*, claim, lost=None):
        await released.wait()
        lost()  # the renewal found no claim: the turn had just released it itself

    async def release_then_renewal(*, claim):
        done = await release(claim=claim)
        released.set()
        for _ in range(3):
            await asyncio.sleep(0)
        return done

    monkeypatch.setattr(turn_driver, "turn_claim_keep", keep)
    monkeypatch.setattr(turn_driver, "turn_claim_release_if_ended_async", release_then_renewal)
    communicator = await _open(session.id, await database_sync_to_async(_cookie)(user))

    await _send_message(communicator, "tell me " + "a long story " * 40, "p1")
    frames = await _until(communicator, "delta")
    await communicator.send_json_to({"type": "cancel"})
    frames += await _until(communicator, "turn_complete")

    assert frames[-1]["interrupted"] is True
    assert released.is_set()
    await communicator.disconnect()


async def test_a_turns_claim_is_taken_with_its_session_read_and_released_with_its_reply(
    user, session, requires_postgres, round_trips_recorded
):
    """On PostgreSQL a new message's turn sends the read of its session (with the memory
    permissions) with the query that claims it, and the release of its claim with the store
    of its reply (one transaction: the claim goes only with the reply), never in round trips
    of their own; the turn still sees the conversation so far, and no claim is left."""
    communicator = await _open(session.id, await database_sync_to_async(_cookie)(user))
    await _send_message(communicator, "My name is Ana.", "p1")
    await _until(communicator, "turn_complete")
    trips = round_trips_recorded()

    await _send_message(communicator, "What is my name?", "p2")
    frames = await _until(communicator, "turn_complete")

    [claimed] = [trip for trip in trips if "INSERT INTO agents_app_turnclaim" in trip]
    assert "m.use_enabled" in claimed
    assert [trip for trip in trips if "m.use_enabled" in trip] == [claimed]
    [released] = [trip for trip in trips if "DELETE FROM agents_app_turnclaim" in trip]
    assert released.startswith("WITH claim AS (UPDATE")  # the reply's store
    assert not await database_sync_to_async(TurnClaim.objects.exists)()
    [reply] = [f for f in frames if f["type"] == "event" and f["event"]["author"] != "user"]
    assert "Ana" in reply["event"]["content"]["parts"][0]["text"]
    await communicator.disconnect()
