"""Tools an agent may call, and the context through which they change state.

A tool never writes state directly: it writes into ``ToolContext.state_delta``
and the runner stores that delta on the tool's response event, so state still
changes only through events.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from google.genai import types

from core.llm import MemorySnippet


@dataclass
class ToolContext:
    """What a running tool sees: merged state (read) and the delta it is building (write)."""

    app_name: str
    user_id: str
    session_id: str
    invocation_id: str
    agent_name: str
    state: Mapping[str, Any]
    memory_enabled: bool = True
    profile_not_saved: str = ""  # why ``user:`` keys may not be written ("": they may)
    state_delta: dict[str, Any] = field(default_factory=dict)
    memories_used: list[MemorySnippet] = field(default_factory=list)
    function_call_id: str | None = None

    def get_state(self, key: str, default: Any = None) -> Any:
        """A state value as the rest of the invocation will see it (pending changes first)."""
        if key in self.state_delta:
            return self.state_delta[key]
        return self.state.get(key, default)


ToolFunction = Callable[[dict[str, Any], ToolContext], Awaitable[dict[str, Any]] | dict[str, Any]]
# A call as a step a person reads in the conversation: (args, response) -> "Saved your name";
# response None while the call runs ("Saving your name").
StepDescriber = Callable[[dict[str, Any], dict[str, Any] | None], str]


def response_failed(response: Mapping[str, Any]) -> bool:
    """Whether a tool's response reports an error (the shape every tool here answers)."""
    return response.get("status") == "error" or "error" in response


@dataclass(frozen=True)
class Tool:
    """A function the model may call: its declaration, the code that runs it, and how a call
    reads as a step of the conversation (None: the chat says "Used <name>")."""

    declaration: types.FunctionDeclaration
    function: ToolFunction
    describe: StepDescriber | None = None

    @property
    def name(self) -> str:
        return self.declaration.name or ""

    async def run(self, args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
        result = self.function(args, context)
        if inspect.isawaitable(result):
            result = await result
        return result


def _set_state(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    key = args.get("key")
    if not isinstance(key, str) or not key or key.startswith("app:"):
        return {"status": "error", "message": "key must be a session, user: or temp: key"}
    if key.startswith("user:") and context.profile_not_saved:
        return {"status": "error", "message": f"Not saved: {context.profile_not_saved}."}
    context.state_delta[key] = args.get("value")
    return {"status": "ok", "key": key}


def _state_key_words(key: str) -> str:
    if key == "user:name":
        return "your name"
    words = key.split(":", 1)[-1].replace("_", " ")
    return f"your {words}" if key.startswith("user:") else words


def _set_state_step(args: dict[str, Any], response: dict[str, Any] | None) -> str:
    key = str(args.get("key") or "")
    what = _state_key_words(key)
    if response is None:
        return f"Saving {what}"
    if response_failed(response):
        return f"Couldn't save {what}"
    if key.startswith("user:"):
        return f"Saved {what} for all your chats" if key != "user:name" else "Saved your name"
    if key.startswith("temp:"):
        return f"Noted {what} for this reply"
    return f"Saved {what} for this chat"


SET_STATE_TOOL = Tool(
    declaration=types.FunctionDeclaration(
        name="set_state",
        description=(
            "Save a value in the conversation state. Use a 'user:' prefix for facts about "
            "the user that other conversations should see; no prefix for this conversation."
        ),
        parameters_json_schema={
            "type": "object",
            "properties": {
                "key": {"type": "string", "description": "State key, e.g. 'user:name'."},
                "value": {"description": "Any JSON value."},
            },
            "required": ["key", "value"],
        },
    ),
    function=_set_state,
    describe=_set_state_step,
)

BUILTIN_TOOLS: dict[str, Tool] = {SET_STATE_TOOL.name: SET_STATE_TOOL}
