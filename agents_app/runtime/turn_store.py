"""Storing a turn's events for the runner: under the turn's next id (its fence), the final
event with its context, and the end of a turn cut short."""

from __future__ import annotations

import logging
from dataclasses import dataclass
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
from sessions_app.errors import DuplicateEventError
from sessions_app.events import Event
from sessions_app.services import SessionService
from sessions_app.types import Session

logger = logging.getLogger(__name__)


class TurnTakenOverError(Exception):
    """Another process stored an event at this turn's next place: it runs the turn now."""


@dataclass
class TurnStore:
    """The events one agent stores in its turns."""

    agent_name: str
    sessions: SessionService
    # The app's PII redaction: every event scrubbed before it is stored.
    pii_redaction: bool = False

    async def event(self, session: Session, run: TurnRun, **fields: Any) -> Event:
        """Store an event of this agent in the turn, under the turn's next id unless given one.

        Raises TurnTakenOverError when another process stored an event under that id.
        """
        if "id" not in fields:
            fields["id"] = run.next_id()
        event = Event(invocation_id=run.invocation_id, author=self.agent_name, **fields)
        if self.pii_redaction:
            event_redact(event)
        try:
            return await self.sessions.append_event(session, event)
        except DuplicateEventError:
            raise TurnTakenOverError(
                f"Event {event.id!r} of the turn was stored by another process."
            ) from None

    async def final(
        self, session: Session, run: TurnRun, report: TurnContextReport, **fields: Any
    ) -> Event:
        """Store the event that ends the turn (reply, error or interruption) with its context."""
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
        except TurnTakenOverError:
            logger.info("turn %s was taken over while it was cut short", run.invocation_id)
