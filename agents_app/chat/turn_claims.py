"""Claims on chat turns: each turn runs in exactly one process, and none is silently lost.

Every turn is claimed (a ``TurnClaim`` row) just before its user message is
stored (by the chat socket, or by the runner when its caller holds no claim),
and the claim is released by the transaction that stores its final event
(reply, error or interruption; ``HeldClaim.release_read``), or just after when
that event was stored otherwise. While the turn runs, its process renews
the claim a third of ``TURN_LEASE_SECONDS`` apart. So an open turn (stored,
no final event) always has a claim row, and the row says whether a live
process holds it:

- a re-sent message or a Retry of a turn whose claim is live is not run
  again: the socket is told the turn is running and watches for its end;
- a claim not renewed for ``TURN_LEASE_SECONDS`` belongs to a process that
  died (SIGKILL, out of memory, a lost host): a re-send or a Retry takes it
  over, bumping its ``fence``, and runs the turn on from its stored events;
- a claim not renewed for ``TURN_INTERRUPTED_AFTER_SECONDS`` whose turn is
  still open is taken over by the sweeper (``agents_app.chat.turn_sweep``, a
  periodic task), which stores the turn's final event as interrupted with the
  error code ``server_stopped``, so the history and the chat say so and offer
  Retry.

Why a database row and not a Redis lock with expiry: the claim must hold on
the embedded default, which has no Redis, and it has to agree with the
stored events it guards, which live in the database; a row is taken with one
atomic statement (an insert that yields on conflict, or an update of an
expired row), on SQLite and PostgreSQL alike, so two re-sends or two tabs,
on one process or two, never both get it. Expiry and renewal make it a
lease; the fence that keeps a process whose lease ran out (a long pause, not
a death) from storing beside its successor is the events' own ids: each
event of a turn is named after its place in the turn (``runtime.turns``), so
of two processes only one can store the event at a given place, and the
other, refused, stops. A process also learns it lost the claim when a
renewal finds the fence moved on, and stops then.

On a turn's path, on PostgreSQL, a claim is written without waiting for its
commit to be flushed to disk (``synchronous_commit`` off for that transaction
alone): the flush is what a commit costs (4 ms at p50 here, tens of ms when the
disk is busy); a release that goes with the turn's final event is flushed with
that event. Losing such a write to a crash of the database server itself is
harmless. A taken claim is
followed by the turn's own events, whose commits do wait for the flush, and
PostgreSQL flushes its log in order, so a claim is on disk before any event it
guards is; a takeover lost with nothing stored after it leaves the old, expired
claim, which a re-send or the sweeper takes over again, and its would-be holder
finds its fence gone at its first renewal. A lost renewal leaves a lease older
than it is, renewed again a few seconds later, well inside the lease. A lost
release leaves a claim on an ended turn, which the sweeper releases. The
sweeper's own writes, off the turn's path, are flushed as usual.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import IntegrityError, connection

from agents_app.models import TurnClaim
from agents_app.runtime.turns import TurnProgress
from core import async_database
from core.async_database import NOTHING_READ, StoreRead
from core.outages import DATABASE_UNAVAILABLE_ERRORS
from sessions_app import selectors
from sessions_app.errors import SessionNotFoundError
from sessions_app.models import EventRecord

logger = logging.getLogger(__name__)


def holder_name(label: str) -> str:
    """Who holds a claim: this host and process, and ``label`` (the socket), for logs and staff."""
    return f"{socket.gethostname()}:{os.getpid()}:{label}"[:200]


@dataclass
class HeldClaim:
    """A claim this process holds, as of the fence it took it with."""

    id: int
    fence: int
    # Set as the turn's final event goes to be stored with the claim's release
    # (``release_read``), cleared should that store fail: a renewal that finds the claim gone
    # then found it released, not taken over, and nothing releases it again.
    released_with_final: bool = field(default=False, compare=False)

    def release_read(self) -> StoreRead:
        """The claim's release as statements to send after the turn's final event, in the
        round trip and the transaction that store it (``TurnStore``): a turn's end and the
        release it calls for then cost one round trip, and the claim goes only if the event
        was stored. Answers whether it released the claim."""
        return StoreRead(
            [
                (
                    f"DELETE FROM {_TABLE} WHERE id = %s AND fence = %s RETURNING id",
                    [self.id, self.fence],
                )
            ],
            lambda results: bool(results[0]),
        )


class TurnStart(Enum):
    """What a re-sent message, a new message or a Retry finds."""

    ANSWERED = "answered"  # the turn has ended (or was rewound): replay it, run nothing
    NOT_FOUND = "not_found"  # Retry of a message the session does not hold
    RUNNING = "running"  # a live process holds the turn: watch it
    NEW = "new"  # not stored yet: run it (claim held)
    RESUME = "resume"  # stored, no final event, its process gone: run it on (claim held)
    RETRY = "retry"  # ended interrupted or failed, Retry asked: run it again (claim held)


@dataclass
class TurnBegin:
    """The outcome of ``turn_begin``: what to do, the turn's stored events, and the claim
    held when the caller is to run the turn."""

    start: TurnStart
    stored: list[selectors.StoredEvent]
    progress: TurnProgress
    claim: HeldClaim | None = None
    # The answer of the read ``turn_begin_async`` was given to make with the claim, when it
    # was made (a new turn, claimed in the same round trip).
    with_answer: Any = None


def turn_progress(stored: list[selectors.StoredEvent]) -> TurnProgress:
    """Where the turn whose stored events are ``stored`` stands."""
    return TurnProgress.of(
        [item.event for item in stored], rewound=bool(stored) and stored[0].rewound
    )


def _turn_start(progress: TurnProgress, *, retry: bool) -> TurnStart:
    """What a message (or a Retry) of a turn standing at ``progress`` is to do, before the
    claim says whether it runs here."""
    if not progress.stored:
        return TurnStart.NOT_FOUND if retry else TurnStart.NEW
    if progress.open:
        return TurnStart.RESUME
    if retry and progress.retryable:
        return TurnStart.RETRY
    return TurnStart.ANSWERED


def turn_begin(
    *, session_id: str, user_event_id: str, holder: str, retry: bool = False
) -> TurnBegin:
    """Decide what a message (or, with ``retry``, a Retry) of the turn ``user_event_id`` does,
    and take the turn's claim when it is to run here.

    A message runs its turn when it is not stored yet, or stored without a final event and
    held by no live process; a Retry runs it again when it ended interrupted or failed. An
    ended turn is answered by replaying it; one a live process holds, by watching it.
    Raises SessionNotFoundError when the session is gone.
    """
    stored = selectors.stored_events_of_turn(session_key=session_id, user_event_id=user_event_id)
    begin = _turn_begin_from(stored, retry=retry)
    if begin.start in _CLAIMED:
        claim = turn_claim_take(session_id=session_id, user_event_id=user_event_id, holder=holder)
        begin = _claimed(begin, claim)
    return begin


async def turn_begin_async(
    *,
    session_id: str,
    user_event_id: str,
    holder: str,
    retry: bool = False,
    with_read: StoreRead | None = None,
) -> TurnBegin:
    """``turn_begin`` from an event loop: on PostgreSQL its read and its claim go from the
    loop itself (``core.async_database``), so starting a turn never waits for the one
    database thread of the process.

    A new message, the common case, costs one round trip: the turn's events are read and
    its claim is taken in the same query, the claim only if the user's message is not
    stored (so a re-sent message never claims an ended turn, not even for a moment), and
    ``with_read`` (what the turn reads first: its session) goes with them, its answer in
    ``with_answer`` when the turn was claimed so. A message already stored, or a Retry,
    takes its claim after the read, if it runs here, and leaves ``with_read`` to its caller.
    """
    if not async_database.available():
        return await database_sync_to_async(turn_begin)(
            session_id=session_id, user_event_id=user_event_id, holder=holder, retry=retry
        )
    read = selectors.stored_events_of_turn_read(session_key=session_id, user_event_id=user_event_id)
    with_answer = None
    if retry:
        begin = _turn_begin_from(await selectors.store_read_async(read), retry=True)
        taken = None
    else:
        claim_new = _claim_insert_if_new(session_id, user_event_id, holder, time.time())
        with_read = with_read or NOTHING_READ
        count = len(read.statements)
        try:
            results = await async_database.fetch_each(
                [*read.statements, _COMMIT_UNFLUSHED, claim_new, *with_read.statements],
                repeatable=False,
            )
        except IntegrityError:
            raise SessionNotFoundError("The session is gone.") from None
        begin = _turn_begin_from(read.assemble(results[:count]), retry=False)
        taken = results[count + 1]
        if taken:
            with_answer = with_read.assemble(results[count + 2 :])
    if taken:
        # Taken only while the message was not stored, so the read, made just before, found
        # it not stored either (events go only with their session): the turn is new.
        begin.with_answer = with_answer
        return _claimed(begin, HeldClaim(id=taken[0][0], fence=taken[0][1]))
    if begin.start in _CLAIMED:
        claim = await turn_claim_take_async(
            session_id=session_id, user_event_id=user_event_id, holder=holder
        )
        begin = _claimed(begin, claim)
    return begin


_CLAIMED = (TurnStart.NEW, TurnStart.RESUME, TurnStart.RETRY)


def _turn_begin_from(stored: list[selectors.StoredEvent], *, retry: bool) -> TurnBegin:
    progress = turn_progress(stored)
    return TurnBegin(start=_turn_start(progress, retry=retry), stored=stored, progress=progress)


def _claimed(begin: TurnBegin, claim: HeldClaim | None) -> TurnBegin:
    """The turn runs here with ``claim``; without one, a live process holds it: watch it."""
    if claim is None:
        return TurnBegin(start=TurnStart.RUNNING, stored=begin.stored, progress=begin.progress)
    begin.claim = claim
    return begin


_TABLE = TurnClaim._meta.db_table
_EVENTS = EventRecord._meta.db_table


def _claim_insert(session_id: str, user_event_id: str, holder: str, now: float) -> tuple[str, list]:
    """A new claim, or no row when the turn has one."""
    return (
        f"INSERT INTO {_TABLE} (session_id, user_event_id, holder, fence, created_at, "
        "renewed_at) VALUES (%s, %s, %s, 1, %s, %s) "
        "ON CONFLICT (session_id, user_event_id) DO NOTHING RETURNING id, fence",
        [session_id, user_event_id, holder, now, now],
    )


def _claim_insert_if_new(
    session_id: str, user_event_id: str, holder: str, now: float
) -> tuple[str, list]:
    """A new claim if the turn's user message is not stored and the turn has no claim; else
    no row."""
    return (
        f"INSERT INTO {_TABLE} (session_id, user_event_id, holder, fence, created_at, "
        "renewed_at) SELECT %s::varchar, %s::varchar, %s::varchar, 1, %s::float8, %s::float8 "
        f"WHERE NOT EXISTS (SELECT 1 FROM {_EVENTS} WHERE session_id = %s AND event_id = %s) "
        "ON CONFLICT (session_id, user_event_id) DO NOTHING RETURNING id, fence",
        [session_id, user_event_id, holder, now, now, session_id, user_event_id],
    )


def _claim_takeover(
    session_id: str, user_event_id: str, holder: str, now: float
) -> tuple[str, list]:
    """The turn's claim, if its lease ran out, under the next fence; else no row."""
    return (
        f"UPDATE {_TABLE} SET holder = %s, fence = fence + 1, renewed_at = %s "
        "WHERE session_id = %s AND user_event_id = %s AND renewed_at < %s "
        "RETURNING id, fence",
        [holder, now, session_id, user_event_id, now - settings.TURN_LEASE_SECONDS],
    )


# Sent before a claim's write in the same query (one transaction): its commit does not wait for
# the flush to disk. Why that is harmless: the module's docstring.
_COMMIT_UNFLUSHED = ("SELECT set_config('synchronous_commit', 'off', true)", [])


async def _claim_write_async(
    statement: tuple[str, list], *, repeatable: bool = False
) -> tuple | None:
    """The row ``statement`` returns, if any: one round trip from the event loop, its commit
    not flushed (``_COMMIT_UNFLUSHED``); sent again on a fresh connection if a kept one is
    found dead, when ``repeatable`` (a statement whose second run changes nothing more)."""
    try:
        _, rows = await async_database.fetch_each(
            [_COMMIT_UNFLUSHED, statement], repeatable=repeatable
        )
    except IntegrityError:
        raise SessionNotFoundError("The session is gone.") from None
    return rows[0] if rows else None


async def turn_claim_take_async(
    *, session_id: str, user_event_id: str, holder: str
) -> HeldClaim | None:
    """``turn_claim_take`` from an event loop: on PostgreSQL without the database thread, and
    without waiting for the disk."""
    if not async_database.available():
        return await database_sync_to_async(turn_claim_take)(
            session_id=session_id, user_event_id=user_event_id, holder=holder
        )
    now = time.time()
    row = await _claim_write_async(_claim_insert(session_id, user_event_id, holder, now))
    if row is None:
        row = await _claim_write_async(_claim_takeover(session_id, user_event_id, holder, now))
    return HeldClaim(id=row[0], fence=row[1]) if row else None


def turn_claim_take(*, session_id: str, user_event_id: str, holder: str) -> HeldClaim | None:
    """The turn's claim for ``holder``: a new one, or one whose lease ran out (its fence moved
    on); None while a live process holds it. Each attempt is one atomic statement."""
    now = time.time()
    with connection.cursor() as cursor:
        try:
            cursor.execute(*_claim_insert(session_id, user_event_id, holder, now))
            row = cursor.fetchone()  # SQLite checks the foreign key as the row is returned
        except IntegrityError:
            raise SessionNotFoundError(f"Session {session_id!r} not found.") from None
        if row is None:
            cursor.execute(*_claim_takeover(session_id, user_event_id, holder, now))
            row = cursor.fetchone()
    return HeldClaim(id=row[0], fence=row[1]) if row else None


def turn_claim_renew(*, claim: HeldClaim) -> bool:
    """Renew the lease; False when the claim was taken over (or is gone): stop the turn then."""
    return bool(
        TurnClaim.objects.filter(pk=claim.id, fence=claim.fence).update(renewed_at=time.time())
    )


async def turn_claim_renew_async(*, claim: HeldClaim) -> bool:
    """``turn_claim_renew`` from an event loop, on PostgreSQL without the database thread."""
    if not async_database.available():
        return await database_sync_to_async(turn_claim_renew)(claim=claim)
    row = await _claim_write_async(
        (
            f"UPDATE {_TABLE} SET renewed_at = %s WHERE id = %s AND fence = %s RETURNING id",
            [time.time(), claim.id, claim.fence],
        )
    )
    return row is not None


async def turn_claim_keep(*, claim: HeldClaim, lost: Callable[[], None] | None = None) -> None:
    """Renew ``claim`` a third of ``TURN_LEASE_SECONDS`` apart for as long as its turn runs
    (the caller cancels this task when the turn is over). Once another process has taken the
    claim over, call ``lost`` and stop: the turn is the other process's now, and its events'
    ids refuse whatever this one would still store. A renewal the database does not answer is
    logged and tried again at the next one; the lease outlasts two missed renewals."""
    while True:
        await asyncio.sleep(settings.TURN_LEASE_SECONDS / 3)
        try:
            kept = await turn_claim_renew_async(claim=claim)
        except DATABASE_UNAVAILABLE_ERRORS as error:
            logger.warning("turn claim %s not renewed, database unavailable: %s", claim.id, error)
            continue
        if not kept:
            if claim.released_with_final:
                return
            logger.warning("turn claim %s was taken over by another process", claim.id)
            if lost is not None:
                lost()
            return


def turn_claim_release(*, claim: HeldClaim) -> None:
    """Give the claim up once the turn's final event is stored (a taken-over claim is left to
    its new holder; one released with the final event is gone already)."""
    if claim.released_with_final:
        return
    TurnClaim.objects.filter(pk=claim.id, fence=claim.fence).delete()


async def turn_claim_release_async(*, claim: HeldClaim) -> None:
    """``turn_claim_release`` from an event loop, on PostgreSQL without the database thread."""
    if claim.released_with_final:
        return
    if not async_database.available():
        await database_sync_to_async(turn_claim_release)(claim=claim)
        return
    await _claim_write_async(
        (
            f"DELETE FROM {_TABLE} WHERE id = %s AND fence = %s RETURNING id",
            [claim.id, claim.fence],
        ),
        repeatable=True,
    )


def turn_claim_release_if_ended(*, claim: HeldClaim) -> bool:
    """Release the claim if its turn has a final event (stored while it was cut short); an
    open turn keeps its claim, so that a re-send or the sweeper ends it. Whether released."""
    if claim.released_with_final:
        return True
    row = TurnClaim.objects.filter(pk=claim.id, fence=claim.fence).values_list(
        "session_id", "user_event_id"
    )
    found = row.first()
    if found is None:
        return False
    session_id, user_event_id = found
    stored = selectors.stored_events_of_turn(session_key=session_id, user_event_id=user_event_id)
    if turn_progress(stored).open:
        return False
    turn_claim_release(claim=claim)
    return True


async def turn_claim_release_if_ended_async(*, claim: HeldClaim) -> bool:
    """``turn_claim_release_if_ended`` from an event loop, for a turn cut short: a database
    outage leaves the claim (logged) for the sweeper to deal with."""
    try:
        return await database_sync_to_async(turn_claim_release_if_ended)(claim=claim)
    except DATABASE_UNAVAILABLE_ERRORS as error:
        logger.warning("turn claim %s not released, database unavailable: %s", claim.id, error)
        return False
