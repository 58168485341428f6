"""Which model an agent talks to: Gemini when configured, the offline model otherwise."""

from __future__ import annotations

from agents_app.runtime.agents import AgentConfig
from agents_app.runtime.offline import OFFLINE_MODEL_NAME, OfflineModel
from core.llm import Llm, gemini_configured


def model_for_agent(agent: AgentConfig) -> Llm:
    """The agent's model; the offline one when it asks for it or no Gemini access is set."""
    if agent.model == OFFLINE_MODEL_NAME or not gemini_configured():
        return OfflineModel()
    from core.gemini import GeminiModel

    return GeminiModel(model=agent.model)
