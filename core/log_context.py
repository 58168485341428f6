"""Structured logs: every line says which request, turn and user it belongs to.

The ids live in contextvars, so they follow a request or a chat turn through
``await``, ``sync_to_async`` and the tasks a turn starts, without being passed
around: the request middleware binds the request id, the WebSocket middleware
binds the connection's request id and user, the runner binds the invocation
id of the turn it runs. ``LogContextFilter`` copies them onto each record,
which either formatter then prints (``LOG_FORMAT``: one JSON object a line,
or text for a terminal).
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.json import JsonFormatter

FIELDS = ("request_id", "invocation_id", "user_id")

_context: dict[str, ContextVar[str | None]] = {
    name: ContextVar(name, default=None) for name in FIELDS
}

# An incoming X-Request-ID is kept only if it is short and harmless to print.
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]{1,128}")
TEXT_FORMAT = (
    "%(asctime)s %(levelname)s %(name)s "
    "[request=%(request_id)s invocation=%(invocation_id)s user=%(user_id)s] %(message)s"
)


def log_context_bind(**values: Any) -> None:
    """Attach ids (``request_id``, ``invocation_id``, ``user_id``) to this context's log lines.

    The binding lasts for the current task or thread context and whatever it
    starts from now on; a value of None unbinds.
    """
    for name, value in values.items():
        _context[name].set(None if value is None else str(value))


def log_context_clear() -> None:
    """Unbind every id (a request is over; its thread may serve another next)."""
    log_context_bind(**dict.fromkeys(FIELDS))


def log_context_clear_on_request_finished(**kwargs: Any) -> None:
    """``request_finished`` receiver: Django logs a response's status after the middleware
    returned, so the request's ids are unbound only once the response is done."""
    log_context_clear()


def log_context_get() -> dict[str, str | None]:
    """The ids bound in this context, by field name."""
    return {name: variable.get() for name, variable in _context.items()}


def request_id_from(header_value: str | None) -> str:
    """The caller's request id if it is a sane one, else a new one."""
    if header_value and REQUEST_ID_PATTERN.fullmatch(header_value):
        return header_value
    return uuid.uuid4().hex


class LogContextFilter(logging.Filter):
    """Put the bound ids on every record that passes, as attributes the formatters print."""

    def filter(self, record: logging.LogRecord) -> bool:
        for name, value in log_context_get().items():
            if getattr(record, name, None) is None:
                setattr(record, name, value)
        return True


class JsonLogFormatter(JsonFormatter):
    """One JSON object a line: time, level, logger, message, the bound ids and any extras.

    Extras that are not JSON values (a request object passed by Django) are
    written as their ``str``; the time is ISO 8601 in UTC.
    """

    def __init__(self) -> None:
        super().__init__(
            "%(levelname)s %(name)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger"},
        )

    def add_fields(
        self, log_data: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        log_data["time"] = datetime.fromtimestamp(record.created, tz=UTC).isoformat(
            timespec="milliseconds"
        )
        super().add_fields(log_data, record, message_dict)
        for name in FIELDS:
            log_data.setdefault(name, getattr(record, name, None))


class TextLogFormatter(logging.Formatter):
    """A line for a terminal, with ``-`` for ids that are not bound."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        unbound = [name for name in FIELDS if getattr(record, name, None) is None]
        for name in unbound:
            setattr(record, name, "-")
        try:
            return super().format(record)
        finally:
            # Other handlers (a test's, a log shipper's) see the record as it was.
            for name in unbound:
                setattr(record, name, None)
