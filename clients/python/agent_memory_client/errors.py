"""What a call can fail with: one class per answer a caller handles differently."""

from __future__ import annotations

from typing import Any


class AgentMemoryError(Exception):
    """Base of every error this package raises."""


class TransportError(AgentMemoryError):
    """The server could not be reached, or the connection broke before an answer came."""


class ApiError(AgentMemoryError):
    """The server answered with an error status; ``detail`` is its message, ``body`` its JSON."""

    status: int = 0

    def __init__(self, status: int, detail: str, body: Any = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.body = body


class BadRequestError(ApiError):
    """400: the request was invalid and nothing was written; ``body`` holds the field errors."""


class AuthenticationError(ApiError):
    """401: the API key is unknown, revoked or expired."""


class PermissionDeniedError(ApiError):
    """403: the key lacks the scope this call needs."""


class NotFoundError(ApiError):
    """404: no such object for this app and end user (or an app the key does not reach)."""


class ConflictError(ApiError):
    """409: the object already exists (a session id in use, an event id already stored)."""


class PayloadTooLargeError(ApiError):
    """413: the body is over the server's limit."""


class RateLimitedError(ApiError):
    """429: too many requests; retried by the client before it is raised."""


class ServerError(ApiError):
    """5xx: the server failed or is unavailable."""


class JobFailedError(AgentMemoryError):
    """A background memory job ended failed (or dead, after its retries); ``job`` is its JSON."""

    def __init__(self, job: dict[str, Any]) -> None:
        super().__init__(
            f"memory job {job.get('job_id')} ended {job.get('status')}: {job.get('error')}"
        )
        self.job = job


_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    429: RateLimitedError,
}


def api_error(status: int, body: Any) -> ApiError:
    """The error for an answer with ``status`` and JSON ``body`` (or its text)."""
    error_class = _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    return error_class(status, _detail(body), body)


def _detail(body: Any) -> str:
    """``{"detail": ...}`` as it is, field errors as ``field: message; ...``, else the text."""
    if isinstance(body, dict):
        if isinstance(body.get("detail"), str):
            return body["detail"]
        return "; ".join(
            f"{field}: {' '.join(map(str, messages)) if isinstance(messages, list) else messages}"
            for field, messages in body.items()
        )
    return str(body or "no detail given")
