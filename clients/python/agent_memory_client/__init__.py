"""Client of an agent memory server: sessions, state and long-term memory over HTTP.

``AgentMemoryClient`` is the plain async client for any caller;
``agent_memory_client.adk`` has ADK's session and memory services on top of it
(install the ``adk`` extra).
"""

from agent_memory_client.client import AgentMemoryClient
from agent_memory_client.errors import (
    AgentMemoryError,
    ApiError,
    AppNotFoundError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    JobFailedError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    RequestTimeoutError,
    ServerError,
    TransportError,
)

__all__ = [
    "AgentMemoryClient",
    "AgentMemoryError",
    "ApiError",
    "AppNotFoundError",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "JobFailedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitedError",
    "RequestTimeoutError",
    "ServerError",
    "TransportError",
]
