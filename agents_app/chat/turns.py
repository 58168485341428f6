"""One chat turn as a socket streams it: the runner's events turned into frames.

Streamed text goes out as ``delta`` frames; every stored event goes out as the
REST API shows it, as it was stored, and at most once per socket,
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

from agents_app.chat.protocol import (
    delta_frame,
    error_frame,
    event_frame,
    turn_complete_frame,
    turn_running_frame,
    turn_started_frame,
)
from agents_app.chat.turn_relay import TurnRelay
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
    # The key of the session row (the turn's stored events are read by it).
    session_key: str
    send: FrameSend
    invocation_id: str | None = None
    seq: int = 0
    sent_event_ids: set[str] = field(default_factory=set)
    final: Event | None = None
    started: float = field(default_factory=time.monotonic)
    running_told: bool = False
    # The live frames of the turn for its watchers elsewhere, while it runs here.
    relay: TurnRelay | None = None
    # The last ``delta`` sent of a turn watched here, by the numbering of the socket running it.
    watched_seq: int = -1
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
            await self._out(
                turn_running_frame(
                    client_message_id=self.client_message_id, invocation_id=self.invocation_id
                )
            )

    async def resumed_send(self, stored: list[selectors.StoredEvent]) -> None:
        """Start a turn run on from its stored events: ``turn_started`` marked resumed, then the
        stored events this socket has not sent."""
        self.invocation_id = stored[0].event.invocation_id
        await self._out(
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

    async def event_forward(self, event: Event, stored: selectors.StoredEvent | None) -> None:
        """Send one event from the runner: a ``delta`` for streamed text, else the stored event,
        ``stored`` as the runner stored it (read back when not given)."""
        if event.partial:
            text = "".join(part.text or "" for part in (event.content.parts or ()))
            if text:
                await self._out(delta_frame(text=text, seq=self.seq, event=event))
                self.seq += 1
            return
        if self.invocation_id is None:
            self.invocation_id = event.invocation_id
            await self._out(
                turn_started_frame(
                    client_message_id=self.client_message_id, invocation_id=self.invocation_id
                )
            )
        if stored is None:
            stored = await selectors.store_read_async(
                selectors.stored_event_get_read(session_key=self.session_key, event_id=event.id)
            )
        if stored is not None:
            await self._stored_event_send(stored)

    async def ended_send(self, stored: list[selectors.StoredEvent], final: Event | None) -> None:
        """Send the stored events of a turn found ended that this socket has not sent; ``final``
        is how the turn ended."""
        await self._stored_events_send(stored)
        self.final = final

    async def stored_send(self) -> None:
        """Send the turn's stored events this socket has not sent yet, in order."""
        await self._stored_events_send(
            await selectors.store_read_async(
                selectors.stored_events_of_turn_read(
                    session_key=self.session_key, user_event_id=self.user_event_id
                )
            )
        )

    async def _stored_events_send(self, stored_events: list[selectors.StoredEvent]) -> None:
        for stored in stored_events:
            self.invocation_id = self.invocation_id or stored.event.invocation_id
            if stored.event.id not in self.sent_event_ids:
                await self._stored_event_send(stored)
            elif stored.event.turn_complete:
                # Sent as the socket running it relayed it: the turn ends with it all the same.
                self.final = stored.event

    async def _stored_event_send(self, stored: selectors.StoredEvent) -> None:
        """An ``event`` frame, then an ``error`` frame when the event reports a failure."""
        event = stored.event
        await self._out(event_frame(stored=stored))
        self.sent_event_ids.add(event.id)
        if event.turn_complete:
            self.final = event
        if event.error_code:
            await self._out(
                error_frame(
                    code=event.error_code, message=event.error_message or "The model failed."
                )
            )

    async def complete_send(self, *, duplicate: bool) -> None:
        """The ``turn_complete`` frame, from what was sent of the turn."""
        await self._out(
            turn_complete_frame(
                client_message_id=self.client_message_id,
                invocation_id=self.invocation_id,
                final=self.final,
                duplicate=duplicate,
            )
        )

    async def relayed(self, frame: dict[str, Any]) -> None:
        """Send a frame of this turn that the socket running it relayed (``turn_relay``): each
        streamed text and each stored event once, whether it came live or from the database."""
        if frame["type"] == "delta":
            if frame["seq"] <= self.watched_seq:
                return
            self.watched_seq = frame["seq"]
        elif frame["type"] == "event":
            event_id = frame["event"]["id"]
            if event_id in self.sent_event_ids:
                return
            self.sent_event_ids.add(event_id)
        await self._out(frame)

    async def _out(self, frame: dict[str, Any]) -> None:
        if self.relay is not None:
            self.relay.frame(frame)
        await self.send(frame)
