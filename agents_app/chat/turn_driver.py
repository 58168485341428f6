"""Seeing one client message's turn through for a chat socket: run it, resume it after its
process died, retry it, watch it while another process runs it, or replay it once it ended.

Which of these happens is decided by the turn's stored events and its claim
(``turn_claims``); while this socket runs the turn it keeps the claim alive, and
should another process take it over, the socket goes back to watching. A turn goes on
running when its socket closes (``detach``): the page that reloads, or another tab, watches
it and gets its reply streamed live (``turn_relay``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from channels.db import database_sync_to_async
from google.genai import types

from agents_app.chat.edits import Rewrite, RewriteRefusedError, chat_turn_rewrite
from agents_app.chat.protocol import (
    MESSAGE_NOT_STORED,
    REPLY_NOT_STORED,
    TURN_BLOCKED,
    TURN_BLOCKED_CODE,
)
from agents_app.chat.turn_claims import (
    HeldClaim,
    TurnBegin,
    TurnStart,
    turn_begin_async,
    turn_claim_keep,
    turn_claim_release_async,
    turn_claim_release_if_ended_async,
    turn_progress,
)
from agents_app.chat.turn_relay import (
    RELAY_FLUSH_SECONDS,
    TurnRelay,
    turn_stop_ask,
    turn_watch_ask,
    turn_watch_leave,
)
from agents_app.chat.turns import ChatTurn, runner_events_cancel
from agents_app.runtime.runner import DuplicateTurnError, Runner
from agents_app.runtime.turn_store import TurnBlockedError, TurnTakenOverError
from agents_app.runtime.turns import CANCEL_TAKEN_OVER, cancel_reason
from core.metrics import turn_observe, turn_outcome
from core.outages import DATABASE_UNAVAILABLE_CODE, DATABASE_UNAVAILABLE_ERRORS
from core.shutdown import draining
from sessions_app import selectors
from sessions_app.errors import SessionNotFoundError
from sessions_app.selectors import StoredEvent

logger = logging.getLogger(__name__)

# How often a socket watching a turn that runs elsewhere looks for its end (or its death).
TURN_WATCH_SECONDS = 1.0
# Seconds before each attempt to read a turn again after the database failed it: a restart
# of PostgreSQL takes a second or two, a connection ended alone is replaced at once.
OUTAGE_READ_DELAYS = (0.0, 0.5, 1.0, 2.0)
# Times a turn the database failed is run on once it answers again (its model asked again).
RUNS_AFTER_OUTAGE = 1


@dataclass
class ChatTurnDriver:
    """The turns of one socket: its user's, in its session, run by ``runner``; errors go out
    through ``error``, and ``closing`` says whether the socket is going away."""

    runner: Runner
    user_pk: int
    session_id: str
    # The key of the session row, which turn claims and stored-event reads name it by.
    session_key: str
    holder: str
    error: Callable[[str, str], Awaitable[None]]
    closing: Callable[[], bool]
    # The socket's channel on the channel layer, where the turns it watches are relayed to.
    channel: str = ""
    # The turn this socket runs, or watches, now.
    running: ChatTurn | None = None
    watched: ChatTurn | None = None
    watched_changed: asyncio.Event = field(default_factory=asyncio.Event)

    def detach(self) -> bool:
        """The socket is gone: whether its turn runs on without it (one it runs, which from
        now on listens for its watchers itself; one it watches is only stopped)."""
        turn = self.running
        if turn is None:
            return False
        if turn.relay is not None:
            turn.relay.listen()
        return True

    def relay_asked(self, message: dict[str, Any]) -> None:
        """An ask meant for a running turn (to watch it or stop it), which reached this socket
        through its user's group: passed to the turn this socket runs, which takes it if it
        is the one named (``TurnRelay.asked``)."""
        turn = self.running
        if turn is not None and turn.relay is not None:
            turn.relay.asked(message)

    async def relayed(self, user_event_id: str, frame: dict[str, Any]) -> None:
        """A frame of the turn this socket watches, relayed by the socket that runs it."""
        turn = self.watched
        if turn is None or turn.user_event_id != user_event_id:
            return
        await turn.relayed(frame)
        if frame["type"] == "event" and frame["event"].get("turn_complete"):
            self.watched_changed.set()

    async def begin(self, turn: ChatTurn, *, retry: bool) -> TurnBegin:
        """What the turn's message (or Retry) does now, with the claim when it runs here (and,
        for a new message, the session the turn reads first, read in the same round trip)."""
        return await turn_begin_async(
            session_id=self.session_key,
            user_event_id=turn.user_event_id,
            holder=self.holder,
            retry=retry,
            with_read=None
            if retry
            else self.runner.session_read(user_id=str(self.user_pk), session_id=self.session_id),
        )

    async def claim_release(self, claim: HeldClaim) -> None:
        """Give the claim up. With the database unreachable the claim stays, and the turn goes
        on to its end all the same: the sweeper (``agents_app.chat.turn_sweep``) releases
        claims left on ended turns, and one on a turn still open is what a resend finds."""
        try:
            await turn_claim_release_async(claim=claim)
        except DATABASE_UNAVAILABLE_ERRORS as error:
            logger.warning("turn claim %s not released, database unavailable: %s", claim.id, error)

    async def rewrite(
        self,
        turn: ChatTurn,
        begin: TurnBegin,
        *,
        app_name: str,
        rewrite: tuple[Rewrite, str],
        text: str | None,
    ) -> str | None:
        """Rewind for an edit or a regeneration and send the rewind; the text the turn runs (its
        attached files put on ``turn``), or None (the claim released, the client told why) when
        the rewind was refused."""
        try:
            done = await database_sync_to_async(chat_turn_rewrite)(
                user_pk=self.user_pk,
                app_name=app_name,
                session_id=self.session_id,
                session_key=self.session_key,
                rewrite=rewrite[0],
                message_id=rewrite[1],
                client_message_id=turn.client_message_id,
                text=text,
            )
        except RewriteRefusedError as refused:
            await self.claim_release(begin.claim)
            await self.error(refused.code, str(refused))
            return None
        except (SessionNotFoundError, *DATABASE_UNAVAILABLE_ERRORS) as error:
            logger.warning("chat rewind not made in %s: %s", self.session_id, error)
            with contextlib.suppress(*DATABASE_UNAVAILABLE_ERRORS):
                await self.claim_release(begin.claim)
            await self.error(
                "session_not_found"
                if isinstance(error, SessionNotFoundError)
                else DATABASE_UNAVAILABLE_CODE,
                "The conversation could not be rewound; nothing was changed.",
            )
            await turn.complete_send(duplicate=False)
            return None
        turn.attachments = done.attachments
        # The session read with the claim is the one before the rewind.
        begin.with_answer = None
        await turn.rewind_send(done.rewind)
        return done.text

    async def drive(self, turn: ChatTurn, text: str | None, begin: TurnBegin) -> None:
        """See the turn through: run it while this socket holds its claim; while a live process
        holds it, watch it (the reply so far and the rest as it streams, its stored events,
        then its end, reach this socket), and run it on here should that process die; replay
        it once it has ended."""
        try:
            await self._drive(turn, text, begin)
        finally:
            if self.watched is turn:
                self.watched = None
                await turn_watch_leave(
                    session_key=self.session_key,
                    user_event_id=turn.user_event_id,
                    channel=self.channel,
                )

    async def _drive(self, turn: ChatTurn, text: str | None, begin: TurnBegin) -> None:
        while True:
            if begin.start is TurnStart.ANSWERED:
                await self._relayed_end_wait(turn)
                await turn.replay(begin.stored)
                return
            if begin.start is TurnStart.RUNNING:
                await turn.running_send(begin.stored)
                if draining() or self.closing():
                    return
                await self._watch(turn)
            elif begin.start is TurnStart.NEW and text is None:
                # A Retry of a message whose process died before storing it: nothing to run.
                await self.claim_release(begin.claim)
                await self.error("turn_not_found", "This chat has no message with that id.")
                return
            elif await self._run(turn, text, begin):
                return
            try:
                begin = await self.begin(turn, retry=False)
            except DATABASE_UNAVAILABLE_ERRORS as error:
                logger.warning("watched turn not read, database unavailable: %s", error)
                begin = TurnBegin(start=TurnStart.RUNNING, stored=[], progress=begin.progress)
            except SessionNotFoundError:
                await self.error("session_not_found", "This session no longer exists.")
                await turn.complete_send(duplicate=False)
                return

    async def _relayed_end_wait(self, turn: ChatTurn) -> None:
        """A turn this socket watched, found ended in the database before its relayed end came:
        its last frames may still be on their way (the socket that ran it lets them go for up
        to ``RELAY_FLUSH_SECONDS``), so this socket waits as long for them, and the reply it
        streamed ends as stored rather than a chunk short."""
        if self.watched is turn and turn.watched_seq >= 0 and not self.watched_changed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.watched_changed.wait(), RELAY_FLUSH_SECONDS)

    async def _watch(self, turn: ChatTurn) -> None:
        """Wait while another socket runs the turn: its frames are relayed here as it sends
        them, and its end (or, for want of a relayed end, ``TURN_WATCH_SECONDS``) wakes this
        one up to read the turn again. A ``cancel`` meanwhile asks that socket to stop it.
        Until some of its text came, the turn is asked again each time: it may have started
        listening for watchers after the first ask."""
        if self.watched is not turn or turn.watched_seq < 0:
            self.watched = turn
            await turn_watch_ask(
                user_pk=self.user_pk,
                session_key=self.session_key,
                user_event_id=turn.user_event_id,
                reply_to=self.channel,
            )
        self.watched_changed.clear()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.watched_changed.wait(), TURN_WATCH_SECONDS)
        except asyncio.CancelledError:
            if self.closing():
                raise
            # A Stop, handled here: this socket watches on until the turn ends, as stopped.
            asyncio.current_task().uncancel()
            await turn_stop_ask(
                user_pk=self.user_pk,
                session_key=self.session_key,
                user_event_id=turn.user_event_id,
            )

    async def _run(self, turn: ChatTurn, text: str | None, begin: TurnBegin) -> bool:
        """Run one turn under this socket's claim and stream it to the client; False when
        another process took the turn over (the caller watches it then).

        Ends with ``turn_complete`` whatever happens once the turn was accepted,
        except when the socket itself went away.
        """
        claim = begin.claim
        turn_task = asyncio.current_task()

        def lost() -> None:
            # A turn already being cut short (a Stop, a shutdown) releases its claim as it
            # ends: a renewal finding it gone then is that release, not another process.
            if not turn_task.cancelling():
                turn_task.cancel(CANCEL_TAKEN_OVER)

        keeper = asyncio.create_task(turn_claim_keep(claim=claim, lost=lost))

        def stop() -> None:
            if self.running is turn and turn.final is None:
                turn_task.cancel()

        turn.relay = TurnRelay(
            session_key=self.session_key, user_event_id=turn.user_event_id, stop=stop
        )
        self.running = turn
        try:
            ran = await self._stream(turn, text, begin)
            if ran is _Ran.DATABASE_LOST:
                ran = await self._after_outage(turn, text, claim)
        finally:
            keeper.cancel()
            self.running = None
            # Not waited for: the socket takes its next message as soon as the turn is over.
            turn.relay.close()
            turn.relay = None
        if ran is _Ran.TAKEN_OVER:
            return False
        if turn.final is None and ran is not _Ran.DATABASE_LOST:
            # Cut short: send whatever of the turn got stored (the interrupted reply).
            await turn.stored_send()
        if turn.final is not None:
            await self.claim_release(claim)
        turn_observe(
            outcome=turn_outcome(final_event=turn.final), seconds=time.monotonic() - turn.started
        )
        await turn.complete_send(duplicate=False)
        return True

    async def _stream(self, turn: ChatTurn, text: str | None, begin: TurnBegin) -> _Ran:
        """Run the turn from where ``begin`` found it and stream its events to the client."""
        claim = begin.claim
        if begin.start is TurnStart.NEW:
            events = self.runner.run_async(
                user_id=str(self.user_pk),
                session_id=self.session_id,
                new_message=types.Content(
                    role="user", parts=[types.Part(text=text)] if text.strip() else []
                ),
                client_message_id=turn.client_message_id,
                attachments=turn.attachments,
                claim=claim,
                session_answer=begin.with_answer,
            )
        else:
            await turn.resumed_send(begin.stored)
            events = self.runner.continue_async(
                user_id=str(self.user_pk),
                session_id=self.session_id,
                progress=begin.progress,
                claim=claim,
            )
        try:
            async for event in events:
                await turn.event_forward(
                    event, None if event.partial else self.runner.store.written_take(event)
                )
        except (DuplicateTurnError, TurnTakenOverError):
            await turn_claim_release_if_ended_async(claim=claim)
            return _Ran.TAKEN_OVER
        except TurnBlockedError as error:
            logger.error("chat turn given up in session %s: %s", self.session_id, error)
            await self.claim_release(claim)
            await self.error(TURN_BLOCKED_CODE, TURN_BLOCKED)
        except SessionNotFoundError:
            await self.error("session_not_found", "This session no longer exists.")
        except DATABASE_UNAVAILABLE_ERRORS as error:
            logger.error(
                "chat turn failed in session %s, database unavailable: %s", self.session_id, error
            )
            # After the reply was stored (the work that follows it failed), nothing is lost.
            if turn.final is None:
                return _Ran.DATABASE_LOST
        except asyncio.CancelledError as cancel:
            reason = cancel_reason(cancel)
            await runner_events_cancel(events, reason)
            return await self._cancelled(claim, reason)
        except Exception:
            logger.exception("chat turn failed in session %s", self.session_id)
            await self.error("internal_error", "The turn failed on the server.")
        return _Ran.ENDED

    async def _cancelled(self, claim: HeldClaim, reason: str | None) -> _Ran:
        if reason == CANCEL_TAKEN_OVER:
            asyncio.current_task().uncancel()
            return _Ran.TAKEN_OVER
        await turn_claim_release_if_ended_async(claim=claim)
        if self.closing():
            raise asyncio.CancelledError(reason)
        return _Ran.ENDED

    async def _after_outage(self, turn: ChatTurn, text: str | None, claim: HeldClaim) -> _Ran:
        """After the database failed the turn before its final event reached the client: once
        the database answers again (``OUTAGE_READ_DELAYS``), read what the turn stored (the
        failure may have come after a write was committed). A turn found ended was stored: it
        ends as usual. One not ended is run on, once, under the same claim: the user's
        message stored first if it is not. When the database stays away, or fails the turn
        again, the client is told what is stored: its message, or nothing (then the message
        can be sent again with its ``client_message_id``)."""
        runs_left = RUNS_AFTER_OUTAGE
        try:
            while True:
                stored = await self._stored_once_back(turn)
                if stored is None:
                    break
                progress = turn_progress(stored)
                if progress.stored and not progress.open:
                    await turn.ended_send(stored, progress.final)
                    return _Ran.ENDED
                if not runs_left:
                    break
                runs_left -= 1
                start = TurnStart.RESUME if progress.stored else TurnStart.NEW
                begin = TurnBegin(start=start, stored=stored, progress=progress, claim=claim)
                ran = await self._stream(turn, text, begin)
                if ran is not _Ran.DATABASE_LOST:
                    return ran
        except asyncio.CancelledError as cancel:
            ran = await self._cancelled(claim, cancel_reason(cancel))
            if ran is _Ran.TAKEN_OVER:
                return ran
        message_stored = turn.user_event_id in turn.sent_event_ids
        await self.error(
            DATABASE_UNAVAILABLE_CODE, REPLY_NOT_STORED if message_stored else MESSAGE_NOT_STORED
        )
        return _Ran.DATABASE_LOST

    async def _stored_once_back(self, turn: ChatTurn) -> list[StoredEvent] | None:
        """The turn's stored events, read as soon as the database answers; None when it did
        not within ``OUTAGE_READ_DELAYS``."""
        for delay in OUTAGE_READ_DELAYS:
            await asyncio.sleep(delay)
            try:
                return await selectors.store_read_async(
                    selectors.stored_events_of_turn_read(
                        session_key=self.session_key, user_event_id=turn.user_event_id
                    )
                )
            except DATABASE_UNAVAILABLE_ERRORS as error:
                logger.warning("turn not read, database unavailable: %s", error)
        return None


class _Ran(Enum):
    """How one run of a turn on this socket went."""

    ENDED = "ended"  # its final event stored and sent, or an error told the client
    TAKEN_OVER = "taken_over"  # another process runs the turn now
    DATABASE_LOST = "database_lost"  # the database failed it before its final event was sent
