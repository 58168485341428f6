"""A chat turn as its stored events show it: where it stands, and the ids of what comes next.

The events of a turn are named after their place in it (a turn whose caller
named no client message id gets one made by the server): the user's message is
``msg-<client_message_id>``, the events
the agent stores after it ``msg-<client_message_id>.1``, ``.2`` and so on.
Since an event id is unique within its session, two processes that both
believe they run the turn (one of them a zombie whose claim was taken over)
can never both store the event at one place: the second is refused, learns
that it lost the turn, and stops. That is the fence of the turn claims
(``agents_app.chat.turn_claims``) at the one point where it matters, the store,
at no cost to the append itself.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from google.genai import types

from core.async_database import StoreRead
from sessions_app.events import TURN_EVENT_ID_PREFIX, Event

if TYPE_CHECKING:
    from agents_app.chat.turn_claims import HeldClaim

# The final event of a turn whose process stopped before the turn ended (shutdown or crash).
SERVER_STOPPED = "server_stopped"
SERVER_STOPPED_MESSAGE = (
    "The reply was interrupted: the server running it stopped before it was finished."
)
# Messages a turn's task is cancelled with, telling the runner how to end the turn: the process
# is shutting down (the reply is stored interrupted, as ``server_stopped``), or another process
# took the turn over (nothing is stored: the turn is the other process's to end).
CANCEL_SHUTDOWN = "server-shutdown"
CANCEL_TAKEN_OVER = "turn-taken-over"
# What the model reads for a tool call whose process died after storing the call: the call may
# have run, so it is not run again, and the history says so.
TOOL_CALL_INTERRUPTED = (
    "This call was interrupted when the server running it stopped: it may or may not have "
    "taken effect, and it was not run again."
)


def server_message_id() -> str:
    """A ``client_message_id`` made by the server, for a turn whose caller named none: every
    turn's events are named after their place in it, and every turn can be retried."""
    return "srv-" + uuid.uuid4().hex


def user_event_id_for(client_message_id: str) -> str:
    """The stored id of the user event of a client message: the unique key that dedupes turns."""
    return f"{TURN_EVENT_ID_PREFIX}{client_message_id}"


class TurnRun:
    """One run of a turn: the ids its events get, and what is under way should it be cut
    short (the reply streamed so far, tool calls stored but not answered)."""

    def __init__(self, *, invocation_id: str, user_event_id: str, position: int) -> None:
        self.invocation_id = invocation_id
        self.user_event_id = user_event_id
        self.position = position
        self.text_parts: list[str] = []
        self.reply_id: str | None = None
        self.unanswered: list[types.FunctionCall] = []
        # A read to make in the round trip that stores the turn's final event, and its answer
        # once made (None until then).
        self.after_final: StoreRead | None = None
        self.after_final_answer: Any = None
        # The turn's claim (``agents_app.chat.turn_claims.HeldClaim``) when its final event is
        # to release it, in the same round trip.
        self.claim: HeldClaim | None = None

    def next_id(self) -> str:
        """The id of the next event stored: its place in the turn (the fence between two
        processes running it)."""
        event_id = turn_event_id(user_event_id=self.user_event_id, position=self.position)
        self.position += 1
        return event_id


def turn_event_id(*, user_event_id: str, position: int) -> str:
    """The id of the turn's event at ``position`` (the user's message is at 0)."""
    return user_event_id if position == 0 else f"{user_event_id}.{position}"


@dataclass
class TurnProgress:
    """Where a turn stands after its stored events ``events`` (all of its invocation, in order,
    rewound ones included)."""

    events: list[Event]
    rewound: bool = False
    pending_calls: list[types.FunctionCall] = field(default_factory=list)

    @classmethod
    def of(cls, events: Sequence[Event], *, rewound: bool = False) -> TurnProgress:
        progress = cls(events=list(events), rewound=rewound)
        if events and not events[-1].turn_complete:
            answered = {r.id for e in events for r in e.get_function_responses()}
            progress.pending_calls = [
                call for call in events[-1].get_function_calls() if call.id not in answered
            ]
        return progress

    @property
    def stored(self) -> bool:
        """Whether the user's message is stored at all."""
        return bool(self.events)

    @property
    def invocation_id(self) -> str:
        return self.events[0].invocation_id

    @property
    def final(self) -> Event | None:
        """The event that ends the turn as it stands: its last event, if that is final."""
        if self.events and self.events[-1].turn_complete:
            return self.events[-1]
        return None

    @property
    def open(self) -> bool:
        """Stored, not rewound, and without a final event: someone must still answer it."""
        return self.stored and not self.rewound and self.final is None

    @property
    def retryable(self) -> bool:
        """Ended by an interruption or an error, and not rewound: Retry may run it again."""
        final = self.final
        return (
            not self.rewound and final is not None and bool(final.interrupted or final.error_code)
        )

    @property
    def next_position(self) -> int:
        return len(self.events)

    def step_count(self) -> int:
        """Model steps that ended in tool calls so far, which count against the agent's limit."""
        return sum(1 for event in self.events if event.get_function_calls())


def text_content(text_parts: list[str]) -> types.Content | None:
    """A model reply of the streamed text, or None when nothing was streamed."""
    text = "".join(text_parts)
    return types.Content(role="model", parts=[types.Part(text=text)]) if text else None


def tool_calls_interrupted_content(calls: Sequence[types.FunctionCall]) -> types.Content:
    """The function responses stored for calls whose process died while running them."""
    return types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id=call.id,
                    name=call.name,
                    response={"status": "error", "message": TOOL_CALL_INTERRUPTED},
                )
            )
            for call in calls
        ],
    )


def cancel_reason(cancel: asyncio.CancelledError) -> str | None:
    """Why the turn was cancelled: the message its task was cancelled with, if any."""
    return cancel.args[0] if cancel.args and isinstance(cancel.args[0], str) else None
