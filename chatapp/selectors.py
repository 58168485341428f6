"""Reads across the apps for a user's data rights: the export of everything kept about them.

The export is a generator of JSON text, written piece by piece while the rows are read with
``.iterator(chunk_size)``: a history of any length goes out with the memory of one chunk.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db.models import Prefetch
from django.utils import timezone

from access_app.selectors import access_tokens_of, audit_entries_for_subject, grants_of_owner
from memory_app.models import GenerationJob, Memory, MemoryRevision, MemorySource
from memory_app.selectors import memory_settings_get
from memory_app.serializers import revision_actor
from sessions_app.event_blobs import content_blobs_inlined, content_has_blobs
from sessions_app.models import EventRecord, SessionRecord, SessionState, UserState
from sessions_app.selectors import artifact_bytes, artifacts_of_user

EXPORT_FORMAT = "agent-memory-export/1"
CHUNK_ROWS = 500
CHUNK_BYTES = 64 * 1024


def _json(value: Any) -> str:
    return json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)


def _array(items: Iterable[Any]) -> Iterator[str]:
    """A JSON array of ``items``, each already a JSON text, written one item at a time."""
    yield "["
    for number, item in enumerate(items):
        yield item if number == 0 else "," + item
    yield "]"


def _event(record: EventRecord) -> str:
    return _json(
        {
            "id": record.event_id,
            "sequence": record.sequence,
            "invocation_id": record.invocation_id,
            "author": record.author,
            "timestamp": record.timestamp,
            "content": content_blobs_inlined(record.content, as_json=True)
            if content_has_blobs(record.content)
            else record.content,
            "actions": record.actions,
            "turn_complete": record.turn_complete,
            "interrupted": record.interrupted,
            "branch": record.branch,
            "error_code": record.error_code,
            "error_message": record.error_message,
            "custom_metadata": record.custom_metadata,
            "usage_metadata": record.usage_metadata,
            "rewound": record.rewound,
        }
    )


def _session(record: SessionRecord) -> Iterator[str]:
    state = dict(SessionState.objects.filter(session=record).values_list("key", "value"))
    head = {
        "id": record.session_id,
        "app_name": record.app_name,
        "title": record.title,
        "temporary": record.temporary,
        "created_at": record.created_at,
        "last_update_time": record.last_update_time,
        "initial_state": record.initial_state,
        "state": state,
    }
    yield _json(head)[:-1] + ',"events":'
    events = EventRecord.objects.filter(session=record).order_by("sequence")
    yield from _array(_event(event) for event in events.iterator(chunk_size=CHUNK_ROWS))
    yield "}"


def _sessions(user_pk: int) -> Iterator[str]:
    records = SessionRecord.objects.filter(user_id=user_pk).order_by(
        "created_at", "app_name", "session_id"
    )
    yield "["
    for number, record in enumerate(records.iterator(chunk_size=CHUNK_ROWS)):
        if number:
            yield ","
        yield from _session(record)
    yield "]"


def _memory(memory: Memory, *, user_pk: int) -> str:
    return _json(
        {
            "id": memory.id,
            "app_name": memory.app_name,
            "scope": memory.scope,
            "session_id": memory.session.session_id if memory.session_id else None,
            "topic": memory.topic,
            "text": memory.text,
            "structured": memory.structured,
            "source_type": memory.source_type,
            "confidence": memory.confidence,
            "importance": memory.importance,
            "status": memory.status,
            "created_at": memory.created_at,
            "updated_at": memory.updated_at,
            "expires_at": memory.expires_at,
            "image_artifact_id": memory.image_id,
            "sources": [
                {
                    "session_id": source.event.session.session_id,
                    "event_id": source.event.event_id,
                    "excerpt": source.excerpt,
                    "artifact_id": source.artifact_id,
                    "created_at": source.created_at,
                }
                for source in memory.sources.all()
            ],
            "revisions": [
                {
                    "action": revision.action,
                    "before": revision.before,
                    "after": revision.after,
                    "reason": revision.reason,
                    "actor": revision_actor(revision, user_pk=user_pk),
                    "created_at": revision.created_at,
                }
                for revision in memory.revisions.all()
            ],
        }
    )


def _memories(user_pk: int) -> Iterator[str]:
    memories = (
        Memory.objects.filter(user_id=user_pk)
        .select_related("session")
        .order_by("app_name", "created_at", "id")
        .prefetch_related(
            Prefetch(
                "sources",
                queryset=MemorySource.objects.select_related("event__session").order_by(
                    "event__session_id", "event__sequence"
                ),
            ),
            Prefetch("revisions", queryset=MemoryRevision.objects.order_by("created_at", "id")),
        )
    )
    return _array(
        _memory(memory, user_pk=user_pk) for memory in memories.iterator(chunk_size=CHUNK_ROWS)
    )


def _jobs(user_pk: int) -> Iterator[str]:
    jobs = (
        GenerationJob.objects.filter(user_id=user_pk)
        .order_by("created_at", "id")
        .values(
            "id",
            "app_name",
            "session_id",
            "trigger",
            "status",
            "attempts",
            "error",
            "created_at",
            "finished_at",
        )
    )
    return _array(_json(job) for job in jobs.iterator(chunk_size=CHUNK_ROWS))


def _grants(user) -> Iterator[str]:
    grants = grants_of_owner(owner=user).order_by("created_at", "id")
    return _array(
        _json(
            {
                "grantee": grant.grantee.get_username(),
                "scope": grant.scope,
                "created_at": grant.created_at,
                "expires_at": grant.expires_at,
                "revoked_at": grant.revoked_at,
            }
        )
        for grant in grants.iterator(chunk_size=CHUNK_ROWS)
    )


def _tokens(user) -> Iterator[str]:
    """The user's personal access tokens as they see them on Settings: never a secret or hash."""
    tokens = access_tokens_of(user=user).order_by("created", "pk")
    return _array(
        _json(
            {
                "name": token.name,
                "prefix": token.prefix,
                "scopes": token.scopes,
                "created_at": token.created,
                "expires_at": token.expiry_date,
                "revoked": token.revoked,
                "last_used_at": token.last_used_at,
            }
        )
        for token in tokens.iterator(chunk_size=CHUNK_ROWS)
    )


def _audit_log(user) -> Iterator[str]:
    entries = (
        audit_entries_for_subject(user=user)
        .order_by("created_at", "id")
        .values("actor_username", "action", "object_type", "object_id", "reason", "created_at")
    )
    return _array(_json(entry) for entry in entries.iterator(chunk_size=CHUNK_ROWS))


def _user_state(user_pk: int) -> dict[str, dict[str, Any]]:
    by_app: dict[str, dict[str, Any]] = {}
    rows = UserState.objects.filter(user_id=user_pk).order_by("app_name", "key")
    for app_name, key, value in rows.values_list("app_name", "key", "value"):
        by_app.setdefault(app_name, {})["user:" + key] = value
    return by_app


def _artifacts(user_pk: int) -> Iterator[str]:
    """Every file the user attached or saved, each version with its bytes (base64), one at a
    time: a file is in memory only while it is written out."""
    for record in artifacts_of_user(user_pk=user_pk).iterator(chunk_size=CHUNK_ROWS):
        yield _json(
            {
                "id": record.pk,
                "app_name": record.app_name,
                "session_id": record.session.session_id if record.session_id else None,
                "filename": record.filename,
                "version": record.version,
                "mime_type": record.mime_type,
                "size": record.size,
                "sha256": record.sha256,
                "create_time": record.create_time,
                "custom_metadata": record.custom_metadata,
                "data_base64": base64.b64encode(artifact_bytes(record)).decode("ascii"),
            }
        )


def _pieces(user) -> Iterator[str]:
    settings_row = memory_settings_get(user_pk=user.pk)
    head = {
        "format": EXPORT_FORMAT,
        "exported_at": timezone.now(),
        "user": {
            "id": user.pk,
            "username": user.get_username(),
            "email": user.email,
            "date_joined": user.date_joined,
        },
        "memory_settings": {
            "create_enabled": settings_row.create_enabled,
            "use_enabled": settings_row.use_enabled,
            "past_chats_enabled": settings_row.past_chats_enabled,
        },
        "user_state": _user_state(user.pk),
    }
    yield _json(head)[:-1]
    yield ',"sessions":'
    yield from _sessions(user.pk)
    yield ',"artifacts":'
    yield from _array(_artifacts(user.pk))
    yield ',"memories":'
    yield from _memories(user.pk)
    yield ',"memory_jobs":'
    yield from _jobs(user.pk)
    yield ',"access_grants":'
    yield from _grants(user)
    yield ',"access_tokens":'
    yield from _tokens(user)
    yield ',"staff_access_log":'
    yield from _audit_log(user)
    yield "}"


def user_data_export(*, user) -> Iterator[str]:
    """Everything kept about ``user`` as one JSON document, in pieces of about 64 KiB.

    Sessions with their state and every stored event (rewound ones too, marked), the files
    attached to them (every version, bytes included), ``user:`` state by app, memories with
    their sources and revisions (a kept file or a source's file named by its id among the
    files, whose bytes are there), generation jobs, memory settings, the access grants the user
    gave, their personal access tokens (never a secret) and the log of access to their data.
    App-scope state and memories are shared by every user and are not theirs to take.
    """
    buffer: list[str] = []
    size = 0
    for piece in _pieces(user):
        buffer.append(piece)
        size += len(piece)
        if size >= CHUNK_BYTES:
            yield "".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer)
