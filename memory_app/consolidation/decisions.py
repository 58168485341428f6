"""The decision for each fact (merge, invalidate, update, create or nothing) as the package
docstring specifies it, and :func:`memories_consolidate`, which applies the facts in order in
one transaction."""

from __future__ import annotations

import uuid

from django.db import transaction

from memory_app.consolidation.matching import KnownMemories, KnownMemory, record_key
from memory_app.consolidation.model import Operation
from memory_app.consolidation.preparation import (
    PreparedFact,
    PreparedFacts,
    consolidation_prepare,
)
from memory_app.consolidation.subjects import claims_apply, claims_conflict
from memory_app.consolidation.writes import ConsolidationReport, MemoryWrites
from memory_app.extraction import (
    ExtractedFact,
    FactKind,
    fact_is_turn_record,
    fact_negated,
    fact_subject,
    fact_switch,
)
from memory_app.extraction.profile import profile_subject
from memory_app.models import PERSON_SOURCES, TRUST, Memory, MemoryScope, MemoryStatus, SourceType
from memory_app.wording import said_on
from sessions_app.models import ArtifactRecord, EventRecord

DUPLICATE_JACCARD = 0.8
DUPLICATE_COSINE = 0.95
RELATED_JACCARD = 0.5
RELATED_COSINE = 0.8


class _Run:
    """One consolidation's decisions, over the user's active memories as its writes leave
    them."""

    def __init__(
        self, *, known: KnownMemories, writes: MemoryWrites, items: list[PreparedFact]
    ) -> None:
        self.known = known
        self.writes = writes
        self.report = writes.report
        self._stated: dict[str, set[tuple[str, str]]] = {}
        for each in items:
            for claim in each.claims:
                if not claim.negated and claim.slot:
                    for event_id in each.fact.event_ids:
                        self._stated.setdefault(event_id, set()).add((claim.who, claim.slot))

    def replaced_slots(self, item: PreparedFact) -> set[tuple[str, str]]:
        """The (who, subject) pairs an affirmative fact of the same message as ``item``
        states: a negation of theirs is left to that fact's update."""
        return {pair for event_id in item.fact.event_ids for pair in self._stated.get(event_id, ())}

    def wins(self, item: PreparedFact, known: KnownMemory) -> bool:
        """Between two statements of the person (explicit or implicit), the newer; otherwise
        trust first, then recency. A correction or retraction also wins a tie in time, and so
        does a fact said after the one that wrote the memory in this run."""
        fact_source = SourceType(item.fact.source_type)
        memory_source = SourceType(known.memory.source_type)
        both_said = fact_source in PERSON_SOURCES and memory_source in PERSON_SOURCES
        if not both_said and TRUST[fact_source] != TRUST[memory_source]:
            return TRUST[fact_source] > TRUST[memory_source]
        fact_time = self.writes.fact_time(item)
        if fact_time != known.last_seen:
            return fact_time > known.last_seen
        if known.memory.id in self.writes.written:
            return True  # an earlier fact of this message: what is said after it is newer
        return item.fact.kind in (FactKind.CORRECTION, FactKind.RETRACTION)

    def said_reason(self, item: PreparedFact) -> str:
        """Why a memory changed, for the person: "You said you moved to Porto last week on 26
        Nov." for what they said; "newer information: <fact>" for another source."""
        if SourceType(item.fact.source_type) not in PERSON_SOURCES:
            return f"newer information: {item.text}"
        return said_on(said=item.text, when=self.writes.fact_time(item))

    def _applied_before(self, item: PreparedFact) -> Memory | None:
        """The invalidated memory that already holds this fact (same text, every one of its
        events a source): a re-run must not bring back what a later fact invalidated."""
        events = self.writes.events
        event_pks = {events[i].pk for i in item.fact.event_ids if i in events}
        if not event_pks:
            return None
        for memory in Memory.objects.filter(
            user_id=self.writes.user_pk,
            app_name=self.writes.app_name,
            status=MemoryStatus.INVALIDATED,
            text=item.text,
        ):
            if event_pks <= set(memory.sources.values_list("event_id", flat=True)):
                return memory
        return None

    def apply(self, item: PreparedFact) -> None:
        if not item.verdict.ok:
            self.writes.quarantine(item)
            return
        applied = self._applied_before(item)
        if applied is not None:
            self.report.unchanged.append(applied)
            return
        if item.fact.keeps_file and self._apply_kept_file(item):
            return
        if item.fact.scope == MemoryScope.SESSION and self.writes.session_id is not None:
            self._apply_session(item)
            return
        if fact_is_turn_record(text=item.text, topic=item.fact.topic):
            same = self.known.records.get(record_key(item.text))
            if same is None:
                self.writes.create(item, reason="extracted from the conversation")
            else:
                self.writes.merge(same, item)
            return
        if item.plan is not None and self._apply_plan(item):
            return
        self._apply_rules(item)

    def _apply_kept_file(self, item: PreparedFact) -> bool:
        """A fact keeping a file is a memory of that file: merged into the active memory that
        keeps the same bytes, else a new memory, whatever other memories its words resemble
        (two logos remembered are two memories). False when its file is gone (the fact is then
        decided as any other)."""
        record = self.writes.fact_file(item)
        if record is None:
            return False
        holding = Memory.objects.filter(
            user_id=self.writes.user_pk,
            app_name=self.writes.app_name,
            status=MemoryStatus.ACTIVE,
            image__sha256=record.sha256,
        ).values_list("pk", flat=True)
        same = next((self.known.by_id[pk] for pk in holding if pk in self.known.by_id), None)
        if same is None:
            self.writes.create(item, reason="the user asked to remember an attached file")
        else:
            self.writes.merge(same, item)
        return True

    def _apply_session(self, item: PreparedFact) -> None:
        """A fact for this conversation only is kept for the session, once: it neither changes
        nor is changed by what is known about the person."""
        same = Memory.objects.filter(
            user_id=self.writes.user_pk,
            app_name=self.writes.app_name,
            session_id=self.writes.session_id,
            scope=MemoryScope.SESSION,
            status=MemoryStatus.ACTIVE,
            text=item.text,
        ).first()
        if same is None:
            self.writes.create(item, reason="said to hold for this conversation only")
        else:
            self.writes.session_merge(same, item)

    def _apply_plan(self, item: PreparedFact) -> bool:
        """Carry out the model's operation for the fact (:mod:`.model`); False when it cannot
        be (its memory is no longer active), so the rules decide instead. The fact's own text
        already held by an active memory is a merge whatever the model said, which keeps a
        re-run from storing it twice."""
        plan = item.plan
        same = next(
            (
                k
                for k in self.known.by_id.values()
                if k.memory.text.casefold() == item.text.casefold()
            ),
            None,
        )
        if same is not None and plan.operation in (Operation.CREATE, Operation.NOTHING):
            self.writes.merge(same, item)
            return True
        if plan.operation == Operation.CREATE:
            self.writes.create(item, reason=plan.reason)
            return True
        target = self.known.by_id.get(plan.memory_id) if plan.memory_id else None
        if plan.operation == Operation.NOTHING:
            if target is not None:
                self.writes.merge(target, item)
            return True
        if target is None:
            return False
        if not self.wins(item, target):
            self.report.unchanged.append(target.memory)
        elif plan.operation == Operation.UPDATE:
            self.writes.update(target, item, reason=plan.reason, text=plan.text, vector=plan.vector)
        else:
            self.writes.invalidate(target, item, reason=plan.reason)
        return True

    def _apply_rules(self, item: PreparedFact) -> None:
        """The similarity rules of the package docstring (step 3 on)."""
        kind = item.fact.kind
        negated = fact_negated(text=item.text)
        subject = fact_subject(text=item.text)
        similar = self.known.similar(item)
        for known, jaccard, cosine in similar:
            same_text = known.memory.text.casefold() == item.text.casefold()
            close = jaccard >= DUPLICATE_JACCARD or cosine >= DUPLICATE_COSINE
            other_value = (bool(subject) and known.subject == subject) or claims_conflict(
                item.claims, known.claims
            )
            if known.negated == negated and (same_text or (close and not other_value)):
                self.writes.merge(known, item)
                return
        if claims_apply(self, item, replaced_slots=self.replaced_slots(item)):
            return
        related = [
            known
            for known, jaccard, cosine in similar
            if jaccard >= RELATED_JACCARD or cosine >= RELATED_COSINE
        ]
        contradicted = next((k for k in related if k.negated != negated), None)
        if contradicted is not None:
            if not self.wins(item, contradicted):
                self.report.unchanged.append(contradicted.memory)
                return
            self.writes.invalidate(contradicted, item, reason=self.said_reason(item))
        target = None
        if subject:
            same_subject = [k for k in self.known.by_id.values() if k.subject == subject]
            target = max(same_subject, key=lambda k: k.last_seen, default=None)
        profile = profile_subject(item.structured)
        if target is None and profile:
            same_field = [k for k in self.known.by_id.values() if k.profile == profile]
            target = max(same_field, key=lambda k: k.last_seen, default=None)
        switch = fact_switch(text=item.text)
        if target is None and switch is not None:
            target = self.known.switched_from(*switch)
        if target is None and kind == FactKind.CORRECTION:
            target = next((k for k in related if k.negated == negated), None)
        if target is None:
            reason = "extracted from the conversation"
            if contradicted is not None:
                reason = f"replaces the invalidated memory {contradicted.memory.id}"
            self.writes.create(item, reason=reason)
        elif not self.wins(item, target):
            self.report.unchanged.append(target.memory)
        else:
            self.writes.update(target, item, reason=self.said_reason(item))


def _events_resolve(
    *, session_id: str | None, facts: list[ExtractedFact]
) -> tuple[dict[str, EventRecord], set[str]]:
    """The session's stored events the facts cite, by event id, and the ids of those a rewind
    took out of the history while the facts were extracted (ids from elsewhere are ignored)."""
    wanted = {event_id for fact in facts for event_id in fact.event_ids}
    if session_id is None or not wanted:
        return {}, set()
    records = EventRecord.objects.filter(session_id=session_id, event_id__in=wanted)
    live = {record.event_id: record for record in records if not record.rewound}
    return live, {record.event_id for record in records if record.rewound}


def _from_rewound_turns_only(
    fact: ExtractedFact, events: dict[str, EventRecord], rewound: set[str]
) -> bool:
    """A fact whose cited turns a rewind took out of the history, none left in it: the user
    edited or regenerated what it came from, so it is not remembered."""
    return not any(i in events for i in fact.event_ids) and any(
        i in rewound for i in fact.event_ids
    )


def _artifacts_resolve(*, user_pk: int, facts: list[ExtractedFact]) -> dict[str, ArtifactRecord]:
    """The user's stored files the facts were drawn from, by public id (others ignored)."""
    wanted = {each.artifact_id for fact in facts for each in fact.files}
    if not wanted:
        return {}
    records = ArtifactRecord.objects.filter(pk__in=wanted, user_id=user_pk)
    return {str(record.pk): record for record in records}


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

    Decides CREATE, UPDATE, DELETE (invalidate) or nothing per fact as the package docstring
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
    events, rewound = _events_resolve(session_id=session_id, facts=facts)
    artifacts = _artifacts_resolve(user_pk=user_pk, facts=facts)
    with transaction.atomic():
        known = KnownMemories(
            user_pk=user_pk, app_name=app_name, embedder_name=prepared.embedder_name
        )
        writes = MemoryWrites(
            user_pk=user_pk,
            app_name=app_name,
            events=events,
            embedder_name=prepared.embedder_name,
            job_id=job_id,
            actor_user_pk=actor_user_pk,
            known=known,
            artifacts=artifacts,
            session_id=session_id,
        )
        run = _Run(known=known, writes=writes, items=prepared.items)
        for item in prepared.items:
            if not _from_rewound_turns_only(item.fact, events, rewound):
                run.apply(item)
    return run.report
