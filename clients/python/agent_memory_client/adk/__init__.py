"""Google ADK's session, memory and artifact services, stored by an agent memory server.

    from agent_memory_client.adk import (
        RemoteArtifactService, RemoteMemoryService, RemoteSessionService)

    sessions = RemoteSessionService(base_url="https://memory.example.com", api_key=KEY)
    memory = RemoteMemoryService(client=sessions.client)
    artifacts = RemoteArtifactService(client=sessions.client)
    runner = Runner(agent=agent, app_name="support", session_service=sessions,
                    memory_service=memory, artifact_service=artifacts)

Needs google-adk 2.13 or later 2.x (``pip install 'agent-memory-client[adk]'``).
"""

try:
    import google.adk  # noqa: F401
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "agent_memory_client.adk needs google-adk: pip install 'agent-memory-client[adk]'"
    ) from error

from agent_memory_client.adk.artifacts import RemoteArtifactService
from agent_memory_client.adk.memory import RemoteMemoryService
from agent_memory_client.adk.sessions import RemoteSessionService

__all__ = ["RemoteArtifactService", "RemoteMemoryService", "RemoteSessionService"]
