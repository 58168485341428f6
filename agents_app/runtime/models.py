"""Which model an agent talks to: its provider's when configured, the offline model otherwise."""

from __future__ import annotations

from asgiref.sync import async_to_sync

from agents_app.runtime.agents import AgentConfig
from agents_app.runtime.offline import OFFLINE_MODEL_NAME, OfflineModel
from core.llm import PROVIDERS, Llm, provider_configured, provider_model, provider_text


def agent_offline(agent: AgentConfig) -> bool:
    """Whether the offline model answers for ``agent``: it asks for it, or its provider is
    ``offline`` or has no access configured."""
    return agent.model == OFFLINE_MODEL_NAME or not provider_configured(agent.provider)


def model_for_agent(agent: AgentConfig) -> Llm:
    """The agent's model of its provider, or the offline one (:func:`agent_offline`)."""
    if agent_offline(agent):
        return OfflineModel()
    return provider_model(provider=agent.provider, model=agent.model)


def model_label(agent: AgentConfig) -> str:
    """Which model answers for ``agent``, in words: its name and provider."""
    if agent_offline(agent):
        return f"{OFFLINE_MODEL_NAME} (built in, no network)"
    return f"{agent.model} ({PROVIDERS[agent.provider]})"


CONNECTION_TEST_PROMPT = "Say hello in five words or fewer."


def model_connection_test(*, agent: AgentConfig) -> str:
    """What ``agent``'s model answers to one short request, sent now without retries (the
    console's "Test connection"); ``ModelError`` says why it failed."""

    async def run() -> str:
        if agent_offline(agent):
            return await provider_text(
                model=OfflineModel(chunk_delay=0), prompt=CONNECTION_TEST_PROMPT
            )
        model = provider_model(provider=agent.provider, model=agent.model)
        try:
            return await provider_text(model=model, prompt=CONNECTION_TEST_PROMPT)
        finally:
            await model.aclose()

    return async_to_sync(run)()
