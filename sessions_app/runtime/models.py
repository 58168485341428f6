"""Which model an agent talks to: Gemini when configured, the offline model otherwise."""

from __future__ import annotations

from django.conf import settings

from sessions_app.runtime.agents import AgentConfig
from sessions_app.runtime.llm import Llm
from sessions_app.runtime.offline import OFFLINE_MODEL_NAME, OfflineModel


def gemini_configured() -> bool:
    return bool(settings.GEMINI_API_KEY or settings.GOOGLE_GENAI_USE_VERTEXAI)


def model_for_agent(agent: AgentConfig) -> Llm:
    """The agent's model; the offline one when it asks for it or no Gemini access is set."""
    if agent.model == OFFLINE_MODEL_NAME or not gemini_configured():
        return OfflineModel()
    from sessions_app.runtime.gemini import GeminiModel

    return GeminiModel(model=agent.model)
