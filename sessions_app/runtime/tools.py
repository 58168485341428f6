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

from sessions_app.runtime.llm import MemorySnippet


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
    state_delta: dict[str, Any] = field(default_factory=dict)
    memories_used: list[MemorySnippet] = field(default_factory=list)
    function_call_id: str | None = None

    def get_state(self, key: str, default: Any = None) -> Any:
        """A state value as the rest of the invocation will see it (pending changes first)."""
        if key in self.state_delta:
            return self.state_delta[key]
        return self.state.get(key, default)


ToolFunction = Callable[[dict[str, Any], ToolContext], Awaitable[dict[str, Any]] | dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    """A function the model may call: its declaration and the code that runs it."""

    declaration: types.FunctionDeclaration
    function: ToolFunction

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
    context.state_delta[key] = args.get("value")
    return {"status": "ok", "key": key}


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
)

BUILTIN_TOOLS: dict[str, Tool] = {SET_STATE_TOOL.name: SET_STATE_TOOL}
