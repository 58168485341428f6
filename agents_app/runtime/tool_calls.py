"""Running the function calls of one model reply, for the runner to store as one event.

A failing or unknown tool, or a tool that leaves a state change the store
would refuse, answers the model with an error response instead of ending the
turn: the model reads the error and can go on.
"""

from __future__ import annotations

import logging
from typing import Any

from google.genai import types

from agents_app.runtime.memory_hooks import MemoryPermissions
from agents_app.runtime.tools import Tool, ToolContext
from agents_app.runtime.turn_context import TurnContextReport
from sessions_app.errors import InvalidStateError
from sessions_app.state import state_split
from sessions_app.types import Session

logger = logging.getLogger(__name__)


def tool_steps(
    *,
    calls: list[types.FunctionCall],
    tools: dict[str, Tool],
    responses: list[dict[str, Any]] | None = None,
) -> dict[str, str]:
    """Each call's step ("Saving your name", or with ``responses``, one a call, "Saved your
    name") by call id, for the events' ``custom_metadata``: the chat and the staff console
    show these instead of the calls' JSON. Tools without a describer are left out."""
    steps = {}
    for index, call in enumerate(calls):
        tool = tools.get(call.name or "")
        if tool is not None and tool.describe is not None and call.id:
            response = None if responses is None else responses[index]
            steps[call.id] = tool.describe(dict(call.args or {}), response)
    return steps


async def tool_calls_run(
    *,
    session: Session,
    invocation_id: str,
    agent_name: str,
    calls: list[types.FunctionCall],
    tools: dict[str, Tool],
    report: TurnContextReport,
    permissions: MemoryPermissions,
) -> tuple[list[types.Part], dict[str, Any]]:
    """Run the calls in order: one function response part each, and the state changes of
    them all, which go on the one response event (each call sees those before it).

    Memories a tool used are added to ``report``, each once.
    """
    state_delta: dict[str, Any] = {}
    parts = []
    for call in calls:
        context = ToolContext(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            invocation_id=invocation_id,
            agent_name=agent_name,
            state=permissions.visible_state({**session.state, **state_delta}),
            memory_enabled=permissions.use,
            profile_not_saved=permissions.not_saved_reason(),
            function_call_id=call.id,
        )
        tool = tools.get(call.name or "")
        if tool is None:
            response = {"status": "error", "message": f"Unknown tool {call.name!r}."}
        else:
            try:
                response = await tool.run(dict(call.args or {}), context)
            except Exception as error:
                logger.exception("tool %s failed", call.name)
                response = {"status": "error", "message": f"{type(error).__name__}: {error}"}
        try:
            state_split(context.state_delta)
        except InvalidStateError as error:
            response = {"status": "error", "message": f"State not saved: {error}"}
        else:
            state_delta.update(context.state_delta)
        # By id: a memory found again by a tool may carry another score.
        shown = {memory.id for memory in report.memories}
        for memory in context.memories_used:
            if memory.id not in shown:
                shown.add(memory.id)
                report.memories.append(memory)
        parts.append(
            types.Part(
                function_response=types.FunctionResponse(
                    id=call.id, name=call.name, response=response
                )
            )
        )
    return parts, state_delta
