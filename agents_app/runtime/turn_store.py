"""Storing a turn's events for the runner: under the turn's next id (its fence), the final
event with its context, and the end of a turn cut short."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from agents_app.redaction import event_redact
from agents_app.runtime.turn_context import TurnContextReport
from agents_app.runtime.turns import (
    CANCEL_SHUTDOWN,
    CANCEL_TAKEN_OVER,
    SERVER_STOPPED,
    SERVER_STOPPED_MESSAGE,
    TurnRun,
    text_content,
    tool_calls_interrupted_content,
)
from core.async_database import NOTHING_READ, store_reads_joined
from sessions_app import selectors
from sessions_app.errors import DuplicateEventError
from sessions_app.events import Event
from sessions_app.selectors import StoredEvent
from sessions_app.services import SessionService
from sessions_app.types import Session

logger = logging.getLogger(__name__)


class TurnTakenOverError(Exception):
    """Another process stored an event at this turn's next place: it runs the turn now."""


class TurnBlockedError(Exception):
    """The turn's next place holds an event of another invocation (one a client stored under
    the turn's id before such ids were refused, ``sessions_app.end_user``): the turn can never
    be stored on, so it is given up with an error instead of being taken over again and again."""


def place_held_by_another_turn(held: StoredEvent | None, *, invocation_id: str) -> bool:
    """Whether ``held``, the event stored at a turn's place, belongs to another invocation than
    the turn's: then no process runs the turn there, and none ever will."""
    return held is not None and held.event.invocation_id != invocation_id


@dataclass
class TurnStore:
    """The events one agent stores in its turns."""

    agent_name: str
    sessions: SessionService
    # The app's PII redaction: every event scrubbed before it is stored.
    pii_redaction: bool = False
    # The events of the current turn as stored, by id, until whoever shows the turn takes
    # them (``written_take``): shown as stored without being read back.
    written: dict[str, StoredEvent] = field(default_factory=dict)

    def turn_begin(self) -> None:
        """Forget what an earlier turn stored and nobody took."""
        self.written.clear()

    def written_take(self, event: Event) -> StoredEvent | None:
        """``event`` as this store stored it in the current turn; None if it did not, or it
        was taken already."""
        return self.written.pop(event.id, None)

    async def user_event(self, session: Session, event: Event) -> Event:
        """Store the user event that begins a turn (DuplicateEventError if it is stored)."""
        stored = await self.sessions.append_event_stored(session, event)
        self.written[event.id] = stored
        return stored.event

    async def event(self, session: Session, run: TurnRun, **fields: Any) -> Event:
        """Store an event of this agent in the turn, under the turn's next id unless given one.

        Raises TurnTakenOverError when another process stored an event of the turn under that
        id, TurnBlockedError when the id holds an event of another invocation.
        """
        if "id" not in fields:
            fields["id"] = run.next_id()
        event = Event(invocation_id=run.invocation_id, author=self.agent_name, **fields)
        if self.pii_redaction:
            event_redact(event)
        try:
            if event.turn_complete and (run.after_final or run.claim) is not None:
                stored = await self._final_stored_then(session, run, event)
            else:
                stored = await self.sessions.append_event_stored(session, event)
        except DuplicateEventError:
            held = await selectors.store_read_async(
                selectors.stored_event_of_id_get_read(
                    app_name=session.app_name,
                    user_pk=int(session.user_id),
                    session_id=session.id,
                    event_id=event.id,
                )
            )
            if place_held_by_another_turn(held, invocation_id=run.invocation_id):
                raise TurnBlockedError(
                    f"Event id {event.id!r} of the turn holds an event of another invocation."
                ) from None
            raise TurnTakenOverError(
                f"Event {event.id!r} of the turn was stored by another process."
            ) from None
        self.written[event.id] = stored
        return stored.event

    async def _final_stored_then(
        self, session: Session, run: TurnRun, event: Event
    ) -> selectors.StoredEvent:
        """Store the turn's final event with what goes in its round trip: the turn's
        ``after_final`` read, and the release of its claim (``run.claim``), which is marked
        released before the statements leave, so that a renewal answered first knows why the
        claim is gone."""
        claim = run.claim
        then = store_reads_joined(
            run.after_final or NOTHING_READ,
            claim.release_read() if claim is not None else NOTHING_READ,
        )
        if claim is not None:
            claim.released_with_final = True
        try:
            stored, (run.after_final_answer, _) = await self.sessions.append_event_stored_then(
                session, event, then=then
            )
        except BaseException:
            if claim is not None:
                claim.released_with_final = False
            raise
        run.after_final = None
        return stored

    async def final(
        self, session: Session, run: TurnRun, report: TurnContextReport, **fields: Any
    ) -> Event:
        """Store the event that ends the turn (reply, error or interruption) with its context,
        and make the turn's ``after_final`` read in the same round trip."""
        return await self.event(
            session,
            run,
            turn_complete=True,
            custom_metadata={"context": report.as_dict()},
            **fields,
        )

    async def cut_short(
        self, session: Session, run: TurnRun, report: TurnContextReport, *, reason: str | None
    ) -> None:
        """End a cancelled turn in the history: tool calls it left unanswered get responses that
        say so, and the reply so far is stored marked interrupted (with ``server_stopped``
        when the server is shutting down). Nothing is stored when another process took the
        turn over: the turn is its to end."""
        if reason == CANCEL_TAKEN_OVER:
            return
        stopped = (
            {"error_code": SERVER_STOPPED, "error_message": SERVER_STOPPED_MESSAGE}
            if reason == CANCEL_SHUTDOWN
            else {}
        )
        try:
            if run.unanswered:
                await self.event(
                    session, run, content=tool_calls_interrupted_content(run.unanswered)
                )
                run.unanswered = []
            await self.final(
                session,
                run,
                report,
                id=run.reply_id or run.next_id(),
                content=text_content(run.text_parts),
                interrupted=True,
                **stopped,
            )
        except (TurnTakenOverError, TurnBlockedError) as error:
            logger.info("turn %s not ended while cut short: %s", run.invocation_id, error)
