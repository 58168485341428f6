"""App-scope memories: what an app's agent knows for every user (shared knowledge, and the
whitepaper's procedural memory: how this app's agent handles recurring tasks).

Made by trusted hands only, staff in the console and the app's service accounts, so they are
``bootstrapped``, the highest trust. They still pass the write guard every memory passes
(:func:`~memory_app.safety.guard.memory_write_guard`), as procedural text: telling the agent
how to work is their point, so an order ("Always answer in French") is allowed, but a text
that holds a secret, orders the agent to drop its instructions or limits, carries role markup
or is in a language the guard does not read is refused, since a leaked service key must not
turn into the agent's instructions; PII is redacted when the app asks for it. Every creation
and deletion is a revision saying who and why, and the app's search index is rebuilt in every
process.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models import QuerySet

from memory_app.models import Memory, MemoryRevision, MemoryScope, MemoryStatus, SourceType
from memory_app.safety import pii_redact
from memory_app.safety.guard import memory_write_guard
from memory_app.services.users import memory_index_invalidate

APP_MEMORY_MAX_CHARS = 2000


class AppMemoryError(ValueError):
    """The app memory cannot be made as asked; nothing was written."""


def _text_checked(text: str, *, app_name: str) -> str:
    """``text`` as an app memory holds it (spaces collapsed, PII redacted per the app), or
    ``AppMemoryError`` saying why not (empty, too long, or refused by the write guard)."""
    text = " ".join(str(text).split())
    if not text:
        raise AppMemoryError("An app memory needs text.")
    if len(text) > APP_MEMORY_MAX_CHARS:
        raise AppMemoryError(f"An app memory is at most {APP_MEMORY_MAX_CHARS} characters.")
    verdict = memory_write_guard(text=text, procedural=True)
    if not verdict.ok:
        raise AppMemoryError(f"Not saved as a memory: {verdict.reason}.")
    return pii_redact(text=text, app_name=app_name)


def app_memories(*, app_name: str) -> QuerySet[Memory]:
    """The app's active shared memories, newest first."""
    return Memory.objects.filter(
        app_name=app_name, scope=MemoryScope.APP, status=MemoryStatus.ACTIVE
    ).order_by("-updated_at", "-pk")


def app_memory_create(
    *,
    app_name: str,
    text: str,
    topic: str = "",
    importance: float = 0.7,
    actor_user_pk: int | None = None,
    reason: str = "",
) -> Memory:
    """A bootstrapped memory of the app, with its ``created`` revision (by ``actor_user_pk``,
    a staff member, or none for a service account, named in ``reason``)."""
    text = _text_checked(text, app_name=app_name)
    with transaction.atomic():
        memory = Memory.objects.create(
            app_name=app_name,
            scope=MemoryScope.APP,
            user=None,
            text=text,
            topic=topic,
            source_type=SourceType.BOOTSTRAPPED,
            confidence=1.0,
            importance=importance,
        )
        MemoryRevision.objects.create(
            memory=memory,
            action=MemoryRevision.Action.CREATED,
            after={"text": text, "topic": topic},
            reason=reason,
            actor_user_id=actor_user_pk,
        )
        memory_index_invalidate(app_name=app_name, user_pk=None)
    return memory


def app_memory_update(
    *,
    app_name: str,
    memory_id: str,
    text: str | None = None,
    topic: str | None = None,
    actor_user_pk: int | None = None,
    reason: str = "",
) -> Memory | None:
    """Correct one of the app's shared memories (its text, its topic, or both); None if the
    app has none with that id. The old values stay in an ``updated`` revision saying who
    (``actor_user_pk``, or the service account named in ``reason``) and why; the memory stays
    bootstrapped and active."""
    if text is not None:
        text = _text_checked(text, app_name=app_name)
    with transaction.atomic():
        memory = (
            Memory.objects.select_for_update()
            .filter(pk=memory_id, app_name=app_name, scope=MemoryScope.APP)
            .first()
        )
        if memory is None:
            return None
        before = {"text": memory.text, "topic": memory.topic}
        if text is not None and text != memory.text:
            memory.text = text
            memory.embedding, memory.embedding_model = None, ""  # embedded after commit
        if topic is not None:
            memory.topic = topic
        after = {"text": memory.text, "topic": memory.topic}
        if after == before:
            return memory
        memory.save()
        MemoryRevision.objects.create(
            memory=memory,
            action=MemoryRevision.Action.UPDATED,
            before=before,
            after=after,
            reason=reason,
            actor_user_id=actor_user_pk,
        )
        memory_index_invalidate(app_name=app_name, user_pk=None)
    return memory


def app_memory_delete(*, app_name: str, memory_id: str) -> bool:
    """Delete one of the app's shared memories; False if the app has none with that id.

    Its text and revisions go with it (a deletion asked for is a deletion); who asked is in
    the audit of the request that asked (the service account's request, or staff's audit
    entry when deleted in the console).
    """
    with transaction.atomic():
        deleted, _ = Memory.objects.filter(
            pk=memory_id, app_name=app_name, scope=MemoryScope.APP
        ).delete()
        if deleted:
            memory_index_invalidate(app_name=app_name, user_pk=None)
    return bool(deleted)
