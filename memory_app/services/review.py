"""What staff do to memories and generation jobs in the console: invalidate, restore, delete,
approve or reject a quarantined memory, correct the text of an app's shared memory, re-run
generation for a session, retry a job.

Every change of a memory is made under the owner's lock (app-scope memories have no owner and
take only their row lock), checked against the memory's current status, recorded as a
``MemoryRevision`` with the staff member as actor and the reason they gave, written to the
owner's audit log in the same transaction (so the log holds a change exactly when it happened),
and makes every process rebuild the owner's search index. An app-scope memory has no owner
whose log to write: its changes go to the console's own history (Django's admin log, the
memory's History page) instead, with the reason and never the text. A status that no longer
allows the change raises :class:`ReviewError`, so two reviewers acting on the same memory
cannot both succeed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta

from django.contrib.admin.models import CHANGE, DELETION, LogEntry
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.utils import timezone

from access_app.models import AuditAction
from access_app.services import audit_record
from memory_app.consolidation.writes import memory_snapshot
from memory_app.embedding import embedder_get, vector_to_bytes
from memory_app.models import (
    GenerationJob,
    Memory,
    MemoryRevision,
    MemoryScope,
    MemoryStatus,
    MemoryWatermark,
)
from memory_app.services.app_memories import AppMemoryError, app_memory_update
from memory_app.services.jobs import _job_enqueue, memory_job_request
from memory_app.services.memories import memory_expiry_set
from memory_app.services.users import memory_index_invalidate, user_lock
from sessions_app.models import SessionRecord

logger = logging.getLogger(__name__)

RETRYABLE_STATUSES = (GenerationJob.Status.FAILED, GenerationJob.Status.DEAD)


class ReviewError(ValueError):
    """The change does not apply to the object as it is now (its status, its kind)."""


def _locked_memory(memory_id: str) -> Memory:
    """The memory, locked after its owner's lock (the order every memory write takes)."""
    owner = Memory.objects.filter(pk=memory_id).values_list("user_id", flat=True).first()
    if owner is not None:
        user_lock(owner)
    memory = Memory.objects.select_for_update().filter(pk=memory_id).first()
    if memory is None:
        raise ReviewError("This memory no longer exists.")
    return memory


def _status_change(
    *,
    memory_id: str,
    actor: AbstractBaseUser,
    reason: str,
    path: str,
    allowed_from: Iterable[MemoryStatus],
    to: MemoryStatus,
    action: MemoryRevision.Action,
    audit_action: AuditAction,
) -> Memory:
    allowed = tuple(allowed_from)
    vector = _vector_for(memory_id) if to == MemoryStatus.ACTIVE else None
    with transaction.atomic():
        memory = _locked_memory(memory_id)
        if memory.status not in allowed:
            names = " or ".join(MemoryStatus(status).label.lower() for status in allowed)
            raise ReviewError(
                f"Only a memory that is {names} can be {action.label.lower()}; "
                f"this one is {memory.get_status_display().lower()}."
            )
        before = memory_snapshot(memory)
        memory.status = to
        fields = ["status", "updated_at"]
        if vector is not None and vector[0] == memory.text and not memory.embedding:
            memory.embedding, memory.embedding_model = vector[1], vector[2]
            fields += ["embedding", "embedding_model"]
        memory.save(update_fields=fields)
        MemoryRevision.objects.create(
            memory=memory,
            action=action,
            before=before,
            after=memory_snapshot(memory),
            reason=reason,
            actor_user_id=actor.pk,
        )
        _audit(actor, memory, audit_action, reason=reason, path=path)
        memory_index_invalidate(app_name=memory.app_name, user_pk=memory.user_id)
    logger.info("memory %s %s by user %s", memory_id, action, actor.pk)
    return memory


def _audit(
    actor: AbstractBaseUser, memory: Memory, action: AuditAction, *, reason: str, path: str
) -> None:
    if memory.user_id is None:
        _console_history_record(actor=actor, memory=memory, action=action, reason=reason)
        return
    audit_record(
        actor=actor,
        subject_user_pk=memory.user_id,
        action=action,
        object_type=Memory._meta.label_lower,
        object_id=str(memory.pk),
        reason=reason,
        path=path,
    )


def _console_history_record(
    *, actor: AbstractBaseUser, memory: Memory, action: AuditAction, reason: str
) -> None:
    """A staff change of an app-scope memory, in Django's admin log: who, when, what and why
    (the memory named by its app, never by its text, which a deletion must not leave behind)."""
    label = AuditAction(action).label
    LogEntry.objects.create(
        user_id=actor.pk,
        content_type=ContentType.objects.get_for_model(Memory),
        object_id=str(memory.pk),
        object_repr=f"shared memory of {memory.app_name}"[:200],
        action_flag=DELETION if action == AuditAction.DELETE else CHANGE,
        change_message=f"{label}: {reason}" if reason else label,
    )


def _vector_for(memory_id: str) -> tuple[str, bytes, str] | None:
    """(text, vector, model) for a memory about to become active that has no vector (a
    quarantined one is stored without): made before the lock, as the embedder may be a network
    call, and used only if the text is still the same under the lock."""
    row = Memory.objects.filter(pk=memory_id).values("text", "embedding").first()
    embedder = embedder_get()
    if row is None or row["embedding"] or embedder.name == "none":
        return None
    vectors = embedder.encode([row["text"]])
    if vectors is None:
        return None
    return row["text"], vector_to_bytes(vectors[0]), embedder.name


def memory_invalidate(
    *, memory_id: str, actor: AbstractBaseUser, reason: str, path: str = ""
) -> Memory:
    """Take an active memory out of use; it stays visible to the owner and staff, restorable."""
    return _status_change(
        memory_id=memory_id,
        actor=actor,
        reason=reason,
        path=path,
        allowed_from=[MemoryStatus.ACTIVE],
        to=MemoryStatus.INVALIDATED,
        action=MemoryRevision.Action.INVALIDATED,
        audit_action=AuditAction.INVALIDATE,
    )


def memory_restore(
    *, memory_id: str, actor: AbstractBaseUser, reason: str, path: str = ""
) -> Memory:
    """Bring an invalidated memory back into use (a rejected one goes through review again
    only by approval, never by a restore)."""
    return _status_change(
        memory_id=memory_id,
        actor=actor,
        reason=reason,
        path=path,
        allowed_from=[MemoryStatus.INVALIDATED],
        to=MemoryStatus.ACTIVE,
        action=MemoryRevision.Action.RESTORED,
        audit_action=AuditAction.RESTORE,
    )


def memory_quarantine_approve(
    *, memory_id: str, actor: AbstractBaseUser, reason: str, path: str = ""
) -> Memory:
    """A reviewer judged a quarantined memory harmless: it becomes active (and is embedded).

    Its text is the quarantined one, secrets already masked: approval never brings a secret
    back. ``review_reason`` keeps why it was held."""
    return _status_change(
        memory_id=memory_id,
        actor=actor,
        reason=reason,
        path=path,
        allowed_from=[MemoryStatus.QUARANTINED],
        to=MemoryStatus.ACTIVE,
        action=MemoryRevision.Action.APPROVED,
        audit_action=AuditAction.APPROVE,
    )


def memory_quarantine_reject(
    *, memory_id: str, actor: AbstractBaseUser, reason: str, path: str = ""
) -> Memory:
    """A reviewer confirmed a quarantined memory must not be used: it is rejected for good, and
    consolidation links the same text heard again to it instead of quarantining it anew."""
    return _status_change(
        memory_id=memory_id,
        actor=actor,
        reason=reason,
        path=path,
        allowed_from=[MemoryStatus.QUARANTINED],
        to=MemoryStatus.REJECTED,
        action=MemoryRevision.Action.REJECTED,
        audit_action=AuditAction.REJECT,
    )


def app_memory_staff_edit(
    *, memory_id: str, actor: AbstractBaseUser, text: str, reason: str, path: str = ""
) -> Memory:
    """Correct the text of an app's active shared memory: the memory stays bootstrapped and
    active, re-embedded, with an ``updated`` revision holding the old and the new text, the
    staff member and ``reason``, and an entry in the console's history. A user's memory is
    theirs to correct (``ReviewError``), as is text that breaks an app memory's rules or
    changes nothing."""
    memory = Memory.objects.filter(pk=memory_id).first()
    if memory is None:
        raise ReviewError("This memory no longer exists.")
    if memory.scope != MemoryScope.APP:
        raise ReviewError("Only an app's shared memory is edited here; a user's is theirs.")
    if memory.status != MemoryStatus.ACTIVE:
        raise ReviewError(
            f"Only an active shared memory can be edited; this one is "
            f"{memory.get_status_display().lower()}."
        )
    with transaction.atomic():
        try:
            changed = app_memory_update(
                app_name=memory.app_name,
                memory_id=memory_id,
                text=text,
                actor_user_pk=actor.pk,
                reason=reason,
            )
        except AppMemoryError as error:
            raise ReviewError(str(error)) from None
        if changed is None:
            raise ReviewError("This memory no longer exists.")
        if changed.text == memory.text:
            raise ReviewError("The text is as it was: nothing changed.")
        _audit(actor, changed, AuditAction.CHANGE, reason=reason, path=path)
    logger.info("app memory %s edited by user %s", memory_id, actor.pk)
    return changed


STAFF_EXPIRY_DAYS = 30


def memory_staff_expiry(
    *,
    memory_id: str,
    actor: AbstractBaseUser,
    reason: str,
    path: str = "",
    days: int | None = STAFF_EXPIRY_DAYS,
) -> Memory:
    """Set a memory to be forgotten ``days`` from now, or clear its expiry (``days`` None),
    with a revision naming the staff member and an entry in the owner's audit log."""
    memory = Memory.objects.filter(pk=memory_id).first()
    if memory is None or memory.user_id is None:
        raise ReviewError("Only a user's memory has an expiry to change here.")
    expires_at = timezone.now() + timedelta(days=days) if days else None
    with transaction.atomic():
        changed = memory_expiry_set(
            app_name=memory.app_name,
            user_pk=memory.user_id,
            memory_id=memory_id,
            expires_at=expires_at,
            actor_user_pk=actor.pk,
            reason=reason,
        )
        _audit(actor, changed, AuditAction.CHANGE, reason=reason, path=path)
    return changed


def memory_staff_expiry_clear(
    *, memory_id: str, actor: AbstractBaseUser, reason: str, path: str = ""
) -> Memory:
    return memory_staff_expiry(
        memory_id=memory_id, actor=actor, reason=reason, path=path, days=None
    )


def memory_staff_delete(
    *, memory_id: str, actor: AbstractBaseUser, reason: str, path: str = ""
) -> dict[str, str]:
    """Delete a memory with its sources and revisions, as the owner's own deletion does: a
    deleted memory keeps no copy of its text anywhere. Returns what the audit trail may keep
    of it (id, owner, app; never the text)."""
    with transaction.atomic():
        memory = _locked_memory(memory_id)
        kept = {
            "memory_id": str(memory.pk),
            "user_id": str(memory.user_id or ""),
            "app_name": memory.app_name,
        }
        _audit(actor, memory, AuditAction.DELETE, reason=reason, path=path)
        memory.delete()
        memory_index_invalidate(app_name=memory.app_name, user_pk=memory.user_id)
    logger.info("memory %s deleted by user %s", memory_id, actor.pk)
    return kept


def memory_session_regenerate(
    *, session_id: str, actor: AbstractBaseUser, reason: str = "", path: str = ""
) -> GenerationJob:
    """Run generation again over the whole session: its watermark goes back to the start and a
    ``manual`` job is queued (or the one already queued is reused).

    Safe to repeat: consolidation links facts already stored to their memories and changes
    nothing when every event is already a source, so a re-run adds what was missed (a topic
    added since, a failed job) without duplicating what is there. Raises ``ReviewError`` when
    the session is gone, temporary, or its owner turned memory creation off.
    """
    session = SessionRecord.objects.filter(pk=session_id).first()
    if session is None:
        raise ReviewError("This session no longer exists.")
    with transaction.atomic():
        user_lock(session.user_id)
        MemoryWatermark.objects.filter(session_id=session_id).update(last_sequence=0)
        job = memory_job_request(
            app_name=session.app_name,
            user_pk=session.user_id,
            session_id=session_id,
            trigger=GenerationJob.Trigger.MANUAL,
        )
        if job is None:
            raise ReviewError(
                "Generation cannot run for this session: it is a temporary chat or its owner "
                "turned memory creation off."
            )
        audit_record(
            actor=actor,
            subject_user_pk=session.user_id,
            action=AuditAction.RERUN,
            object_type=SessionRecord._meta.label_lower,
            object_id=session_id,
            reason=reason,
            path=path,
        )
    logger.info("session %s regeneration queued by user %s", session_id, actor.pk)
    return job


def memory_job_retry(
    *, job_id: str, actor: AbstractBaseUser, reason: str = "", path: str = ""
) -> GenerationJob:
    """Queue a failed or dead job again, with a fresh count of attempts; its last error stays
    shown until the new run ends. A ``tool`` job is not retried: its facts were given directly
    and lived only in the process that lost them."""
    with transaction.atomic():
        job = GenerationJob.objects.select_for_update().filter(pk=job_id).first()
        if job is None:
            raise ReviewError("This job no longer exists.")
        if job.status not in RETRYABLE_STATUSES:
            raise ReviewError(
                f"Only a failed or dead job can be retried; this one is {job.status}."
            )
        if job.trigger == GenerationJob.Trigger.TOOL:
            raise ReviewError("A create_memory tool job cannot be run again: its facts are gone.")
        job.status = GenerationJob.Status.QUEUED
        job.attempts = 0
        job.started_at = None
        job.finished_at = None
        job.save(update_fields=["status", "attempts", "started_at", "finished_at"])
        audit_record(
            actor=actor,
            subject_user_pk=job.user_id,
            action=AuditAction.RETRY,
            object_type=GenerationJob._meta.label_lower,
            object_id=str(job.pk),
            reason=reason,
            path=path,
        )
        _job_enqueue(job)
    logger.info("memory job %s retried by user %s", job_id, actor.pk)
    return job
