"""The chat socket's protocol (docs/websocket-protocol.md): its close codes, how a
client's frame is read and checked, and the shape of every frame the server sends.

The consumer and the turn it streams build their frames here, so a frame's
fields are spelled in one place, the one the protocol document describes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings

from core.api import json_problem
from sessions_app.events import Event
from sessions_app.selectors import StoredEvent
from sessions_app.serializers import event_representation

CLOSE_NOT_SIGNED_IN = 4401
CLOSE_NOT_FOUND = 4404
# The server is restarting: reconnect (to another process) and re-send. WebSocket's own
# "service restart", 1012, is one a server may not send through autobahn (daphne).
CLOSE_SERVER_RESTART = 4012
SHUTTING_DOWN = (
    "This server is restarting and takes no new messages; the chat reconnects to another "
    "one and sends your message there."
)
MESSAGE_NOT_STORED = (
    "The database is unavailable right now; your message was not stored. Send it again in a moment."
)
REPLY_NOT_STORED = (
    "The database became unavailable during the turn; your message is stored, "
    "the reply is not. Try again in a moment."
)
# A turn whose next event id holds an event of another invocation: it is given up, not retried.
TURN_BLOCKED_CODE = "turn_blocked"
TURN_BLOCKED = (
    "The reply cannot be stored: this chat already holds an event under its id. "
    "Send the message again (as a new message) or edit it."
)
CLIENT_MESSAGE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def max_frame_chars() -> int:
    """The longest frame read: a message at ``CHAT_MAX_MESSAGE_CHARS`` with every character
    escaped as ``\\uXXXX`` (six characters), plus room for the frame's other fields."""
    return 6 * settings.CHAT_MAX_MESSAGE_CHARS + 4096


def websocket_read_max_bytes() -> int:
    """The longest WebSocket message the server keeps (chatapp.webserver): a frame of
    ``max_frame_chars`` in UTF-8's widest encoding, four bytes a character. A longer one is
    over the limit whatever it holds, so it is dropped as it arrives, unread."""
    return 4 * max_frame_chars()


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON value.")


def frame_decode(text_data: str) -> Any:
    """Strict JSON: NaN and Infinity are refused like any other invalid JSON."""
    return json.loads(text_data, parse_constant=_refuse_constant)


def frame_problem(frame: dict[str, Any]) -> tuple[str, str] | None:
    """The error a frame holding text no store can hold gets, whatever its type: a NUL
    character or a lone surrogate in any key or string (an id, a text) is refused before a
    handler or the database reads it, as the REST API refuses it (``core.api``)."""
    problem = json_problem(frame)
    if problem:
        return "invalid_frame", problem
    return None


def user_message_problem(
    *, text: Any, client_message_id: Any, attachments: Any = None
) -> tuple[str, str] | None:
    """The error code and message a ``user_message`` frame is refused with, or None.

    ``attachments``, when given, is a list of the ids of files uploaded to the session; with
    some, the text may be empty.
    """
    limit = settings.ATTACHMENT_MAX_COUNT
    if attachments is not None and (
        not isinstance(attachments, list)
        or len(attachments) > limit
        or not all(isinstance(each, str) and len(each) <= 64 for each in attachments)
    ):
        return "invalid_frame", f"attachments must be a list of at most {limit} file ids."
    if not isinstance(text, str) or not (text.strip() or attachments):
        return "invalid_frame", "A user_message needs a non-empty text string."
    if len(text) > settings.CHAT_MAX_MESSAGE_CHARS:
        return (
            "message_too_large",
            f"The message has {len(text)} characters; at most "
            f"{settings.CHAT_MAX_MESSAGE_CHARS} are accepted.",
        )
    return client_message_id_problem(client_message_id)


def client_message_id_problem(client_message_id: Any) -> tuple[str, str] | None:
    """The error code and message a frame naming a malformed ``client_message_id`` gets."""
    if not isinstance(client_message_id, str) or not CLIENT_MESSAGE_ID.fullmatch(client_message_id):
        return (
            "invalid_frame",
            "A client_message_id of 1-64 letters, digits, _ or - is needed.",
        )
    return None


def message_id_problem(message_id: Any) -> tuple[str, str] | None:
    """The error an ``edit`` or ``regenerate`` frame naming a malformed ``message_id`` gets."""
    if not isinstance(message_id, str) or not 0 < len(message_id) <= 128:
        return "invalid_frame", "A message_id naming a stored event is needed."
    return None


def error_frame(*, code: str, message: str) -> dict[str, Any]:
    """Something was refused or failed; the socket stays usable."""
    return {"type": "error", "code": code, "message": message}


def pong_frame() -> dict[str, Any]:
    """The answer to a ``ping``."""
    return {"type": "pong"}


def notice_frame(*, notice: Any) -> dict[str, Any]:
    """A notice from the user's channel-layer group, passed on as it came."""
    return {"type": "notice", "notice": notice}


def turn_started_frame(
    *, client_message_id: str, invocation_id: str | None, resumed: bool = False
) -> dict[str, Any]:
    """The turn of this client message is running under this invocation; ``resumed`` when it
    runs on from its stored events (its process died, or Retry was asked)."""
    return {
        "type": "turn_started",
        "client_message_id": client_message_id,
        "invocation_id": invocation_id,
        "resumed": resumed,
    }


def turn_running_frame(*, client_message_id: str, invocation_id: str | None) -> dict[str, Any]:
    """The turn is running elsewhere (another socket or process): the reply so far and the
    rest of it follow on this socket as it streams, then its ``turn_complete``; it runs here
    if its process dies."""
    return {
        "type": "turn_running",
        "client_message_id": client_message_id,
        "invocation_id": invocation_id,
    }


def delta_frame(*, text: str, seq: int, event: Event) -> dict[str, Any]:
    """Streamed reply text of a partial event, numbered from 0 within the turn and carrying
    the id the stored reply will have, so the client can replace it with the final one."""
    return {
        "type": "delta",
        "text": text,
        "seq": seq,
        "message_id": event.id,
        "invocation_id": event.invocation_id,
    }


def event_frame(*, stored: StoredEvent) -> dict[str, Any]:
    """A stored event exactly as the REST API shows it."""
    return {
        "type": "event",
        "event": event_representation(
            event=stored.event, sequence=stored.sequence, rewound=stored.rewound
        ),
    }


def turn_complete_frame(
    *, client_message_id: str, invocation_id: str | None, final: Event | None, duplicate: bool
) -> dict[str, Any]:
    """The turn is over; ``final`` is its stored last event, None when none was stored."""
    context = (final.custom_metadata or {}).get("context") if final else None
    return {
        "type": "turn_complete",
        "client_message_id": client_message_id,
        "invocation_id": invocation_id,
        "message_id": final.id if final else None,
        "interrupted": final is None or bool(final.interrupted),
        "duplicate": duplicate,
        "context": context,
    }
