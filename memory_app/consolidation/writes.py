"""The writes of one consolidation: memories created, merged, updated, invalidated or
quarantined, each with its revision (by the acting job or person) and its source links, and
the report of where each fact went."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from django.utils import timezone

from memory_app.consolidation.matching import KnownMemories, KnownMemory
from memory_app.consolidation.preparation import PreparedFact
from memory_app.embedding import vector_to_bytes
from memory_app.models import (
    TRUST,
    Memory,
    MemoryRevision,
    MemoryScope,
    MemorySource,
    MemoryStatus,
    SourceType,
)
from memory_app.safety import secrets_mask
from memory_app.topics import memory_ttl_days
from sessions_app import services as session_services
from sessions_app.models import ArtifactRecord, EventRecord

MERGE_CONFIDENCE_STEP = 0.05


@dataclass
class ConsolidationReport:
    """Where each fact went, as the memories it touched (a memory may appear more than once).

    ``unchanged`` holds memories a fact matched without changing their text: duplicates merged
    (sources added or not) and memories that won a conflict.
    """

    created: list[Memory] = field(default_factory=list)
    updated: list[Memory] = field(default_factory=list)
    invalidated: list[Memory] = field(default_factory=list)
    quarantined: list[Memory] = field(default_factory=list)
    unchanged: list[Memory] = field(default_factory=list)


def memory_snapshot(memory: Memory) -> dict[str, Any]:
    """What a revision records of a memory before and after a change."""
    return {
        "text": memory.text,
        "topic": memory.topic,
        "source_type": memory.source_type,
        "confidence": memory.confidence,
        "importance": memory.importance,
        "status": memory.status,
    }


class MemoryWrites:
    """The writes of one consolidation, kept in step with the run's known memories and
    reported in :attr:`report`."""

    def __init__(
        self,
        *,
        user_pk: int,
        app_name: str,
        events: dict[str, EventRecord],
        embedder_name: str,
        job_id: uuid.UUID | str | None,
        actor_user_pk: int | None,
        known: KnownMemories,
        artifacts: dict[str, ArtifactRecord] | None = None,
        session_id: str | None = None,
    ) -> None:
        self.user_pk = user_pk
        self.app_name = app_name
        self.session_id = session_id
        self.events = events
        self.artifacts = artifacts or {}
        self.embedder_name = embedder_name
        self.job_id = job_id
        self.actor_user_pk = actor_user_pk
        self.known = known
        self.report = ConsolidationReport()
        self.written: set[uuid.UUID] = set()  # memories this run created or updated
        self.ttl_days = memory_ttl_days(app_name=app_name)

    def _expiry(self, item: PreparedFact) -> datetime | None:
        """When a new memory is forgotten: the fact's own expiry (a time-bound fact), else its
        topic's or the app's TTL from now, else never."""
        if item.fact.expires_at is not None:
            return datetime.fromtimestamp(item.fact.expires_at, tz=UTC)
        days = self.ttl_days.get(item.fact.topic) or self.ttl_days.get("")
        return timezone.now() + timedelta(days=days) if days else None

    def _revision(
        self,
        memory: Memory,
        *,
        action: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        reason: str,
        item: PreparedFact | None = None,
    ) -> None:
        """A revision by the run's job or person; ``item``: the fact that made the change,
        whose first stored event becomes the revision's source."""
        source = None
        if item is not None:
            source = next((self.events[i] for i in item.fact.event_ids if i in self.events), None)
        MemoryRevision.objects.create(
            memory=memory,
            action=action,
            before=before,
            after=after,
            reason=reason,
            actor_job_id=self.job_id,
            actor_user_id=self.actor_user_pk,
            source_event=source,
        )

    def fact_file(
        self, item: PreparedFact, *, event_id: str | None = None
    ) -> ArtifactRecord | None:
        """The first stored file the fact was drawn from (attached to ``event_id`` if given)."""
        for each in item.fact.files:
            if event_id is None or each.event_id == event_id:
                record = self.artifacts.get(each.artifact_id)
                if record is not None:
                    return record
        return None

    def _sources_add(self, memory: Memory, item: PreparedFact, linked: set[int]) -> list[str]:
        """Link the fact's events not yet linked to ``memory``, each with the file of it the
        fact was drawn from; returns their event ids."""
        added = []
        for event_id in item.fact.event_ids:
            record = self.events.get(event_id)
            if record is None or record.pk in linked:
                continue
            MemorySource.objects.create(
                memory=memory,
                event=record,
                excerpt=item.excerpt,
                artifact=self.fact_file(item, event_id=event_id),
            )
            linked.add(record.pk)
            added.append(event_id)
        return added

    def fact_time(self, item: PreparedFact) -> float:
        """When the fact was said: its newest event's timestamp (now when none is stored)."""
        times = [self.events[i].timestamp for i in item.fact.event_ids if i in self.events]
        return max(times) if times else time.time()

    def _embedding_fields(self, vector: np.ndarray | None) -> dict[str, Any]:
        if vector is None:
            return {"embedding": None, "embedding_model": ""}
        return {"embedding": vector_to_bytes(vector), "embedding_model": self.embedder_name}

    def quarantine(self, item: PreparedFact) -> None:
        """Hold the fact for review as a memory of its own, with the copy of its file a memory
        that keeps one holds (see :meth:`create`): approved, it is the same memory as one that
        was never held; and the person sees on their Memory page what is held about them."""
        fact = item.fact
        text = secrets_mask(text=item.text)
        existing = (
            Memory.objects.filter(
                user_id=self.user_pk,
                app_name=self.app_name,
                text=text,
                status__in=[MemoryStatus.QUARANTINED, MemoryStatus.REJECTED],
            )
            .order_by("created_at")
            .first()
        )
        if existing is not None:
            linked = set(existing.sources.values_list("event_id", flat=True))
            self._sources_add(existing, item, linked)
            self.report.quarantined.append(existing)
            return
        kept = self.fact_file(item) if fact.keeps_file else None
        memory = Memory.objects.create(
            image=session_services.artifact_user_copy(record=kept) if kept else None,
            app_name=self.app_name,
            scope=MemoryScope.USER,
            user_id=self.user_pk,
            topic=fact.topic,
            text=text,
            source_type=fact.source_type,
            confidence=fact.confidence,
            importance=fact.importance,
            status=MemoryStatus.QUARANTINED,
            review_reason=item.verdict.reason,
            job_id=self.job_id,
        )
        self._sources_add(memory, item, set())
        self._revision(
            memory,
            action=MemoryRevision.Action.QUARANTINED,
            before=None,
            after=memory_snapshot(memory),
            reason=item.verdict.reason,
        )
        self.report.quarantined.append(memory)

    def create(self, item: PreparedFact, *, reason: str) -> Memory:
        """A new memory of the fact; one that keeps its file holds a copy of the user's own
        (``sessions_app.services.artifact_user_copy``), which outlives the chat. A
        session-scope fact makes a memory of the run's session, which later facts of the run
        are not compared with (they are about the person, it about this conversation)."""
        fact = item.fact
        kept = self.fact_file(item) if fact.keeps_file else None
        session_only = fact.scope == MemoryScope.SESSION and self.session_id is not None
        memory = Memory.objects.create(
            image=session_services.artifact_user_copy(record=kept) if kept else None,
            app_name=self.app_name,
            scope=MemoryScope.SESSION if session_only else MemoryScope.USER,
            session_id=self.session_id if session_only else None,
            structured=item.structured,
            user_id=self.user_pk,
            topic=fact.topic,
            text=item.text,
            source_type=fact.source_type,
            confidence=fact.confidence,
            importance=fact.importance,
            job_id=self.job_id,
            expires_at=self._expiry(item),
            **self._embedding_fields(item.vector),
        )
        linked: set[int] = set()
        self._sources_add(memory, item, linked)
        self._revision(
            memory,
            action=MemoryRevision.Action.CREATED,
            before=None,
            after=memory_snapshot(memory),
            reason=reason,
        )
        if not session_only:
            self.known.remember(memory, last_seen=self.fact_time(item), events=linked)
            self.known.index_add(memory, item.vector)
        self.report.created.append(memory)
        self.written.add(memory.id)
        return memory

    def session_merge(self, memory: Memory, item: PreparedFact) -> None:
        """The session-scope fact was already kept for this session: its events become
        sources of that memory (none when already linked, so a re-run changes nothing)."""
        linked = set(memory.sources.values_list("event_id", flat=True))
        if self._sources_add(memory, item, linked):
            self._revision(
                memory,
                action=MemoryRevision.Action.SOURCES_CHANGED,
                before=memory_snapshot(memory),
                after=memory_snapshot(memory),
                reason="the same fact was stated again",
            )
        self.report.unchanged.append(memory)

    def merge(self, known: KnownMemory, item: PreparedFact) -> None:
        memory, fact = known.memory, item.fact
        before = memory_snapshot(memory)
        added = self._sources_add(memory, item, known.event_pks)
        more_trusted = TRUST[SourceType(fact.source_type)] > TRUST[SourceType(memory.source_type)]
        profiled = item.structured is not None and memory.structured != item.structured
        if not added and not more_trusted and not profiled:
            self.report.unchanged.append(memory)
            return
        if more_trusted:
            memory.source_type = fact.source_type
        if profiled:
            memory.structured = item.structured
        if added:
            memory.confidence = min(
                1.0, max(memory.confidence + MERGE_CONFIDENCE_STEP, fact.confidence)
            )
            known.last_seen = max(known.last_seen, self.fact_time(item))
        memory.importance = max(memory.importance, fact.importance)
        memory.save(
            update_fields=["source_type", "confidence", "importance", "structured", "updated_at"]
        )
        self._revision(
            memory,
            action=MemoryRevision.Action.SOURCES_CHANGED,
            before=before,
            after={**memory_snapshot(memory), "added_event_ids": added},
            reason="the same fact was stated again",
        )
        self.report.unchanged.append(memory)

    def update(
        self,
        known: KnownMemory,
        item: PreparedFact,
        *,
        reason: str,
        text: str = "",
        vector: np.ndarray | None = None,
    ) -> None:
        """``known`` takes the fact's text (or ``text`` with its ``vector``, as the model
        phrased the update), source type and confidence, and the fact's events as sources."""
        memory, fact = known.memory, item.fact
        before = memory_snapshot(memory)
        memory.text = text or item.text
        memory.structured = item.structured
        vector = vector if text else item.vector
        memory.topic = fact.topic or memory.topic
        memory.source_type = fact.source_type
        memory.confidence = fact.confidence
        memory.importance = max(memory.importance, fact.importance)
        if fact.expires_at is not None:
            memory.expires_at = datetime.fromtimestamp(fact.expires_at, tz=UTC)
        for name, value in self._embedding_fields(vector).items():
            setattr(memory, name, value)
        memory.save()
        self._sources_add(memory, item, known.event_pks)
        self._revision(
            memory,
            action=MemoryRevision.Action.UPDATED,
            before=before,
            after=memory_snapshot(memory),
            reason=reason,
            item=item,
        )
        self.known.remember(
            memory, last_seen=max(known.last_seen, self.fact_time(item)), events=known.event_pks
        )
        self.known.index_add(memory, vector)
        self.report.updated.append(memory)
        self.written.add(memory.id)

    def revise(self, known: KnownMemory, item: PreparedFact, *, text: str, reason: str) -> None:
        """``known`` keeps all it said but a clause the fact retired or replaced: its text
        becomes ``text`` (an "updated" revision with before and after, the fact's event its
        source); its vector is dropped, as it was made for the longer text."""
        memory = known.memory
        before = memory_snapshot(memory)
        memory.text = text
        memory.embedding, memory.embedding_model = None, ""
        memory.save(update_fields=["text", "embedding", "embedding_model", "updated_at"])
        self._revision(
            memory,
            action=MemoryRevision.Action.UPDATED,
            before=before,
            after=memory_snapshot(memory),
            reason=reason,
            item=item,
        )
        self.known.remember(memory, last_seen=known.last_seen, events=known.event_pks)
        self.known.index_add(memory, None)
        self.report.updated.append(memory)

    def invalidate(self, known: KnownMemory, item: PreparedFact, *, reason: str = "") -> None:
        memory = known.memory
        before = memory_snapshot(memory)
        memory.status = MemoryStatus.INVALIDATED
        memory.save(update_fields=["status", "updated_at"])
        self._revision(
            memory,
            action=MemoryRevision.Action.INVALIDATED,
            before=before,
            after=memory_snapshot(memory),
            reason=reason or f"contradicted by: {item.text}",
            item=item,
        )
        self.known.forget(memory)
        self.report.invalidated.append(memory)
