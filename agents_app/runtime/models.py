"""Which model an agent talks to: its provider's when configured, the offline model otherwise."""

from __future__ import annotations

from dataclasses import dataclass

from asgiref.sync import async_to_sync

from agents_app.runtime.agents import AgentConfig
from agents_app.runtime.offline import OFFLINE_MODEL_NAME, OfflineModel
from core.llm import PROVIDERS, Llm, provider_configured, provider_model, provider_text
from core.openai_compatible import OpenAICompatibleModel
from core.server_probe import ServerFindings, server_probe


def agent_offline(agent: AgentConfig) -> bool:
    """Whether the offline model answers for ``agent``: it asks for it, or its provider is
    ``offline`` or has no access configured."""
    return agent.model == OFFLINE_MODEL_NAME or not provider_configured(agent.provider)


def model_for_agent(agent: AgentConfig) -> Llm:
    """The agent's model of its provider, or the offline one (:func:`agent_offline`)."""
    if agent_offline(agent):
        return OfflineModel()
    model = provider_model(provider=agent.provider, model=agent.model)
    if agent.tool_traits and hasattr(model, "tool_traits_remember"):
        model.tool_traits_remember(dict(agent.tool_traits))
    return model


def model_label(agent: AgentConfig) -> str:
    """Which model answers for ``agent``, in words: its name and provider."""
    if agent_offline(agent):
        return f"{OFFLINE_MODEL_NAME} (built in, no network)"
    return f"{agent.model} ({PROVIDERS[agent.provider]})"


CONNECTION_TEST_PROMPT = "Say hello in five words or fewer."


@dataclass(frozen=True)
class ConnectionReport:
    """What "Test connection" found: the model's answer and, for an OpenAI-compatible server,
    what the server can do (None for the other providers, whose abilities are known)."""

    answer: str
    findings: ServerFindings | None = None


def model_connection_test(*, agent: AgentConfig, embedding_model: str = "") -> ConnectionReport:
    """What ``agent``'s model answers to one short request, sent now without retries (the
    console's "Test connection"), and for an OpenAI-compatible server what it can do
    (:func:`core.server_probe.server_probe`; ``embedding_model``: the embedding model to try
    on it, if any). ``ModelError`` says why the request failed."""

    async def run() -> ConnectionReport:
        if agent_offline(agent):
            return ConnectionReport(
                await provider_text(
                    model=OfflineModel(chunk_delay=0), prompt=CONNECTION_TEST_PROMPT
                )
            )
        model = provider_model(provider=agent.provider, model=agent.model)
        try:
            answer = await provider_text(model=model, prompt=CONNECTION_TEST_PROMPT)
            if not isinstance(model, OpenAICompatibleModel):
                return ConnectionReport(answer)
            findings = await server_probe(model, embedding_model=embedding_model)
            return ConnectionReport(answer, findings)
        finally:
            await model.aclose()

    return async_to_sync(run)()
