"""The context of one turn: fetched (the session with the events a turn can use),
prepared into the model's request (history view, templated instruction, the
memories recalled), and reported for the chat's context panel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sessions_app import selectors
from sessions_app.events import Event
from sessions_app.runtime.agents import AgentConfig
from sessions_app.runtime.context import history_prepare
from sessions_app.runtime.llm import LlmRequest, MemorySnippet
from sessions_app.runtime.tools import Tool
from sessions_app.templating import ReadonlyContext, instruction_resolve
from sessions_app.types import GetSessionConfig, Session


@dataclass
class TurnContextReport:
    """What the model got this turn, shown in the chat's context panel."""

    model: str
    offline: bool
    event_count: int = 0
    memories: list[MemorySnippet] = field(default_factory=list)
    compaction_summary: str | None = None
    memory_enabled: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "offline": self.offline,
            "event_count": self.event_count,
            "memory_enabled": self.memory_enabled,
            "compaction_summary": self.compaction_summary,
            "memories": [
                {"id": m.id, "text": m.text, "confidence": m.confidence} for m in self.memories
            ],
        }


def turn_session_load(
    *, app_name: str, user_id: str, session_id: str, max_events: int
) -> tuple[Session | None, Event | None]:
    """The session with the events a turn can use, and its latest compaction.

    Events a compaction covers never reach the prompt (its summary stands in
    for them), so only those from its end on are read: a long session costs a
    turn the events since its last summary, not ``max_events`` of them.
    """
    compaction = selectors.session_latest_compaction(session_id=session_id)
    session = selectors.session_get(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        config=GetSessionConfig(
            num_recent_events=max_events,
            after_timestamp=compaction.actions.compaction.end_timestamp if compaction else None,
        ),
    )
    if session is None:
        return None, None
    return session, compaction


def _memory_block(memories: list[MemorySnippet]) -> str:
    lines = [f"- {memory.text} (confidence {memory.confidence:.2f})" for memory in memories]
    return "\n\nWhat you remember about the user (may be out of date):\n" + "\n".join(lines)


async def turn_request_build(
    *,
    agent: AgentConfig,
    session: Session,
    compaction: Event | None,
    tools: dict[str, Tool],
    report: TurnContextReport,
) -> LlmRequest:
    """The model request of one step of the turn, noting in ``report`` what history it got.

    Raises MissingStateKeyError when the agent's instruction names a state key
    the session does not have.
    """
    history = history_prepare(
        events=session.events,
        agent_name=agent.name,
        compaction=compaction,
        config=agent.compaction,
    )
    report.event_count = history.event_count
    report.compaction_summary = history.compaction_summary
    instruction = await instruction_resolve(
        instruction=agent.instruction,
        context=ReadonlyContext(
            state=session.state,
            agent_name=agent.name,
            session_id=session.id,
            user_id=session.user_id,
        ),
    )
    if report.memories:
        instruction += _memory_block(report.memories)
    return LlmRequest(
        model=agent.model,
        system_instruction=instruction,
        contents=history.contents,
        tools=[tool.declaration for tool in tools.values()],
        state=dict(session.state),
        memories=list(report.memories),
    )
