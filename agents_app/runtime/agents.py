"""Agent configuration, one agent per app.

An app's agent is configured on its ``agents_app.models.App`` record, which staff edit in the
console; it is read at the start of every turn, so a change applies from the next turn. An
app name without a record (sessions made by code, not through the doors that check the app)
gets its entry of ``settings.AGENTS``, which also seeds the records, or the default agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from django.conf import settings

from agents_app.runtime.templating import InstructionProvider

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
    provider: str = "gemini"
    model: str = "gemini-2.5-flash"
    instruction: str | InstructionProvider = DEFAULT_INSTRUCTION
    tools: tuple[str, ...] = ("set_state",)
    output_key: str | None = None
    preload_memories: bool = True
    memory_tools: bool = True
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    max_steps: int = 6
    pii_redaction: bool = False
    # What the app's record keeps of its model server's tools ("calls_tools",
    # "streams_tool_choice"), as pairs: found by Test connection or a refusal on a turn.
    tool_traits: tuple[tuple[str, bool], ...] = ()


def agent_for_app(app_name: str) -> AgentConfig:
    """The agent of the app's record, else of ``settings.AGENTS`` (or the default one).

    Reads the database: call it from sync code or through ``database_sync_to_async``.
    """
    from agents_app.models import App

    app = App.objects.filter(name=app_name).first()
    if app is None:
        return agent_from_settings(app_name)
    return agent_from_app(app)


def agent_from_app(app) -> AgentConfig:
    """The ``AgentConfig`` an ``App`` record holds."""
    return AgentConfig(
        app_name=app.name,
        name=app.agent_name,
        provider=app.provider or settings.LLM_PROVIDER,
        model=app.model or settings.LLM_MODEL,
        instruction=app.instruction,
        tools=tuple(app.tools),
        output_key=app.output_key or None,
        preload_memories=app.preload_memories,
        memory_tools=app.memory_tools,
        compaction=CompactionConfig(
            keep_last_invocations=app.keep_last_invocations,
            token_budget=app.token_budget,
            summarize_after_invocations=app.summarize_after_invocations,
            max_events_loaded=app.max_events_loaded,
        ),
        max_steps=app.max_steps,
        tool_traits=app_tool_traits(app),
        pii_redaction=(
            bool(settings.MEMORY_PII_REDACTION.get(app.name, False))
            if app.pii_redaction is None
            else app.pii_redaction
        ),
    )


def model_key(*, provider: str, model: str) -> str:
    """How an app's ``model_traits`` name the model they hold for."""
    return f"{provider}:{model}"


def app_tool_traits(app) -> tuple[tuple[str, bool], ...]:
    """The app's kept findings on its model server's tools, if they are of its model now (a
    change of model or provider forgets them)."""
    traits = app.model_traits or {}
    provider = app.provider or settings.LLM_PROVIDER
    if traits.get("model") != model_key(provider=provider, model=app.model or settings.LLM_MODEL):
        return ()
    return tuple(
        (name, bool(traits[name]))
        for name in ("calls_tools", "streams_tool_choice")
        if name in traits
    )


def agent_from_settings(app_name: str) -> AgentConfig:
    """The agent ``settings.AGENTS`` configures for ``app_name`` (or the default one)."""
    overrides = dict(getattr(settings, "AGENTS", {}).get(app_name, {}))
    if "compaction" in overrides and isinstance(overrides["compaction"], dict):
        overrides["compaction"] = CompactionConfig(**overrides["compaction"])
    if "tools" in overrides:
        overrides["tools"] = tuple(overrides["tools"])
    allowed = {item.name for item in fields(AgentConfig)}
    unknown = set(overrides) - allowed
    if unknown:
        raise ValueError(f"settings.AGENTS[{app_name!r}] has unknown fields: {sorted(unknown)}")
    overrides.setdefault("provider", settings.LLM_PROVIDER)
    overrides.setdefault("model", settings.LLM_MODEL)
    overrides.setdefault("pii_redaction", bool(settings.MEMORY_PII_REDACTION.get(app_name, False)))
    return AgentConfig(app_name=app_name, **overrides)
