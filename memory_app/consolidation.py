"""Consolidation: extracted facts merged into a user's memories, in one transaction.

For each fact, in order:

1. Safety (:mod:`memory_app.safety`): a refused text becomes a *quarantined* memory (secrets
   masked, PII redacted, the reason kept, a "quarantined" revision), never an active one. The
   same text already quarantined or rejected for the user gets the fact's sources, no second
   row.
2. The text is normalised (third person, see :func:`fact_text_normalise`) and PII redacted per
   the app's setting.
3. Similar memories: the user's active user-scope memories of the app, ranked by BM25 over
   the fact's text (``memory_app.ranking``, plus cosine when the embedder gives vectors);
   every ranked memory is compared on index-term overlap (Jaccard) and cosine:
   - a *duplicate* has the same polarity (both negated or neither), Jaccard >= 0.8 or cosine
     >= 0.95 (or the same text), and no conflicting value of the same subject;
   - a *related* memory has Jaccard >= 0.5 or cosine >= 0.8.
4. The decision, first match wins:
   a. duplicate: merge. The fact's events not yet linked become sources; confidence rises by
      0.05 (at least to the fact's), a more trusted source type is adopted; a
      "sources_changed" revision. Nothing at all when every event is already linked: this is
      what makes a second run of the same facts a no-op.
   b. a related memory of opposite polarity ("The user does not like coffee" against "The
      user likes coffee", or the reverse) is contradicted: it is INVALIDATED (status
      invalidated, an "invalidated" revision), then the fact goes on to c-f.
   c. a fact with a single-valued subject (:func:`fact_subject`: "The user lives in ...")
      UPDATES the latest memory with that subject (an "updated" revision with before and
      after; reason "corrected by the user" for a ``correction``, else "newer information");
   d. a switch (:func:`memory_app.extraction.fact_switch`: "The user switched from coffee to
      tea") UPDATES the preference it replaces: the latest active, affirmative preference
      holding every index term of what the user switched from, or with no "from", one term of
      what they switched to;
   e. a ``correction`` without such a memory UPDATES the most related memory of the same
      polarity;
   f. otherwise: CREATE a memory.
   An update or invalidation happens only when the fact wins the conflict: a more trusted
   source type wins (bootstrapped > explicit > implicit > tool); with equal trust the newer
   wins (event timestamps: the fact's newest event against the memory's newest source), a
   correction or retraction also winning a tie (it was said in the same message). A losing
   fact changes nothing: a lower-trust fact never overwrites a higher-trust memory, and it
   is not linked as a source of a memory it contradicts.

Records of whole turns (offline rule 4, :func:`memory_app.extraction.fact_is_turn_record`:
"[8 May 2023] Caroline: ...") are append-only: what was said on a day stays true as a record
even when a later turn says otherwise, and their many words make them look related to almost
any fact. So a record is merged only into an active record of the same words (case and
punctuation aside; step a, sources added) and otherwise created; it never invalidates,
updates or merges into a fact, and no fact ever invalidates, updates or merges into a record.

Every write (memories with embeddings, revisions with the acting job or person, source links
to the session's ``EventRecord`` rows with their excerpts) happens in one transaction: a
failure leaves the memories as they were. Texts are embedded before that transaction, by
:func:`consolidation_prepare`, which a caller that takes the user's lock runs before taking it:
the embedder may be a network call.
A fact already applied to a memory that a later fact invalidated (same text, same events) is
not applied again, so re-running a job never brings back an invalidated memory.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Max

from memory_app.embedding import embedder_get, vector_from_bytes, vector_to_bytes
from memory_app.extraction import (
    ExtractedFact,
    FactKind,
    fact_is_turn_record,
    fact_negated,
    fact_subject,
    fact_switch,
    fact_text_normalise,
)
from memory_app.models import (
    TRUST,
    Memory,
    MemoryRevision,
    MemoryScope,
    MemorySource,
    MemoryStatus,
    SourceType,
)
from memory_app.ranking import MemoryIndex, NoEmbedder, tokenize
from memory_app.safety import SafetyVerdict, memory_text_check, pii_redact, secrets_mask
from memory_app.topics import PREFERENCES
from sessions_app.models import EventRecord

DUPLICATE_JACCARD = 0.8
DUPLICATE_COSINE = 0.95
RELATED_JACCARD = 0.5
RELATED_COSINE = 0.8
CANDIDATES = 10
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


@dataclass
class PreparedFact:
    """A fact as consolidation stores it: normalised and redacted text, redacted excerpt, the
    safety verdict, and the text's vector (None for a refused text or with no embedder)."""

    fact: ExtractedFact
    text: str
    excerpt: str
    verdict: SafetyVerdict
    vector: np.ndarray | None = None


@dataclass(frozen=True)
class PreparedFacts:
    """What :func:`consolidation_prepare` computed for one app's facts, in the facts' order,
    with the name of the embedder that made the vectors."""

    app_name: str
    items: list[PreparedFact]
    embedder_name: str


@dataclass
class _Known:
    """An active memory during the run, with what decisions need about it."""

    memory: Memory
    terms: frozenset[str]
    subject: str
    negated: bool
    last_seen: float
    event_pks: set[int]
    record: bool


def _terms(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))


def _record_key(text: str) -> str:
    """A turn record's words, case and punctuation aside: records with the same key are the
    same thing said on the same day by the same speaker."""
    return " ".join(tokenize(text, stemming=False, drop_stopwords=False))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def _snapshot(memory: Memory) -> dict[str, Any]:
    return {
        "text": memory.text,
        "topic": memory.topic,
        "source_type": memory.source_type,
        "confidence": memory.confidence,
        "importance": memory.importance,
        "status": memory.status,
    }


class _Run:
    """One consolidation: the user's active memories indexed, and the writes of this run."""

    def __init__(
        self,
        *,
        user_pk: int,
        app_name: str,
        events: dict[str, EventRecord],
        embedder_name: str,
        job_id: uuid.UUID | str | None,
        actor_user_pk: int | None,
    ) -> None:
        self.user_pk = user_pk
        self.app_name = app_name
        self.events = events
        self.embedder_name = embedder_name
        self.job_id = job_id
        self.actor_user_pk = actor_user_pk
        self.report = ConsolidationReport()
        self.index = MemoryIndex(embedder=NoEmbedder())
        self.known: dict[uuid.UUID, _Known] = {}
        self.records: dict[str, _Known] = {}  # turn records by _record_key
        memories = Memory.objects.filter(
            user_id=user_pk, app_name=app_name, scope=MemoryScope.USER, status=MemoryStatus.ACTIVE
        ).annotate(last_source_time=Max("sources__event__timestamp"))
        links: dict[uuid.UUID, set[int]] = {}
        for memory_id, event_pk in MemorySource.objects.filter(
            memory__user_id=user_pk,
            memory__app_name=app_name,
            memory__scope=MemoryScope.USER,
            memory__status=MemoryStatus.ACTIVE,
        ).values_list("memory_id", "event_id"):
            links.setdefault(memory_id, set()).add(event_pk)
        for memory in memories:
            last_seen = memory.last_source_time or memory.updated_at.timestamp()
            stored = None
            if memory.embedding_model == embedder_name:
                stored = vector_from_bytes(memory.embedding)
            self._remember(memory, last_seen=last_seen, events=links.get(memory.id, set()))
            self._index(memory, stored)

    def _remember(self, memory: Memory, *, last_seen: float, events: set[int]) -> None:
        known = _Known(
            memory=memory,
            terms=_terms(memory.text),
            subject=fact_subject(text=memory.text),
            negated=fact_negated(text=memory.text),
            last_seen=last_seen,
            event_pks=events,
            record=fact_is_turn_record(text=memory.text, topic=memory.topic),
        )
        self.known[memory.id] = known
        if known.record:
            self.records.setdefault(_record_key(memory.text), known)

    def _index(self, memory: Memory, vector: np.ndarray | None) -> None:
        """Make ``memory`` a candidate for later facts' similarity (turn records never are)."""
        if not self.known[memory.id].record:
            self.index.add(doc_id=memory.id, text=memory.text, vector=vector)

    # --- writes ---------------------------------------------------------------------------

    def _revision(
        self,
        memory: Memory,
        *,
        action: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        reason: str,
    ) -> None:
        MemoryRevision.objects.create(
            memory=memory,
            action=action,
            before=before,
            after=after,
            reason=reason,
            actor_job_id=self.job_id,
            actor_user_id=self.actor_user_pk,
        )

    def _sources_add(self, memory: Memory, item: PreparedFact, linked: set[int]) -> list[str]:
        """Link the fact's events not yet linked to ``memory``; returns their event ids."""
        added = []
        for event_id in item.fact.event_ids:
            record = self.events.get(event_id)
            if record is None or record.pk in linked:
                continue
            MemorySource.objects.create(memory=memory, event=record, excerpt=item.excerpt)
            linked.add(record.pk)
            added.append(event_id)
        return added

    def _fact_time(self, item: PreparedFact) -> float:
        times = [self.events[i].timestamp for i in item.fact.event_ids if i in self.events]
        return max(times) if times else time.time()

    def _embedding_fields(self, vector: np.ndarray | None) -> dict[str, Any]:
        if vector is None:
            return {"embedding": None, "embedding_model": ""}
        return {"embedding": vector_to_bytes(vector), "embedding_model": self.embedder_name}

    def quarantine(self, item: PreparedFact) -> None:
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
        memory = Memory.objects.create(
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
            after=_snapshot(memory),
            reason=item.verdict.reason,
        )
        self.report.quarantined.append(memory)

    def create(self, item: PreparedFact, *, reason: str) -> Memory:
        fact = item.fact
        memory = Memory.objects.create(
            app_name=self.app_name,
            scope=MemoryScope.USER,
            user_id=self.user_pk,
            topic=fact.topic,
            text=item.text,
            source_type=fact.source_type,
            confidence=fact.confidence,
            importance=fact.importance,
            job_id=self.job_id,
            **self._embedding_fields(item.vector),
        )
        linked: set[int] = set()
        self._sources_add(memory, item, linked)
        self._revision(
            memory,
            action=MemoryRevision.Action.CREATED,
            before=None,
            after=_snapshot(memory),
            reason=reason,
        )
        self._remember(memory, last_seen=self._fact_time(item), events=linked)
        self._index(memory, item.vector)
        self.report.created.append(memory)
        return memory

    def merge(self, known: _Known, item: PreparedFact) -> None:
        memory, fact = known.memory, item.fact
        before = _snapshot(memory)
        added = self._sources_add(memory, item, known.event_pks)
        more_trusted = TRUST[SourceType(fact.source_type)] > TRUST[SourceType(memory.source_type)]
        if not added and not more_trusted:
            self.report.unchanged.append(memory)
            return
        if more_trusted:
            memory.source_type = fact.source_type
        if added:
            memory.confidence = min(
                1.0, max(memory.confidence + MERGE_CONFIDENCE_STEP, fact.confidence)
            )
            known.last_seen = max(known.last_seen, self._fact_time(item))
        memory.importance = max(memory.importance, fact.importance)
        memory.save(update_fields=["source_type", "confidence", "importance", "updated_at"])
        self._revision(
            memory,
            action=MemoryRevision.Action.SOURCES_CHANGED,
            before=before,
            after={**_snapshot(memory), "added_event_ids": added},
            reason="the same fact was stated again",
        )
        self.report.unchanged.append(memory)

    def update(self, known: _Known, item: PreparedFact, *, reason: str) -> None:
        memory, fact = known.memory, item.fact
        before = _snapshot(memory)
        memory.text = item.text
        memory.topic = fact.topic or memory.topic
        memory.source_type = fact.source_type
        memory.confidence = fact.confidence
        memory.importance = max(memory.importance, fact.importance)
        for name, value in self._embedding_fields(item.vector).items():
            setattr(memory, name, value)
        memory.save()
        self._sources_add(memory, item, known.event_pks)
        self._revision(
            memory,
            action=MemoryRevision.Action.UPDATED,
            before=before,
            after=_snapshot(memory),
            reason=reason,
        )
        self._remember(
            memory, last_seen=max(known.last_seen, self._fact_time(item)), events=known.event_pks
        )
        self._index(memory, item.vector)
        self.report.updated.append(memory)

    def invalidate(self, known: _Known, item: PreparedFact) -> None:
        memory = known.memory
        before = _snapshot(memory)
        memory.status = MemoryStatus.INVALIDATED
        memory.save(update_fields=["status", "updated_at"])
        self._revision(
            memory,
            action=MemoryRevision.Action.INVALIDATED,
            before=before,
            after=_snapshot(memory),
            reason=f"contradicted by: {item.text}",
        )
        del self.known[memory.id]
        self.index.remove(doc_id=memory.id)
        self.report.invalidated.append(memory)

    # --- decisions ------------------------------------------------------------------------

    def _wins(self, item: PreparedFact, known: _Known) -> bool:
        """Trust first, then recency; a correction or retraction also wins a tie in time."""
        fact_trust = TRUST[SourceType(item.fact.source_type)]
        memory_trust = TRUST[SourceType(known.memory.source_type)]
        if fact_trust != memory_trust:
            return fact_trust > memory_trust
        fact_time = self._fact_time(item)
        if fact_time != known.last_seen:
            return fact_time > known.last_seen
        return item.fact.kind in (FactKind.CORRECTION, FactKind.RETRACTION)

    def _similar(self, item: PreparedFact) -> list[tuple[_Known, float, float]]:
        """The ranked memories (turn records are not indexed) with their Jaccard and cosine
        similarity to the fact."""
        terms = _terms(item.text)
        ranked = self.index.search(query=item.text, limit=CANDIDATES, query_vector=item.vector)
        return [
            (self.known[hit.doc_id], _jaccard(terms, self.known[hit.doc_id].terms), hit.semantic)
            for hit in ranked
        ]

    def _switched_from(self, old: str, new: str) -> _Known | None:
        """The preference a switch replaces: the latest active, affirmative preference that
        names all of what the user switched from ("likes coffee in the morning" for "from
        coffee"), or, with no "from", something of what they switched to ("likes black tea"
        for "to green tea")."""
        wanted, switched_to = _terms(old), _terms(new) - {"user"}

        def replaced(known: _Known) -> bool:
            if known.negated or known.memory.topic != PREFERENCES:
                return False
            return wanted <= known.terms if wanted else bool(switched_to & known.terms)

        candidates = [known for known in self.known.values() if replaced(known)]
        return max(candidates, key=lambda known: known.last_seen, default=None)

    def _applied_before(self, item: PreparedFact) -> Memory | None:
        """The invalidated memory that already holds this fact (same text, every one of its
        events a source): a re-run must not bring back what a later fact invalidated."""
        event_pks = {self.events[i].pk for i in item.fact.event_ids if i in self.events}
        if not event_pks:
            return None
        for memory in Memory.objects.filter(
            user_id=self.user_pk,
            app_name=self.app_name,
            status=MemoryStatus.INVALIDATED,
            text=item.text,
        ):
            if event_pks <= set(memory.sources.values_list("event_id", flat=True)):
                return memory
        return None

    def apply(self, item: PreparedFact) -> None:
        if not item.verdict.ok:
            self.quarantine(item)
            return
        applied = self._applied_before(item)
        if applied is not None:
            self.report.unchanged.append(applied)
            return
        if fact_is_turn_record(text=item.text, topic=item.fact.topic):
            same = self.records.get(_record_key(item.text))
            if same is None:
                self.create(item, reason="extracted from the conversation")
            else:
                self.merge(same, item)
            return
        kind = item.fact.kind
        negated = fact_negated(text=item.text)
        subject = fact_subject(text=item.text)
        similar = self._similar(item)
        for known, jaccard, cosine in similar:
            same_text = known.memory.text.casefold() == item.text.casefold()
            close = jaccard >= DUPLICATE_JACCARD or cosine >= DUPLICATE_COSINE
            other_value = bool(subject) and known.subject == subject and not same_text
            if known.negated == negated and (same_text or (close and not other_value)):
                self.merge(known, item)
                return
        related = [
            known
            for known, jaccard, cosine in similar
            if jaccard >= RELATED_JACCARD or cosine >= RELATED_COSINE
        ]
        contradicted = next((k for k in related if k.negated != negated), None)
        if contradicted is not None:
            if not self._wins(item, contradicted):
                self.report.unchanged.append(contradicted.memory)
                return
            self.invalidate(contradicted, item)
        target = None
        if subject:
            same_subject = [k for k in self.known.values() if k.subject == subject]
            target = max(same_subject, key=lambda k: k.last_seen, default=None)
        switch = fact_switch(text=item.text)
        if target is None and switch is not None:
            target = self._switched_from(*switch)
        if target is None and kind == FactKind.CORRECTION:
            target = next((k for k in related if k.negated == negated), None)
        if target is None:
            reason = "extracted from the conversation"
            if contradicted is not None:
                reason = f"replaces the invalidated memory {contradicted.memory.id}"
            self.create(item, reason=reason)
        elif not self._wins(item, target):
            self.report.unchanged.append(target.memory)
        else:
            why = "corrected by the user" if kind == FactKind.CORRECTION else "newer information"
            self.update(target, item, reason=why)


def _fact_prepare(*, fact: ExtractedFact, app_name: str) -> PreparedFact:
    text = fact_text_normalise(text=fact.text)
    verdict = memory_text_check(text=text)
    excerpt = secrets_mask(text=pii_redact(text=fact.excerpt, app_name=app_name))
    return PreparedFact(
        fact=fact, text=pii_redact(text=text, app_name=app_name), excerpt=excerpt, verdict=verdict
    )


def consolidation_prepare(*, app_name: str, facts: list[ExtractedFact]) -> PreparedFacts:
    """Everything consolidation needs of ``facts`` that reads no memory: third-person text,
    safety verdict, PII redaction per ``app_name``, and one embedder call for the safe texts.

    Kept apart from :func:`memories_consolidate` so a caller can run it before taking the
    user's lock: with Gemini embeddings the embedder call is a network round trip, which must
    not hold up the user's other jobs. Every vector consolidation may store is made here (an
    updated memory takes the fact's text, hence the fact's vector). Reads no database.
    """
    items = [_fact_prepare(fact=fact, app_name=app_name) for fact in facts]
    safe = [item for item in items if item.verdict.ok]
    embedder = embedder_get()
    vectors = embedder.encode([item.text for item in safe]) if safe else None
    if vectors is not None:
        for item, vector in zip(safe, vectors, strict=True):
            item.vector = np.asarray(vector, dtype=np.float32)
    return PreparedFacts(app_name=app_name, items=items, embedder_name=embedder.name)


def _events_resolve(
    *, session_id: str | None, facts: list[ExtractedFact]
) -> dict[str, EventRecord]:
    """The session's stored events the facts cite, by event id (ids from elsewhere are ignored)."""
    wanted = {event_id for fact in facts for event_id in fact.event_ids}
    if session_id is None or not wanted:
        return {}
    records = EventRecord.objects.filter(session_id=session_id, event_id__in=wanted)
    return {record.event_id: record for record in records}


def memories_consolidate(
    *,
    user_pk: int,
    app_name: str,
    session_id: str | None,
    facts: list[ExtractedFact],
    prepared: PreparedFacts | None = None,
    job_id: uuid.UUID | str | None = None,
    actor_user_pk: int | None = None,
) -> ConsolidationReport:
    """Merge ``facts`` (from ``session_id``) into the user's memories of ``app_name``.

    Decides CREATE, UPDATE, DELETE (invalidate) or nothing per fact as the module docstring
    specifies, and writes it all in one transaction with revisions (by ``job_id`` or
    ``actor_user_pk``) and source links. Applying the same facts again changes nothing. Does
    no job bookkeeping: the caller owns the job, the watermark and the user's lock.

    ``prepared`` is :func:`consolidation_prepare` of the same app and facts, made before the
    caller took the user's lock; with it this function only reads and writes the database and
    never calls the embedder. Without it the facts are prepared (and embedded) here first.
    Raises ValueError when ``prepared`` was made for other facts or another app.
    """
    if prepared is None:
        prepared = consolidation_prepare(app_name=app_name, facts=facts)
    elif prepared.app_name != app_name or [item.fact for item in prepared.items] != facts:
        raise ValueError("prepared was made for other facts or another app")
    events = _events_resolve(session_id=session_id, facts=facts)
    with transaction.atomic():
        run = _Run(
            user_pk=user_pk,
            app_name=app_name,
            events=events,
            embedder_name=prepared.embedder_name,
            job_id=job_id,
            actor_user_pk=actor_user_pk,
        )
        for item in prepared.items:
            run.apply(item)
    return run.report
