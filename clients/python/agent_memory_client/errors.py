"""What a call can fail with: one class per answer a caller handles differently.

Each is also the closest built-in exception, and ADK's own where ADK has one and is
installed: code written against ADK's services (``except AlreadyExistsError``) or against
Python's (``except LookupError``) catches these as it catches those.
"""

from __future__ import annotations

import asyncio
from typing import Any

try:
    from google.adk.errors.already_exists_error import AlreadyExistsError as _AdkAlreadyExists
    from google.adk.errors.input_validation_error import (
        InputValidationError as _AdkInputValidation,
    )
    from google.adk.errors.not_found_error import NotFoundError as _AdkNotFound
except ImportError:  # ADK is an optional extra of this package
    _ALREADY_EXISTS: tuple[type[Exception], ...] = ()
    _INVALID_INPUT: tuple[type[Exception], ...] = (ValueError,)
    _NOT_FOUND: tuple[type[Exception], ...] = (LookupError,)
else:
    _ALREADY_EXISTS = (_AdkAlreadyExists,)
    _INVALID_INPUT = (_AdkInputValidation,)
    _NOT_FOUND = (_AdkNotFound, LookupError)


class AgentMemoryError(Exception):
    """Base of every error this package raises."""


class TransportError(AgentMemoryError, ConnectionError):
    """The server could not be reached, or the connection broke before an answer came."""


class RequestTimeoutError(TransportError, asyncio.TimeoutError):
    """No answer within the client's ``timeout``: also ``asyncio.TimeoutError`` (the built-in
    ``TimeoutError`` from Python 3.11), as an ``asyncio.wait_for`` around the call raises."""


class ApiError(AgentMemoryError):
    """The server answered with an error status; ``detail`` is its message, ``body`` its JSON."""

    status: int = 0

    def __init__(self, status: int, detail: str, body: Any = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.body = body


class BadRequestError(ApiError, *_INVALID_INPUT):
    """400: the request was invalid and nothing was written; ``body`` holds the field errors.
    Also a ``ValueError`` (ADK's ``InputValidationError``)."""


class AuthenticationError(ApiError, PermissionError):
    """401: the API key is unknown, revoked or expired. Also a ``PermissionError``."""


class PermissionDeniedError(ApiError, PermissionError):
    """403: the key lacks the scope this call needs. Also a ``PermissionError``."""


class NotFoundError(ApiError, *_NOT_FOUND):
    """404: no such object for this app and end user. Also a ``LookupError`` (and ADK's
    ``NotFoundError``)."""


class AppNotFoundError(ApiError, *_NOT_FOUND):
    """404: the key reaches no app of this name (a wrong ``app_name``: every key is of one
    app); ``app_name`` is the name asked for. Also a ``LookupError`` (and ADK's
    ``NotFoundError``), but not a :class:`NotFoundError`: code that takes a missing object
    as an answer (``None``, an empty list) must not take a wrong app for one."""

    def __init__(self, status: int, detail: str, body: Any = None) -> None:
        super().__init__(status, detail, body)
        self.app_name = body.get("app_name") if isinstance(body, dict) else None


class ConflictError(ApiError, *_ALREADY_EXISTS):
    """409: the object already exists (a session id the end user already has in the app, an
    event id already stored). Also ADK's ``AlreadyExistsError``."""


class PayloadTooLargeError(ApiError, ValueError):
    """413: the body is over the server's limit. Also a ``ValueError``."""


class RateLimitedError(ApiError):
    """429: too many requests; retried by the client before it is raised."""


class ServerError(ApiError):
    """5xx: the server failed or is unavailable."""


class JobFailedError(AgentMemoryError, RuntimeError):
    """A background memory job ended failed (or dead, after its retries); ``job`` is its JSON.
    Also a ``RuntimeError``."""

    def __init__(self, job: dict[str, Any]) -> None:
        super().__init__(
            f"memory job {job.get('job_id')} ended {job.get('status')}: {job.get('error')}"
        )
        self.job = job


# The ``code`` of a 404 for an app the key does not reach, rather than an unknown object.
APP_NOT_FOUND_CODE = "app_not_found"

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
    if status == 404 and isinstance(body, dict) and body.get("code") == APP_NOT_FOUND_CODE:
        error_class = AppNotFoundError
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
