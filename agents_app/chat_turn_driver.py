"""Seeing one client message's turn through for a chat socket: run it, resume it after its
process died, retry it, watch it while another process runs it, or replay it once it ended.

Which of these happens is decided by the turn's stored events and its claim
(``turn_claims``); while this socket runs the turn it keeps the claim alive, and
should another process take it over, the socket goes back to watching.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from channels.db import database_sync_to_async
from google.genai import types

from agents_app.chat_edits import Rewrite, RewriteRefusedError, chat_turn_rewrite
from agents_app.chat_protocol import MESSAGE_NOT_STORED, REPLY_NOT_STORED
from agents_app.chat_turns import ChatTurn, runner_events_cancel
from agents_app.runtime.runner import DuplicateTurnError, Runner
from agents_app.runtime.turn_store import TurnTakenOverError
from agents_app.runtime.turns import CANCEL_TAKEN_OVER, cancel_reason
from agents_app.turn_claims import (
    HeldClaim,
    TurnBegin,
    TurnStart,
    turn_begin_async,
    turn_claim_keep,
    turn_claim_release_async,
    turn_claim_release_if_ended_async,
)
from core.metrics import turn_observe, turn_outcome
from core.outages import DATABASE_UNAVAILABLE_CODE, DATABASE_UNAVAILABLE_ERRORS
from core.shutdown import draining
from sessions_app.errors import SessionNotFoundError

logger = logging.getLogger(__name__)

# How often a socket watching a turn that runs elsewhere looks for its end (or its death).
TURN_WATCH_SECONDS = 1.0


@dataclass
class ChatTurnDriver:
    """The turns of one socket: its user's, in its session, run by ``runner``; errors go out
    through ``error``, and ``closing`` says whether the socket is going away."""

    runner: Runner
    user_pk: int
    session_id: str
    holder: str
    error: Callable[[str, str], Awaitable[None]]
    closing: Callable[[], bool]

    async def begin(self, turn: ChatTurn, *, retry: bool) -> TurnBegin:
        """What the turn's message (or Retry) does now, with the claim when it runs here."""
        return await turn_begin_async(
            session_id=self.session_id,
            user_event_id=turn.user_event_id,
            holder=self.holder,
            retry=retry,
        )

    async def claim_release(self, claim: HeldClaim) -> None:
        await turn_claim_release_async(claim=claim)

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
        await turn.rewind_send(done.rewind)
        return done.text

    async def drive(self, turn: ChatTurn, text: str | None, begin: TurnBegin) -> None:
        """See the turn through: run it while this socket holds its claim; while a live process
        holds it, watch it (its stored events, then its end, reach this socket), and run it
        on here should that process die; replay it once it has ended."""
        while True:
            if begin.start is TurnStart.ANSWERED:
                await turn.replay(begin.stored)
                return
            if begin.start is TurnStart.RUNNING:
                await turn.running_send(begin.stored)
                if draining():
                    return
                try:
                    await asyncio.sleep(TURN_WATCH_SECONDS)
                except asyncio.CancelledError:
                    if self.closing():
                        raise
                    await self.error(
                        "turn_running_elsewhere",
                        "This reply is being written by another connection; it cannot be "
                        "stopped from here.",
                    )
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

    async def _run(self, turn: ChatTurn, text: str | None, begin: TurnBegin) -> bool:
        """Run one turn under this socket's claim and stream it to the client; False when
        another process took the turn over (the caller watches it then).

        Ends with ``turn_complete`` whatever happens once the turn was accepted,
        except when the socket itself went away.
        """
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
            )
        else:
            await turn.resumed_send(begin.stored)
            events = self.runner.continue_async(
                user_id=str(self.user_pk), session_id=self.session_id, progress=begin.progress
            )
        turn_task = asyncio.current_task()
        keeper = asyncio.create_task(
            turn_claim_keep(claim=claim, lost=lambda: turn_task.cancel(CANCEL_TAKEN_OVER))
        )
        database_down = False
        try:
            async for event in events:
                await turn.event_forward(event)
        except (DuplicateTurnError, TurnTakenOverError):
            await turn_claim_release_if_ended_async(claim=claim)
            return False
        except SessionNotFoundError:
            await self.error("session_not_found", "This session no longer exists.")
        except DATABASE_UNAVAILABLE_ERRORS as error:
            logger.error(
                "chat turn failed in session %s, database unavailable: %s", self.session_id, error
            )
            stored = turn.user_event_id in turn.sent_event_ids
            await self.error(
                DATABASE_UNAVAILABLE_CODE, REPLY_NOT_STORED if stored else MESSAGE_NOT_STORED
            )
            database_down = True
        except asyncio.CancelledError as cancel:
            reason = cancel_reason(cancel)
            await runner_events_cancel(events, reason)
            if reason == CANCEL_TAKEN_OVER:
                asyncio.current_task().uncancel()
                return False
            await turn_claim_release_if_ended_async(claim=claim)
            if self.closing():
                raise
        except Exception:
            logger.exception("chat turn failed in session %s", self.session_id)
            await self.error("internal_error", "The turn failed on the server.")
        finally:
            keeper.cancel()
        if turn.final is None and not database_down:
            # Cut short: send whatever of the turn got stored (the interrupted reply).
            await turn.stored_send()
        if turn.final is not None:
            await self.claim_release(claim)
        turn_observe(
            outcome=turn_outcome(final_event=turn.final), seconds=time.monotonic() - turn.started
        )
        await turn.complete_send(duplicate=False)
        return True
