"""One chat turn as a socket streams it: the runner's events turned into frames.

Streamed text goes out as ``delta`` frames; every stored event goes out as the
REST API shows it, read back from the database, and at most once per socket,
so a turn cut short, or replayed after a reconnect, sends just what is stored
and was not sent yet.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from agents_app.chat_protocol import (
    delta_frame,
    error_frame,
    event_frame,
    turn_complete_frame,
    turn_running_frame,
    turn_started_frame,
)
from agents_app.runtime.turns import user_event_id_for
from sessions_app import selectors
from sessions_app.events import Event
from sessions_app.models import ArtifactRecord

FrameSend = Callable[[dict[str, Any]], Awaitable[None]]


async def runner_events_cancel(events: AsyncGenerator[Event, None], reason: str | None) -> None:
    """Hand a cancellation that hit the consumer's own code to the runner too.

    The runner stores the reply so far as interrupted when the cancellation
    reaches it; if it instead landed while the consumer was sending what the
    runner had yielded, the generator would otherwise just be dropped.
    """
    if events.ag_frame is None:
        return
    with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
        await events.athrow(asyncio.CancelledError(reason))


@dataclass
class ChatTurn:
    """What one socket has sent of one turn, and the sending of the rest through ``send``."""

    client_message_id: str
    session_id: str
    send: FrameSend
    invocation_id: str | None = None
    seq: int = 0
    sent_event_ids: set[str] = field(default_factory=set)
    final: Event | None = None
    started: float = field(default_factory=time.monotonic)
    running_told: bool = False
    # Files of the session that go with the message (a new turn's, not a Retry's).
    attachments: list[ArtifactRecord] = field(default_factory=list)

    @property
    def user_event_id(self) -> str:
        return user_event_id_for(self.client_message_id)

    async def replay(self, stored: list[selectors.StoredEvent]) -> None:
        """Answer a message whose turn has ended with its stored events (those this socket has
        not sent) and a ``turn_complete`` marked duplicate: nothing is run."""
        await self._stored_events_send(stored)
        await self.complete_send(duplicate=True)

    async def running_send(self, stored: list[selectors.StoredEvent]) -> None:
        """Tell the client that the turn runs elsewhere (once), after its stored events."""
        await self._stored_events_send(stored)
        if not self.running_told:
            self.running_told = True
            await self.send(
                turn_running_frame(
                    client_message_id=self.client_message_id, invocation_id=self.invocation_id
                )
            )

    async def resumed_send(self, stored: list[selectors.StoredEvent]) -> None:
        """Start a turn run on from its stored events: ``turn_started`` marked resumed, then the
        stored events this socket has not sent."""
        self.invocation_id = stored[0].event.invocation_id
        await self.send(
            turn_started_frame(
                client_message_id=self.client_message_id,
                invocation_id=self.invocation_id,
                resumed=True,
            )
        )
        await self._stored_events_send(stored)
        self.final = None  # a retried turn's earlier ending is not this run's

    async def rewind_send(self, stored: selectors.StoredEvent) -> None:
        """Send the rewind an edit or a regeneration stored before its turn runs."""
        await self._stored_event_send(stored)

    async def event_forward(self, event: Event) -> None:
        """Send one event from the runner: a ``delta`` for streamed text, else the stored event."""
        if event.partial:
            text = "".join(part.text or "" for part in (event.content.parts or ()))
            if text:
                await self.send(delta_frame(text=text, seq=self.seq, event=event))
                self.seq += 1
            return
        if self.invocation_id is None:
            self.invocation_id = event.invocation_id
            await self.send(
                turn_started_frame(
                    client_message_id=self.client_message_id, invocation_id=self.invocation_id
                )
            )
        stored = await selectors.store_read_async(
            selectors.stored_event_get_read(session_id=self.session_id, event_id=event.id)
        )
        if stored is not None:
            await self._stored_event_send(stored)

    async def stored_send(self) -> None:
        """Send the turn's stored events this socket has not sent yet, in order."""
        await self._stored_events_send(
            await selectors.store_read_async(
                selectors.stored_events_of_turn_read(
                    session_id=self.session_id, user_event_id=self.user_event_id
                )
            )
        )

    async def _stored_events_send(self, stored_events: list[selectors.StoredEvent]) -> None:
        for stored in stored_events:
            self.invocation_id = self.invocation_id or stored.event.invocation_id
            if stored.event.id not in self.sent_event_ids:
                await self._stored_event_send(stored)

    async def _stored_event_send(self, stored: selectors.StoredEvent) -> None:
        """An ``event`` frame, then an ``error`` frame when the event reports a failure."""
        event = stored.event
        await self.send(event_frame(stored=stored))
        self.sent_event_ids.add(event.id)
        if event.turn_complete:
            self.final = event
        if event.error_code:
            await self.send(
                error_frame(
                    code=event.error_code, message=event.error_message or "The model failed."
                )
            )

    async def complete_send(self, *, duplicate: bool) -> None:
        """The ``turn_complete`` frame, from what was sent of the turn."""
        await self.send(
            turn_complete_frame(
                client_message_id=self.client_message_id,
                invocation_id=self.invocation_id,
                final=self.final,
                duplicate=duplicate,
            )
        )
