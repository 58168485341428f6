"""Editing a sent message and regenerating the last reply: the session is rewound to just
before that turn (the session store's atomic rewind) and the new turn runs from there.

The new turn carries the replaced message's attached files again (those still stored), so the
model reads them as it did the first time and the chat shows them on the new message.

The rewind is named after the new turn's client message (``edit-<client_message_id>``), so a
re-sent ``edit`` or ``regenerate`` frame rewinds once: when the socket dropped after the
rewind but before the new message was stored, the re-sent frame finds its rewind stored and
runs the message without rewinding again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import Enum

from agents_app.chat.protocol import TURN_BLOCKED, TURN_BLOCKED_CODE
from agents_app.models import TurnClaim
from agents_app.runtime.turns import user_event_id_for
from sessions_app import selectors, services
from sessions_app.errors import InvocationNotFoundError, SessionNotFoundError
from sessions_app.events import (
    ATTACHMENTS_KEY,
    REWRITE_EVENT_ID_PREFIX,
    Event,
    new_invocation_id,
)
from sessions_app.models import ArtifactRecord, EventRecord


class Rewrite(Enum):
    """What the new turn replaces: a message the user sent, or the last reply."""

    EDIT = "edit"
    REGENERATE = "regenerate"


class RewriteRefusedError(Exception):
    """The rewind was not made; ``code`` and the message go to the client as an error frame."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class RewriteDone:
    """The rewind event stored (or found, for a re-sent frame), and the text and the attached
    files the new turn runs with."""

    rewind: selectors.StoredEvent
    text: str
    attachments: list[ArtifactRecord]


def rewind_event_id_for(client_message_id: str) -> str:
    """The id of the rewind an edit or a regeneration made for the turn of this client message."""
    return f"{REWRITE_EVENT_ID_PREFIX}{client_message_id}"


def _text(record: EventRecord) -> str:
    parts = (record.content or {}).get("parts") or []
    return "".join(part.get("text") or "" for part in parts if not part.get("thought"))


def _attachment_ids(record: EventRecord) -> list[str]:
    """The ids of the files a user event names in its metadata (well-formed ones only: an
    event appended through the API may say anything there)."""
    ids = []
    for each in (record.custom_metadata or {}).get(ATTACHMENTS_KEY) or []:
        try:
            ids.append(str(uuid.UUID(str(each.get("id")))))
        except (AttributeError, ValueError):
            continue
    return ids


def _sent_something(record: EventRecord) -> bool:
    """Whether a user event holds a message: text, or attached files."""
    return bool(_text(record) or _attachment_ids(record))


def _attachments(record: EventRecord, *, user_pk: int) -> list[ArtifactRecord]:
    """The files a user message carried that are still stored, in the order it named them: one
    deleted since is left out, as the model would find it gone in the history anyway."""
    ids = _attachment_ids(record)
    found = {
        str(artifact.pk): artifact
        for artifact in ArtifactRecord.objects.filter(
            pk__in=ids, session_id=record.session_id, user_id=user_pk
        ).select_related("session")
    }
    return [found[each] for each in ids if each in found]


def _opening_user_event(*, session_id: str, invocation_id: str) -> EventRecord | None:
    return (
        EventRecord.objects.filter(
            session_id=session_id, invocation_id=invocation_id, author="user"
        )
        .order_by("sequence")
        .first()
    )


def _last_turn_invocation(*, session_id: str) -> str | None:
    """The invocation of the last message the user sent that is still in the history."""
    return (
        EventRecord.objects.filter(session_id=session_id, author="user", rewound=False)
        .exclude(content__isnull=True)
        .order_by("-sequence")
        .values_list("invocation_id", flat=True)
        .first()
    )


def _target(*, rewrite: Rewrite, session_id: str, message_id: str) -> EventRecord:
    """The user message the new turn replaces (for a regeneration, the one the reply answered),
    or RewriteRefusedError."""
    record = EventRecord.objects.filter(
        session_id=session_id, event_id=message_id, rewound=False
    ).first()
    if record is None:
        raise RewriteRefusedError(
            "turn_not_found", "This chat has no such message in its history any more."
        )
    if rewrite is Rewrite.EDIT:
        if record.author != "user" or not _sent_something(record):
            raise RewriteRefusedError("invalid_frame", "Only a message you sent can be edited.")
        return record
    if record.author == "user" or record.invocation_id != _last_turn_invocation(
        session_id=session_id
    ):
        raise RewriteRefusedError("invalid_frame", "Only the last reply can be regenerated.")
    opening = _opening_user_event(session_id=session_id, invocation_id=record.invocation_id)
    if opening is None or not _sent_something(opening):
        raise RewriteRefusedError("invalid_frame", "This reply answers no message to send again.")
    return opening


def chat_turn_rewrite(
    *,
    user_pk: int,
    app_name: str,
    session_id: str,
    session_key: str,
    rewrite: Rewrite,
    message_id: str,
    client_message_id: str,
    text: str | None,
) -> RewriteDone:
    """Rewind the user's session (``session_id`` in the app, its row of key ``session_key``)
    to just before the turn of ``message_id`` for the new turn of
    ``client_message_id``, which then runs ``text`` (an edit) or the replaced turn's own message
    (a regeneration, ``text`` None), with the files the replaced message carried.

    Refused (RewriteRefusedError, nothing written) when the message is not in the history, is
    not the user's (an edit) or not the last reply (a regeneration), would send nothing (a
    regenerated message of files alone, all deleted since), while a turn of the
    session is still open: rewinding under a reply being written would lose it, or when the
    rewind's id holds an event that is no rewind (``turn_blocked``). The memories
    the rewound turns made are revised afterwards, in the background (``session_rewound``).
    """
    rewind_id = rewind_event_id_for(client_message_id)
    done = EventRecord.objects.filter(session_id=session_key, event_id=rewind_id).first()
    if done is not None and not (done.actions or {}).get("rewind_before_invocation_id"):
        # Not a rewind: an event a client stored under the id before such ids were refused.
        raise RewriteRefusedError(TURN_BLOCKED_CODE, TURN_BLOCKED)
    if done is not None:
        opening = _opening_user_event(
            session_id=session_key, invocation_id=done.actions["rewind_before_invocation_id"]
        )
        if opening is None:
            raise RewriteRefusedError("turn_not_found", "The replaced message is gone.")
        run_text = _text(opening) if text is None else text
        attachments = _attachments(opening, user_pk=user_pk)
        if not (run_text.strip() or attachments):
            raise RewriteRefusedError("turn_not_found", "The replaced message is gone.")
        return RewriteDone(
            rewind=_stored(session_id=session_key, event_id=rewind_id),
            text=run_text,
            attachments=attachments,
        )
    target = _target(rewrite=rewrite, session_id=session_key, message_id=message_id)
    run_text = _text(target) if text is None else text
    attachments = _attachments(target, user_pk=user_pk)
    if not (run_text.strip() or attachments):
        raise RewriteRefusedError(
            "invalid_frame", "This reply answers files that were deleted since; nothing to send."
        )
    open_turns = TurnClaim.objects.filter(session_id=session_key).exclude(
        user_event_id=user_event_id_for(client_message_id)
    )
    if open_turns.exists():
        raise RewriteRefusedError(
            "turn_in_progress", "A reply is still being written in this chat; wait for it to end."
        )
    try:
        services.session_rewind(
            app_name=app_name,
            user_id=str(user_pk),
            session_id=session_id,
            rewind_before_invocation_id=target.invocation_id,
            sent=Event(
                id=rewind_id,
                invocation_id=new_invocation_id(),
                author="user",
                custom_metadata={"rewrite": rewrite.value, "client_message_id": client_message_id},
            ),
        )
    except InvocationNotFoundError:
        raise RewriteRefusedError(
            "turn_not_found", "This chat has no such message in its history any more."
        ) from None
    return RewriteDone(
        rewind=_stored(session_id=session_key, event_id=rewind_id),
        text=run_text,
        attachments=attachments,
    )


def _stored(*, session_id: str, event_id: str) -> selectors.StoredEvent:
    stored = selectors.stored_event_get(session_key=session_id, event_id=event_id)
    if stored is None:
        raise SessionNotFoundError(f"Session {session_id!r} not found.")
    return stored
