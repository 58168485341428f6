"""Claims on chat turns (``agents_app.chat.turn_claims``): what a message, a re-send or a Retry of a
turn starts, and leases that run out when their process dies."""

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from agents_app.chat.turn_claims import (
    HeldClaim,
    TurnStart,
    turn_begin,
    turn_begin_async,
    turn_claim_keep,
    turn_claim_release,
    turn_claim_release_async,
    turn_claim_release_if_ended,
    turn_claim_renew,
    turn_claim_renew_async,
    turn_claim_take,
)
from agents_app.models import TurnClaim
from core import async_database
from sessions_app import services
from sessions_app.errors import SessionNotFoundError
from sessions_app.selectors import store_read_run
from tests.agents_app.chat.turns import agent_event, chat_message, claim_age
from tests.factories import session_key

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("turn_leases")]

APP = "chat"


def test_a_new_message_takes_the_claim_and_a_second_one_finds_it_running(session):
    first = turn_begin(session_id=session_key(session), user_event_id="msg-m1", holder="a")
    second = turn_begin(session_id=session_key(session), user_event_id="msg-m1", holder="b")

    assert first.start is TurnStart.NEW and first.claim is not None
    assert second.start is TurnStart.RUNNING and second.claim is None


def test_an_open_turn_whose_holder_went_silent_is_resumed_under_a_new_fence(session):
    chat_message(session)
    first = turn_begin(session_id=session_key(session), user_event_id="msg-m1", holder="a")
    assert first.start is TurnStart.RESUME  # stored, no claim, no final: its process is gone

    claim_age(first.claim, 16)
    second = turn_begin(session_id=session_key(session), user_event_id="msg-m1", holder="b")

    assert second.start is TurnStart.RESUME
    assert second.claim.fence == first.claim.fence + 1
    assert [event.id for event in second.progress.events] == ["msg-m1"]
    assert turn_claim_renew(claim=first.claim) is False, "the silent holder learns it lost"
    assert turn_claim_renew(claim=second.claim) is True


def test_a_live_claim_is_not_taken(session):
    chat_message(session)
    first = turn_begin(session_id=session_key(session), user_event_id="msg-m1", holder="a")
    claim_age(first.claim, 10)

    assert (
        turn_claim_take(session_id=session_key(session), user_event_id="msg-m1", holder="b") is None
    )


def test_an_ended_turn_is_answered_whatever_asks(session):
    user_event = chat_message(session)
    agent_event(session, user_event, 1, turn_complete=True)

    for retry in (False, True):
        begin = turn_begin(
            session_id=session_key(session), user_event_id="msg-m1", holder="a", retry=retry
        )
        assert begin.start is TurnStart.ANSWERED and begin.claim is None
        assert [item.event.id for item in begin.stored] == ["msg-m1", "msg-m1.1"]


def test_retry_runs_an_interrupted_or_failed_turn_again_and_nothing_unknown(session):
    user_event = chat_message(session)
    agent_event(session, user_event, 1, turn_complete=True, interrupted=True)
    failed = chat_message(session, "m2")
    agent_event(session, failed, 1, turn_complete=True, error_code="model_unavailable")

    resend = turn_begin(session_id=session_key(session), user_event_id="msg-m1", holder="a")
    retried = turn_begin(
        session_id=session_key(session), user_event_id="msg-m1", holder="a", retry=True
    )
    failed_retried = turn_begin(
        session_id=session_key(session), user_event_id="msg-m2", holder="a", retry=True
    )
    unknown = turn_begin(
        session_id=session_key(session), user_event_id="msg-zz", holder="a", retry=True
    )

    assert resend.start is TurnStart.ANSWERED, "a re-send replays an interrupted turn"
    assert retried.start is TurnStart.RETRY and retried.claim is not None
    assert failed_retried.start is TurnStart.RETRY
    assert unknown.start is TurnStart.NOT_FOUND
    assert not TurnClaim.objects.filter(user_event_id="msg-zz").exists()


def test_a_rewound_turn_is_never_run_again(session):
    user_event = chat_message(session)
    agent_event(session, user_event, 1, turn_complete=True, interrupted=True)
    services.session_rewind(
        app_name=APP,
        user_id=session.user_id,
        session_id=session.id,
        rewind_before_invocation_id=user_event.invocation_id,
    )

    begin = turn_begin(
        session_id=session_key(session), user_event_id="msg-m1", holder="a", retry=True
    )

    assert begin.start is TurnStart.ANSWERED


def test_a_claim_on_a_deleted_session_is_session_not_found(session):
    key = session_key(session)
    services.session_delete(app_name=APP, user_id=session.user_id, session_id=session.id)

    with pytest.raises(SessionNotFoundError):
        turn_begin(session_id=key, user_event_id="msg-m1", holder="a")


def test_a_claim_is_released_only_by_its_holder_and_only_once_the_turn_ended(session):
    user_event = chat_message(session)
    first = turn_begin(session_id=session_key(session), user_event_id="msg-m1", holder="a").claim

    assert turn_claim_release_if_ended(claim=first) is False
    agent_event(session, user_event, 1, turn_complete=True)
    stale = HeldClaim(id=first.id, fence=first.fence + 5)
    turn_claim_release(claim=stale)
    assert TurnClaim.objects.count() == 1
    assert turn_claim_release_if_ended(claim=first) is True
    assert TurnClaim.objects.count() == 0


async def test_a_claim_released_with_its_turns_reply_is_not_taken_for_lost(session, settings):
    """A claim released in the transaction of its turn's final event (``release_read``): its
    keeper, finding it gone at the next renewal, stops without calling the turn lost (taken
    over by another process)."""
    settings.TURN_LEASE_SECONDS = 0.03
    key = await sync_to_async(session_key)(session)
    claim = (await turn_begin_async(session_id=key, user_event_id="msg-m1", holder="a")).claim
    claim.released_with_final = True
    assert await sync_to_async(store_read_run)(claim.release_read()) is True
    lost = []

    await asyncio.wait_for(turn_claim_keep(claim=claim, lost=lambda: lost.append(True)), 5)

    assert lost == []
    assert await TurnClaim.objects.acount() == 0


def test_two_processes_claiming_one_turn_at_once_get_it_once(session, requires_postgres):
    """Two threads, two database connections, the same instant: one claim."""
    chat_message(session)
    start = threading.Barrier(8)
    outcomes = []

    def claim(holder):
        try:
            start.wait()
            outcomes.append(
                turn_begin(
                    session_id=session_key(session), user_event_id="msg-m1", holder=holder
                ).start
            )
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claim, args=(f"p{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(start.value for start in outcomes) == ["resume"] + ["running"] * 7


async def test_from_an_event_loop_a_new_message_is_claimed_once_and_an_ended_one_never(
    session, requires_postgres
):
    """The socket's path on PostgreSQL: the read and the claim of a new message in one query;
    eight sockets sending it at once start it once; a re-send of the ended turn replays it
    without claiming it, not even for a moment."""
    key = await sync_to_async(session_key)(session)
    begins = await asyncio.gather(
        *(
            turn_begin_async(session_id=key, user_event_id="msg-m1", holder=f"s{n}")
            for n in range(8)
        )
    )
    assert sorted(begin.start.value for begin in begins) == ["new"] + ["running"] * 7
    (claimed,) = [begin for begin in begins if begin.claim is not None]
    user_event = await sync_to_async(chat_message)(session)
    await sync_to_async(agent_event)(session, user_event, 1, turn_complete=True)
    await turn_claim_release_async(claim=claimed.claim)

    again = await turn_begin_async(session_id=key, user_event_id="msg-m1", holder="s9")

    assert again.start is TurnStart.ANSWERED and again.claim is None
    assert await TurnClaim.objects.acount() == 0


async def test_claim_writes_leave_the_connections_flushing_every_other_commit(
    session, requires_postgres
):
    """A claim's commit skips the flush to disk; the events written on the same kept
    connections afterwards must not."""
    begin = await turn_begin_async(
        session_id=await sync_to_async(session_key)(session), user_event_id="msg-m1", holder="a"
    )
    assert await turn_claim_renew_async(claim=begin.claim) is True
    await turn_claim_release_async(claim=begin.claim)

    settings_seen = await asyncio.gather(
        *(
            async_database.fetch_each(
                [("SELECT current_setting('synchronous_commit'), pg_sleep(0.2)::text", [])]
            )
            for _ in range(async_database.CONNECTIONS_PER_LOOP)
        )
    )

    assert [rows[0][0][0] for rows in settings_seen] == ["on"] * async_database.CONNECTIONS_PER_LOOP


async def test_a_release_on_a_connection_the_server_ended_is_sent_again_on_a_fresh_one(
    session, requires_postgres, monkeypatch
):
    """A database restart ends the event loop's kept connections; one that hangs up just after
    it was found quiet fails the statement sent on it. The turn's claim is released all the
    same (a delete of that claim is safe to send twice), and no claim is left behind."""
    begin = await turn_begin_async(
        session_id=await sync_to_async(session_key)(session), user_event_id="msg-m1", holder="a"
    )
    ended = await sync_to_async(_other_connections_ended, thread_sensitive=False)()
    assert ended > 0
    # The kept connection passes the quiet check, as when the server hangs up right after it.
    monkeypatch.setattr(async_database, "_quiet", lambda connection: True)

    await turn_claim_release_async(claim=begin.claim)

    assert await TurnClaim.objects.acount() == 0


def _other_connections_ended() -> int:
    """End every other connection to the test database, as a restart does; how many."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        (ended,) = cursor.fetchone()
    connections.close_all()
    return ended
