"""Agent configuration, one agent per app, read from settings.

``settings.AGENTS`` maps an app name to the fields of ``AgentConfig``; an app
without an entry gets the default agent under its own name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from django.conf import settings

from sessions_app.templating import InstructionProvider

DEFAULT_INSTRUCTION = (
    "You are a helpful assistant. Be concise and accurate. "
    "Use the tools you are given when they help; never invent what you remember."
)


@dataclass(frozen=True)
class CompactionConfig:
    """How the prompt is kept small.

    ``keep_last_invocations``: only the last N invocations go into the prompt
    verbatim (0 keeps all loaded); ``token_budget``: older contents are
    dropped until the estimate fits; ``summarize_after_invocations``: once
    that many invocations lie outside the kept window, a background task
    summarises them into a compaction event.
    """

    keep_last_invocations: int = 20
    token_budget: int = 24000
    summarize_after_invocations: int = 10
    max_events_loaded: int = 400


@dataclass(frozen=True)
class AgentConfig:
    app_name: str
    name: str = "assistant"
    model: str = "gemini-2.5-flash"
    instruction: str | InstructionProvider = DEFAULT_INSTRUCTION
    tools: tuple[str, ...] = ("set_state",)
    output_key: str | None = None
    preload_memories: bool = True
    memory_tools: bool = True
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    max_steps: int = 6


def agent_for_app(app_name: str) -> AgentConfig:
    """The agent configured for ``app_name`` in ``settings.AGENTS`` (or the default one)."""
    overrides = dict(getattr(settings, "AGENTS", {}).get(app_name, {}))
    if "compaction" in overrides and isinstance(overrides["compaction"], dict):
        overrides["compaction"] = CompactionConfig(**overrides["compaction"])
    if "tools" in overrides:
        overrides["tools"] = tuple(overrides["tools"])
    allowed = {item.name for item in fields(AgentConfig)}
    unknown = set(overrides) - allowed
    if unknown:
        raise ValueError(f"settings.AGENTS[{app_name!r}] has unknown fields: {sorted(unknown)}")
    overrides.setdefault("model", settings.LLM_MODEL)
    return AgentConfig(app_name=app_name, **overrides)
