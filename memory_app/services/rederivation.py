"""Memories derived again from the sources they keep, after some of their sources went (a chat
deleted, a turn rewound or edited, a file removed, a session expired).

A memory keeps no text that no remaining source says: its remaining source events go through
the same extraction as a generation job (the model, or the offline rules) and the same
preparation (third person, safety, redaction, vectors), and the facts they yield about what
the memory holds are folded as consolidation decides between them: the same value said again
corroborates (confidence up by ``MERGE_CONFIDENCE_STEP``), another value that wins the
conflict replaces it (confidence down by ``CONTRADICTION_CONFIDENCE_STEP`` from the winner's:
the sources disagree). The result is an "updated" revision whose reason tells the person why:
"Derived again on 28 Nov after you deleted the chat “Moving”."

The request is written with the release, in the transaction that took the sources away
(``MemoryRederivation``); the derivation runs in the background once that commits, and a
request whose task was lost is run by the periodic :func:`memory_rederivations_sweep`.
Running a derivation again changes nothing more.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from itertools import groupby

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.background import task_enqueue
from memory_app.consolidation import (
    DUPLICATE_JACCARD,
    MERGE_CONFIDENCE_STEP,
    RELATED_JACCARD,
    PreparedFact,
    consolidation_prepare,
)
from memory_app.consolidation.writes import memory_snapshot
from memory_app.embedding import vector_to_bytes
from memory_app.extraction import fact_negated, fact_subject, facts_extract
from memory_app.models import (
    PERSON_SOURCES,
    TRUST,
    Memory,
    MemoryRederivation,
    MemoryRevision,
    MemoryScope,
    MemorySource,
    MemoryStatus,
    SourceType,
)
from memory_app.ranking import tokenize
from memory_app.services.users import memory_index_invalidate, user_lock
from memory_app.topics import topics_for_app
from sessions_app import selectors as session_selectors
from sessions_app.models import BackgroundModelCall
from sessions_app.services.model_calls import background_calls_kept

CONTRADICTION_CONFIDENCE_STEP = 0.1


def memories_rederive_request(*, causes: dict[uuid.UUID, str]) -> None:
    """Record, in the caller's transaction, that each memory of ``causes`` is to be derived
    again from the sources it keeps (the value: what took the others away, said to the
    person), and send the derivations to a worker once the transaction commits."""
    from memory_app.tasks import memory_rederive as rederive_task

    now = timezone.now()
    for memory_id, cause in causes.items():
        counted = MemoryRederivation.objects.filter(memory_id=memory_id).update(
            requests=F("requests") + 1, requested_at=now, cause=cause, error=""
        )
        if not counted:
            MemoryRederivation.objects.get_or_create(
                memory_id=memory_id, defaults={"cause": cause, "requested_at": now}
            )
        task_enqueue(task=rederive_task, memory_id=str(memory_id))


def _terms(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _texts_held(memory: Memory) -> list[str]:
    """Every text the memory held: its own and those its revisions recorded."""
    texts = [memory.text]
    for before, after in memory.revisions.values_list("before", "after"):
        for snapshot in (before, after):
            if isinstance(snapshot, dict) and isinstance(snapshot.get("text"), str):
                texts.append(snapshot["text"])
    return texts


def _bears_on(item: PreparedFact, held: list[str]) -> bool:
    """Whether the fact is about what the memory holds: the same single-valued subject ("lives
    in") as a text it held, or words related to one (consolidation's related threshold)."""
    subject = fact_subject(text=item.text)
    terms = _terms(item.text)
    for text in held:
        if subject and fact_subject(text=text) == subject:
            return True
        if _jaccard(terms, _terms(text)) >= RELATED_JACCARD:
            return True
    return False


def _wins(new: PreparedFact, new_time: float, old: PreparedFact, old_time: float) -> bool:
    """Consolidation's conflict rule: between two statements of the person the newer; otherwise
    trust first, then recency."""
    new_source, old_source = SourceType(new.fact.source_type), SourceType(old.fact.source_type)
    both_said = new_source in PERSON_SOURCES and old_source in PERSON_SOURCES
    if not both_said and TRUST[new_source] != TRUST[old_source]:
        return TRUST[new_source] > TRUST[old_source]
    return new_time >= old_time


def _fold(items: list[tuple[PreparedFact, float]]) -> tuple[PreparedFact, float, str] | None:
    """The fact the memory holds once ``items`` (in the order they were said) are consolidated,
    with its confidence and source type, or None without any."""
    held: PreparedFact | None = None
    held_time = 0.0
    confidence = 0.0
    source_type = ""
    for item, said_at in items:
        if held is None:
            held, held_time = item, said_at
            confidence, source_type = item.fact.confidence, item.fact.source_type
            continue
        same = item.text.casefold() == held.text.casefold() or (
            fact_negated(text=item.text) == fact_negated(text=held.text)
            and _jaccard(_terms(item.text), _terms(held.text)) >= DUPLICATE_JACCARD
        )
        if same:
            confidence = min(1.0, max(confidence + MERGE_CONFIDENCE_STEP, item.fact.confidence))
            if TRUST[SourceType(item.fact.source_type)] > TRUST[SourceType(source_type)]:
                source_type = item.fact.source_type
            held_time = max(held_time, said_at)
        elif _wins(item, said_at, held, held_time):
            held, held_time = item, said_at
            confidence = max(0.0, item.fact.confidence - CONTRADICTION_CONFIDENCE_STEP)
            source_type = item.fact.source_type
        else:
            confidence = max(0.0, confidence - CONTRADICTION_CONFIDENCE_STEP)
    if held is None:
        return None
    return held, round(confidence, 4), source_type


def _facts_of_sources(memory: Memory) -> tuple[list[tuple[PreparedFact, float]], str]:
    """The prepared facts the memory's remaining source events yield, each with when it was
    said, in that order, and the name of the embedder of their vectors. Extraction reads each
    session's events apart, as a generation job does."""
    event_pks = list(memory.sources.values_list("event_id", flat=True))
    stored = session_selectors.stored_events_of_records(user_pk=memory.user_id, event_pks=event_pks)
    events = [each.event for each in stored if not each.rewound]
    session_of = dict(
        MemorySource.objects.filter(memory=memory).values_list("event__event_id", "event__session")
    )
    topics = topics_for_app(app_name=memory.app_name)
    facts = []
    ordered = sorted(events, key=lambda event: (session_of.get(event.id, ""), event.timestamp))
    for _, group in groupby(ordered, key=lambda event: session_of.get(event.id, "")):
        facts += facts_extract(
            app_name=memory.app_name, events=list(group), topics=topics, user_pk=memory.user_id
        )
    prepared = consolidation_prepare(app_name=memory.app_name, facts=facts)
    said_at = {event.id: event.timestamp for event in events}
    items = [
        (item, max(said_at.get(i, 0.0) for i in item.fact.event_ids))
        for item in prepared.items
        if item.verdict.ok
    ]
    items.sort(key=lambda pair: pair[1])
    return items, prepared.embedder_name


def _derived_reason(cause: str) -> str:
    today = timezone.now()
    return f"Derived again on {today.day} {today:%b} {cause}."


def memory_rederive(*, memory_id: str) -> str:
    """Derive the memory again from the sources it keeps, if a request for it is recorded;
    returns what happened: ``updated``, ``unchanged`` or ``none`` (nothing was requested, or
    the memory is not a person's active one).

    The extraction (a model call when configured) runs before any lock; the write takes the
    user's lock and applies only if the memory's sources are still those read. A request that
    came meanwhile keeps its row, and its own task derives again. Raises the extraction's
    ``ModelError`` for the task to retry.
    """
    request = MemoryRederivation.objects.filter(memory_id=memory_id).first()
    if request is None:
        return "none"
    memory = Memory.objects.filter(pk=memory_id).first()
    derivable = (
        memory is not None
        and memory.status == MemoryStatus.ACTIVE
        and memory.scope != MemoryScope.APP
        and memory.user_id is not None
    )
    if not derivable:
        MemoryRederivation.objects.filter(memory_id=memory_id, requests=request.requests).delete()
        return "none"
    sources_read = set(memory.sources.values_list("event_id", flat=True))
    with background_calls_kept(
        app_name=memory.app_name, purpose=BackgroundModelCall.Purpose.REDERIVATION
    ):
        items, embedder_name = _facts_of_sources(memory) if sources_read else ([], "")
    held = _texts_held(memory)
    folded = _fold([(item, said_at) for item, said_at in items if _bears_on(item, held)])
    with transaction.atomic():
        user_lock(memory.user_id)
        memory = Memory.objects.filter(pk=memory_id).first()
        if memory is None:
            return "none"
        if set(memory.sources.values_list("event_id", flat=True)) != sources_read:
            return "none"
        outcome = _apply(memory=memory, folded=folded, cause=request.cause, embedder=embedder_name)
        MemoryRederivation.objects.filter(memory_id=memory_id, requests=request.requests).delete()
    memory_index_invalidate(app_name=memory.app_name, user_pk=memory.user_id)
    return outcome


def _apply(
    *, memory: Memory, folded: tuple[PreparedFact, float, str] | None, cause: str, embedder: str
) -> str:
    """Write the derivation: the memory updated (with a revision) when what its sources say
    differs from what it holds. One left with no source stays: the release that took its last
    source deleted it, unless its app keeps memories after their sessions."""
    if folded is None:
        return "unchanged"
    item, confidence, source_type = folded
    if (
        memory.text == item.text
        and abs(memory.confidence - confidence) < 1e-6
        and memory.source_type == source_type
    ):
        return "unchanged"
    before = memory_snapshot(memory)
    if memory.text != item.text:
        memory.text = item.text
        memory.structured = item.structured
        memory.topic = item.fact.topic or memory.topic
        memory.embedding = vector_to_bytes(item.vector) if item.vector is not None else None
        memory.embedding_model = embedder if item.vector is not None else ""
    memory.confidence = confidence
    memory.source_type = source_type
    memory.save()
    MemoryRevision.objects.create(
        memory=memory,
        action=MemoryRevision.Action.UPDATED,
        before=before,
        after=memory_snapshot(memory),
        reason=_derived_reason(cause),
    )
    return "updated"


def memory_rederive_fail(*, memory_id: str, error: Exception) -> None:
    """The derivation failed for good: its request stays, with the error, for staff to see and
    for the sweep not to run again until a new request comes."""
    MemoryRederivation.objects.filter(memory_id=memory_id).update(
        attempts=F("attempts") + 1, error=f"{type(error).__name__}: {error}"[:2000]
    )


def memory_rederivations_sweep(*, now: datetime | None = None) -> int:
    """Derive again the memories whose request has not run within
    ``MEMORY_JOB_REDISPATCH_AFTER_SECONDS`` (its task lost), oldest first, at most
    ``MEMORY_IDLE_SCAN_BATCH_SIZE`` a run, failed ones left out; returns how many were sent."""
    from memory_app.tasks import memory_rederive as rederive_task

    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.MEMORY_JOB_REDISPATCH_AFTER_SECONDS)
    due: list[uuid.UUID] = list(
        MemoryRederivation.objects.filter(requested_at__lt=cutoff, error="")
        .order_by("requested_at")
        .values_list("memory_id", flat=True)[: settings.MEMORY_IDLE_SCAN_BATCH_SIZE]
    )
    MemoryRederivation.objects.filter(memory_id__in=due).update(requested_at=now)
    for memory_id in due:
        task_enqueue(task=rederive_task, memory_id=str(memory_id))
    return len(due)
