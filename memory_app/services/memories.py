"""Memories written or removed outside a generation run: by hand, by the agent's tool, by
forgetting and by a deleted session."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from memory_app import selectors
from memory_app.consolidation import (
    ConsolidationReport,
    consolidation_prepare,
    memories_consolidate,
)
from memory_app.extraction import (
    ExtractedFact,
    fact_text_normalise,
    fact_topic,
    user_text_normalise,
)
from memory_app.extraction.profile import (
    MAPPING_FIELDS,
    profile_field_valid,
    profile_read,
    profile_sentence,
)
from memory_app.models import (
    GenerationJob,
    Memory,
    MemoryRevision,
    MemoryScope,
    MemoryStatus,
    SourceType,
)
from memory_app.safety import pii_redact, text_normalise
from memory_app.safety.guard import memory_write_guard
from memory_app.services.jobs import job_finish
from memory_app.services.profile import profile_state_sync
from memory_app.services.users import (
    memory_change_notice_send,
    memory_index_invalidate,
    memory_index_invalidations_merged,
    memory_notices_send,
    user_lock,
)
from memory_app.topics import EXPLICIT_INSTRUCTIONS
from memory_app.wording import memory_said_to_user, sentence
from sessions_app.services import user_state_delete

logger = logging.getLogger(__name__)

CORRECTION_MAX_CHARS = 1000
CORRECTION_CONFIDENCE = 1.0


class MemoryCorrectionError(ValueError):
    """A correction that cannot be stored; the message says why, in words for the user."""


# --- Memories written directly -----------------------------------------------------------------


def _direct_job(*, app_name: str, user_pk: int, session_id: str | None) -> GenerationJob:
    return GenerationJob.objects.create(
        user_id=user_pk,
        app_name=app_name,
        session_id=session_id,
        trigger=GenerationJob.Trigger.TOOL,
        status=GenerationJob.Status.RUNNING,
        attempts=1,
        started_at=timezone.now(),
    )


def _revisions_attribute(*, job_id, added_by: str) -> None:
    for revision in MemoryRevision.objects.filter(actor_job_id=job_id):
        created = revision.action == MemoryRevision.Action.CREATED
        revision.reason = added_by if created else f"{revision.reason} ({added_by})"
        revision.save(update_fields=["reason"])


def memory_facts_store(
    *,
    app_name: str,
    user_pk: int,
    session_id: str | None,
    facts: list[ExtractedFact],
    sequences: tuple[int, int] | None = None,
    actor_user_pk: int | None = None,
    added_by: str = "",
) -> ConsolidationReport:
    """Store facts given directly (the ``create_memory`` tool, ``MemoryService.add_memory``)
    through consolidation, under the user's lock, as a ``tool``-trigger job; notices after.
    The facts are embedded before the lock is taken. ``added_by`` says in the history of each
    memory this writes who added it ("added over MCP with your token “laptop”"): a memory
    created says only that, one changed says it beside why."""
    prepared = consolidation_prepare(app_name=app_name, facts=facts, user_pk=user_pk)
    job = _direct_job(app_name=app_name, user_pk=user_pk, session_id=session_id)
    with transaction.atomic():
        user_lock(user_pk)
        report = memories_consolidate(
            user_pk=user_pk,
            app_name=app_name,
            session_id=session_id,
            facts=facts,
            prepared=prepared,
            job_id=job.id,
            actor_user_pk=actor_user_pk,
        )
        if added_by:
            _revisions_attribute(job_id=job.id, added_by=added_by)
        first, last = sequences or (None, None)
        job_finish(
            job,
            status=GenerationJob.Status.SUCCEEDED,
            first_sequence=first,
            last_sequence=last,
        )
    memory_index_invalidate(app_name=app_name, user_pk=user_pk)
    transaction.on_commit(lambda: memory_notices_send(user_pk=user_pk, report=report))
    return report


def memory_create_explicit(
    *,
    app_name: str,
    user_pk: int,
    session_id: str,
    invocation_id: str,
    text: str,
    asked: bool = True,
    scope: str = MemoryScope.USER,
) -> ConsolidationReport | None:
    """What the agent's ``create_memory`` tool stores: ``text``, sourced from the user message
    of this invocation, through consolidation and its safety checks. An explicit user
    statement when the user ``asked`` to have it remembered; else what the agent chose to
    keep of what they said, the agent's own inference: a ``tool`` fact, as a job reads the
    agent's ``create_memory`` calls, which never overrides what the person stated. With
    ``scope`` "session", it holds for this conversation only. None when creation is not
    allowed, now or when that message was said (``EventRecord.memory_excluded``)."""
    if not selectors.session_memory_access(user_pk=user_pk, session_id=session_id).create:
        return None
    user_event = selectors.session_user_event_get(
        session_id=session_id, invocation_id=invocation_id
    )
    if user_event is not None and user_event.memory_excluded:
        return None
    fact = ExtractedFact(
        text=text,
        topic=fact_topic(text=fact_text_normalise(text=text), default=EXPLICIT_INSTRUCTIONS),
        source_type=SourceType.EXPLICIT if asked else SourceType.TOOL,
        confidence=0.9 if asked else 0.8,
        importance=0.7,
        event_ids=[user_event.event_id] if user_event else [],
        excerpt=selectors.event_excerpt(user_event) if user_event else "",
        scope=MemoryScope.SESSION if scope == MemoryScope.SESSION else MemoryScope.USER,
    )
    sequence = (user_event.sequence, user_event.sequence) if user_event else None
    return memory_facts_store(
        app_name=app_name,
        user_pk=user_pk,
        session_id=session_id,
        facts=[fact],
        sequences=sequence,
    )


def memory_add_stated(
    *, app_name: str, user_pk: int, text: str, topic: str = "", added_by: str = ""
) -> Memory | None:
    """Store ``text`` as something the user stated (ADK's ``add_memory``, the MCP tool, the
    Memory page's form), outside any session, through consolidation and its safety checks;
    the memory kept (new, updated or the one it matched, possibly held for review), or None
    when it failed a check. ``added_by``: where it was added, for its history."""
    fact = ExtractedFact(
        text=text, topic=topic, source_type=SourceType.EXPLICIT, confidence=0.9, importance=0.5
    )
    report = memory_facts_store(
        app_name=app_name, user_pk=user_pk, session_id=None, facts=[fact], added_by=added_by
    )
    kept = report.created + report.updated + report.unchanged + report.quarantined
    return kept[0] if kept else None


def memory_delete(
    *, app_name: str, user_pk: int, memory_id: str, actor_user_pk: int | None = None
) -> bool:
    """Delete the user's memory with its sources and revisions; False if they have none such.

    A deletion the user asks for removes the text everywhere, history included: keeping it in a
    revision would defeat the point. Taken under the user's lock, so a generation job cannot
    update (and so write back) the memory while it goes; open chat pages get a notice.
    """
    if selectors.memory_get(app_name=app_name, user_pk=user_pk, memory_id=memory_id) is None:
        return False
    with transaction.atomic():
        user_lock(user_pk)
        deleted, _ = Memory.objects.filter(
            app_name=app_name, user_id=user_pk, pk=memory_id
        ).delete()
    if not deleted:
        return False
    logger.info("memory %s of user %s deleted by %s", memory_id, user_pk, actor_user_pk or user_pk)
    memory_index_invalidate(app_name=app_name, user_pk=user_pk)
    memory_change_notice_send(
        user_pk=user_pk,
        notice={
            "kind": "memory_deleted",
            "message": "A memory was deleted. It will not be used again.",
            "memory_ids": [str(memory_id)],
        },
    )
    return True


def memories_delete_all(*, app_name: str, user_pk: int) -> int:
    """Delete every memory of the user in the app (user and session scope, any status) with
    their sources and revisions, and their profile (``user:`` state, memory from their side);
    returns how many of both. Under the user's lock, like one deletion."""
    with transaction.atomic(), memory_index_invalidations_merged():
        user_lock(user_pk)
        # A profile key a memory holds is that memory, counted once (``profile_active``).
        held = len(selectors.profile_active(app_name=app_name, user_pk=user_pk))
        profile = user_state_delete(app_name=app_name, user_pk=user_pk)
        rows = Memory.objects.filter(app_name=app_name, user_id=user_pk)
        count = rows.delete()[1].get(Memory._meta.label, 0) + max(profile - held, 0)
        memory_index_invalidate(app_name=app_name, user_pk=user_pk)
    if count:
        memory_change_notice_send(
            user_pk=user_pk,
            notice={
                "kind": "memory_deleted",
                "message": f"All your memories were deleted ({count}). None will be used again.",
                "memory_ids": [],
                "all": True,
            },
        )
    return count


def _correction_snapshot(memory: Memory) -> dict:
    return {
        "text": memory.text,
        "source_type": memory.source_type,
        "confidence": memory.confidence,
        "status": memory.status,
    }


HELD_FOR_REVIEW = (MemoryStatus.QUARANTINED, MemoryStatus.REJECTED)


def _correction_allowed(memory: Memory) -> None:
    """A memory the safety check held for review stays held until staff decide: a correction
    that passes the check must not release it (the user could otherwise reword an instruction
    until it slips through and make it fully trusted)."""
    if memory.status in HELD_FOR_REVIEW:
        raise MemoryCorrectionError(
            "This memory is held for review by staff, so it cannot be corrected; you can delete it."
        )


def memory_correct(
    *,
    app_name: str,
    user_pk: int,
    memory_id: str,
    text: str,
    actor_user_pk: int | None = None,
    structured: dict | None = None,
) -> Memory | None:
    """Replace a memory's text with the user's correction; None if they have no such memory.

    What the user says about themselves outranks anything inferred, so the corrected memory
    becomes an explicit statement (the trust order's second rank, after bootstrapped facts)
    with full confidence, active again if it was invalidated. The old text stays in an
    ``updated`` revision naming the user. The correction passes the same safety check as any
    extracted fact, so a memory cannot be turned into an instruction to the agent; it raises
    :class:`MemoryCorrectionError` otherwise, as it does for a memory held for review
    (quarantined or rejected): only staff release those. The new text is embedded in the
    background once stored. The profile field a user-scope memory holds is ``structured``
    when given (a correction on the profile card), else what the new text states; the
    ``user:`` keys follow.
    """
    given = str(text)
    text = pii_redact(text=" ".join(text_normalise(given).split()), app_name=app_name)
    if not text:
        raise MemoryCorrectionError("A correction needs some text.")
    if "\x00" in text:
        raise MemoryCorrectionError("A memory cannot contain NUL characters.")
    if len(text) > CORRECTION_MAX_CHARS:
        raise MemoryCorrectionError(f"A memory is at most {CORRECTION_MAX_CHARS} characters.")
    # After the length is checked: the limit is on what the person typed, and the memory's
    # own voice ("I'm" -> "The user is", a full stop) may add a few characters.
    text = user_text_normalise(text=text)
    # The text as given too: joining its lines or dropping its invisible characters may
    # break a marker the guard would have read whole ("...\nAssistant: ...").
    verdict = memory_write_guard(text=given)
    if verdict.ok:
        verdict = memory_write_guard(text=text)
    if not verdict.ok:
        raise MemoryCorrectionError(f"This cannot be stored as a memory: {verdict.reason}.")
    current = selectors.memory_get(app_name=app_name, user_pk=user_pk, memory_id=memory_id)
    if current is None:
        return None
    _correction_allowed(current)
    with transaction.atomic():
        user_lock(user_pk)
        memory = (
            Memory.objects.select_for_update()
            .filter(app_name=app_name, user_id=user_pk, pk=memory_id)
            .first()
        )
        if memory is None:
            return None
        _correction_allowed(memory)
        before = _correction_snapshot(memory)
        replaced_fields = list(memory.structured or {})
        memory.text = text
        memory.structured = (
            structured or profile_read(text=fact_text_normalise(text=text))
            if memory.scope == MemoryScope.USER
            else None
        )
        memory.source_type = SourceType.EXPLICIT
        memory.confidence = CORRECTION_CONFIDENCE
        memory.status = MemoryStatus.ACTIVE
        memory.review_reason = ""
        memory.embedding, memory.embedding_model = None, ""  # embedded after commit
        memory.save()
        MemoryRevision.objects.create(
            memory=memory,
            action=MemoryRevision.Action.UPDATED,
            before=before,
            after=_correction_snapshot(memory),
            reason="Corrected by the user.",
            actor_user_id=actor_user_pk or user_pk,
        )
        profile_state_sync(app_name=app_name, user_pk=user_pk, fields=replaced_fields)
    memory_index_invalidate(app_name=app_name, user_pk=user_pk)
    memory_change_notice_send(
        user_pk=user_pk,
        notice={
            "kind": "memory_updated",
            "message": sentence(f"Memory corrected: {memory_said_to_user(text)[:160]}"),
            "memory_ids": [str(memory.id)],
        },
    )
    return memory


def profile_field_correct(
    *, app_name: str, user_pk: int, memory_id: str, field: str, entry: str, value: str
) -> Memory | None:
    """The user's correction of one field of their profile card (of its ``entry``, for family
    and preferences), made on the memory it comes from: its text becomes the field's sentence
    with the new value (the old one kept in its history) and it holds the new value; None
    when they have no such memory. Raises ``MemoryCorrectionError`` as any correction does."""
    structured = {field: {entry: value} if field in MAPPING_FIELDS else value}
    return memory_correct(
        app_name=app_name,
        user_pk=user_pk,
        memory_id=memory_id,
        text=profile_sentence(field=field, value=value, entry=entry),
        structured=structured if profile_field_valid(structured) else None,
    )


def memory_expiry_set(
    *,
    app_name: str,
    user_pk: int,
    memory_id: str,
    expires_at: datetime | None,
    actor_user_pk: int | None = None,
    reason: str = "",
) -> Memory | None:
    """Set when the user's memory is forgotten (``expires_at``), or clear it (None: kept until
    deleted); None if they have no such memory. An ``expiry_changed`` revision says who and
    why; the forgetting task deletes the memory once the time has passed, and search leaves
    it out from that moment."""
    with transaction.atomic():
        user_lock(user_pk)
        memory = (
            Memory.objects.select_for_update()
            .filter(app_name=app_name, user_id=user_pk, pk=memory_id)
            .first()
        )
        if memory is None:
            return None
        before = {"expires_at": memory.expires_at.isoformat() if memory.expires_at else None}
        memory.expires_at = expires_at
        memory.save(update_fields=["expires_at", "updated_at"])
        MemoryRevision.objects.create(
            memory=memory,
            action=MemoryRevision.Action.EXPIRY_CHANGED,
            before=before,
            after={"expires_at": expires_at.isoformat() if expires_at else None},
            reason=reason or ("Set to be forgotten." if expires_at else "Kept until deleted."),
            actor_user_id=actor_user_pk or user_pk,
        )
    memory_index_invalidate(app_name=app_name, user_pk=user_pk)
    return memory


# --- Forgetting ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForgetReport:
    """What one forgetting run did: memories deleted (expired), decayed and pruned."""

    expired: int
    decayed: int
    pruned: int


def memories_forget(*, now: datetime | None = None) -> ForgetReport:
    """Delete expired memories, decay the confidence of unused implicit and tool memories, and
    invalidate (with a revision) stale ones whose confidence fell below the threshold.

    "Unused" means not created or updated for ``MEMORY_DECAY_AFTER_DAYS``: a fact heard again
    is updated by consolidation, which resets the clock. Each run multiplies confidence by
    ``MEMORY_DECAY_FACTOR``, so the schedule's interval sets the pace. Explicit and bootstrapped
    memories do not decay: the user said them on purpose.
    """
    now = now or timezone.now()
    touched: set[tuple[str, int | None]] = set()
    with transaction.atomic():
        expired_rows = Memory.objects.filter(expires_at__lte=now)
        touched.update(expired_rows.values_list("app_name", "user_id"))
        expired = expired_rows.delete()[1].get(Memory._meta.label, 0)
        decayed = Memory.objects.filter(
            status=MemoryStatus.ACTIVE,
            source_type__in=[SourceType.IMPLICIT, SourceType.TOOL],
            updated_at__lt=now - timedelta(days=settings.MEMORY_DECAY_AFTER_DAYS),
        ).update(confidence=F("confidence") * settings.MEMORY_DECAY_FACTOR)
        stale = list(
            Memory.objects.select_for_update().filter(
                status=MemoryStatus.ACTIVE,
                confidence__lt=settings.MEMORY_PRUNE_BELOW_CONFIDENCE,
                updated_at__lt=now - timedelta(days=settings.MEMORY_PRUNE_AFTER_DAYS),
            )
        )
        MemoryRevision.objects.bulk_create(
            MemoryRevision(
                memory=memory,
                action=MemoryRevision.Action.INVALIDATED,
                before={"status": memory.status, "confidence": memory.confidence},
                after={"status": MemoryStatus.INVALIDATED},
                reason=(
                    f"Pruned: unused since {memory.updated_at:%Y-%m-%d}, confidence "
                    f"{memory.confidence:.2f} below {settings.MEMORY_PRUNE_BELOW_CONFIDENCE}."
                ),
            )
            for memory in stale
        )
        Memory.objects.filter(pk__in=[memory.pk for memory in stale]).update(
            status=MemoryStatus.INVALIDATED
        )
        for memory in stale:
            if memory.user_id is not None and memory.structured:
                profile_state_sync(
                    app_name=memory.app_name, user_pk=memory.user_id, fields=memory.structured
                )
        touched.update((memory.app_name, memory.user_id) for memory in stale)
    for app_name, user_pk in touched:
        memory_index_invalidate(app_name=app_name, user_pk=user_pk)
    return ForgetReport(expired=expired, decayed=decayed, pruned=len(stale))
