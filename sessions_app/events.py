"""Event types with the shape of ADK's ``Event`` and ``EventActions``.

``content`` is a real ``google.genai.types.Content``, so an event can be handed
to the Gemini client as it is, and code written against ADK reads the same.
"""

from __future__ import annotations

import time
import uuid
from datetime import UTC, datetime
from typing import Any

from google.genai import types
from pydantic import BaseModel, ConfigDict, Field

# Key of an event's custom_metadata holding, by function call id, each tool call's step as a
# person reads it ("Saved your name"); the chat and the staff console show these, not the JSON.
TOOL_STEPS_KEY = "tool_steps"
# Key of a user event's custom_metadata listing the files attached to the message (id, filename,
# version, type, size), for the chat to show them; the content holds references to them.
ATTACHMENTS_KEY = "attachments"

# The instants a datetime can hold (years 1 to 9999), as seconds since the epoch: an event's
# timestamp outside them is refused, as every page and job that shows or reads the event's
# date would fail on it.
TIMESTAMP_MIN = datetime(1, 1, 1, tzinfo=UTC).timestamp()
TIMESTAMP_MAX = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()
TIMESTAMP_RANGE_MESSAGE = (
    "The timestamp must be a finite number of seconds since the epoch, within years 1-9999 "
    f"({TIMESTAMP_MIN:.0f} to {TIMESTAMP_MAX:.0f})."
)


def timestamp_representable(timestamp: float) -> bool:
    """Whether ``timestamp`` is an instant of years 1 to 9999 (so not NaN nor infinite)."""
    return TIMESTAMP_MIN <= timestamp <= TIMESTAMP_MAX


# The ids the server names the events of chat turns by: a turn's user message
# ``msg-<client_message_id>``, its later events ``msg-<client_message_id>.<place>``
# (``agents_app.runtime.turns``), the rewind of an edit or a regeneration
# ``edit-<client_message_id>`` (``agents_app.chat.edits``). A client names none of them
# (``sessions_app.end_user``): an event of its own under such an id would stand in the server's
# place, and a turn would never end.
TURN_EVENT_ID_PREFIX = "msg-"
REWRITE_EVENT_ID_PREFIX = "edit-"
SERVER_EVENT_ID_PREFIXES = (TURN_EVENT_ID_PREFIX, REWRITE_EVENT_ID_PREFIX)


def new_event_id() -> str:
    return str(uuid.uuid4())


def new_invocation_id() -> str:
    return "e-" + str(uuid.uuid4())


class EventCompaction(BaseModel):
    """A summary that stands in for the events between two timestamps."""

    model_config = ConfigDict(extra="forbid")

    start_timestamp: float
    end_timestamp: float
    compacted_content: types.Content


class EventActions(BaseModel):
    """What an event does besides its content: state changes and control flow.

    Fields of ADK's ``EventActions`` not modelled here (``artifact_delta``,
    ``requested_auth_configs``, ``requested_tool_confirmations``, ``end_of_agent``,
    ``agent_state``, those of a newer ADK) are kept as they came and stored with the actions.
    """

    model_config = ConfigDict(extra="allow")

    state_delta: dict[str, Any] = Field(default_factory=dict)
    skip_summarization: bool | None = None
    transfer_to_agent: str | None = None
    escalate: bool | None = None
    compaction: EventCompaction | None = None
    rewind_before_invocation_id: str | None = None


class Event(BaseModel):
    """One entry of a session's history, as ADK defines it.

    ``partial`` events are streamed to clients and never stored. Fields of ADK's ``Event``
    not modelled here (``model_version``, ``grounding_metadata``, ``finish_reason``,
    transcriptions, those of a newer ADK) are kept as they came: stored in the event row's
    ``extra`` column and given back.
    """

    model_config = ConfigDict(extra="allow")

    id: str = Field(default_factory=new_event_id)
    invocation_id: str = ""
    author: str
    content: types.Content | None = None
    actions: EventActions = Field(default_factory=EventActions)
    timestamp: float = Field(default_factory=time.time)
    partial: bool | None = None
    turn_complete: bool | None = None
    interrupted: bool | None = None
    branch: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    custom_metadata: dict[str, Any] | None = None
    usage_metadata: types.GenerateContentResponseUsageMetadata | None = None
    long_running_tool_ids: set[str] | None = None

    def get_function_calls(self) -> list[types.FunctionCall]:
        if not self.content or not self.content.parts:
            return []
        return [part.function_call for part in self.content.parts if part.function_call]

    def get_function_responses(self) -> list[types.FunctionResponse]:
        if not self.content or not self.content.parts:
            return []
        return [part.function_response for part in self.content.parts if part.function_response]

    def text(self) -> str:
        """The concatenated text parts (thoughts excluded)."""
        if not self.content or not self.content.parts:
            return ""
        return "".join(part.text for part in self.content.parts if part.text and not part.thought)

    def is_final_response(self) -> bool:
        """True for the event that ends an agent's reply, as ADK decides it."""
        if self.actions.skip_summarization or self.long_running_tool_ids:
            return True
        return (
            not self.get_function_calls() and not self.get_function_responses() and not self.partial
        )
