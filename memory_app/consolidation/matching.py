"""The user's active memories during one consolidation, and which of them a fact resembles:
index terms, the BM25 (plus cosine) candidates with their Jaccard and cosine similarity, the
preference a switch replaces, and turn records by their words."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Max

from memory_app.consolidation.preparation import PreparedFact
from memory_app.embedding import vector_from_bytes
from memory_app.extraction import fact_is_turn_record, fact_negated, fact_subject
from memory_app.extraction.offline.claims import Claim, fact_claims
from memory_app.extraction.profile import profile_subject
from memory_app.models import Memory, MemoryScope, MemorySource, MemoryStatus
from memory_app.ranking import MemoryIndex, NoEmbedder, tokenize
from memory_app.topics import PREFERENCES

CANDIDATES = 10


@dataclass
class KnownMemory:
    """An active memory during the run, with what decisions need about it."""

    memory: Memory
    terms: frozenset[str]
    subject: str
    negated: bool
    last_seen: float
    event_pks: set[int]
    record: bool
    profile: str = ""  # the profile subject of its structured value (extraction.profile)
    claims: list[Claim] = field(default_factory=list)  # what it says of which subject


def _terms(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))


def record_key(text: str) -> str:
    """A turn record's words, case and punctuation aside: records with the same key are the
    same thing said on the same day by the same speaker."""
    return " ".join(tokenize(text, stemming=False, drop_stopwords=False))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


class KnownMemories:
    """The user's active user-scope memories of the app, indexed for similarity, as the run's
    writes leave them."""

    def __init__(self, *, user_pk: int, app_name: str, embedder_name: str) -> None:
        self.index = MemoryIndex(embedder=NoEmbedder())
        self.by_id: dict[uuid.UUID, KnownMemory] = {}
        self.records: dict[str, KnownMemory] = {}  # turn records by record_key
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
            self.remember(memory, last_seen=last_seen, events=links.get(memory.id, set()))
            self.index_add(memory, stored)

    def remember(self, memory: Memory, *, last_seen: float, events: set[int]) -> None:
        known = KnownMemory(
            memory=memory,
            terms=_terms(memory.text),
            subject=fact_subject(text=memory.text),
            negated=fact_negated(text=memory.text),
            last_seen=last_seen,
            event_pks=events,
            record=fact_is_turn_record(text=memory.text, topic=memory.topic),
            profile=profile_subject(memory.structured),
            claims=fact_claims(text=memory.text),
        )
        self.by_id[memory.id] = known
        if known.record:
            self.records.setdefault(record_key(memory.text), known)

    def index_add(self, memory: Memory, vector: np.ndarray | None) -> None:
        """Make ``memory`` a candidate for later facts' similarity (turn records never are)."""
        if not self.by_id[memory.id].record:
            self.index.add(doc_id=memory.id, text=memory.text, vector=vector)

    def forget(self, memory: Memory) -> None:
        """``memory`` is no longer active: neither known nor a candidate."""
        del self.by_id[memory.id]
        self.index.remove(doc_id=memory.id)

    def similar(self, item: PreparedFact) -> list[tuple[KnownMemory, float, float]]:
        """The ranked memories (turn records are not indexed) with their Jaccard and cosine
        similarity to the fact."""
        terms = _terms(item.text)
        ranked = self.index.search(query=item.text, limit=CANDIDATES, query_vector=item.vector)
        return [
            (self.by_id[hit.doc_id], _jaccard(terms, self.by_id[hit.doc_id].terms), hit.semantic)
            for hit in ranked
        ]

    def switched_from(self, old: str, new: str) -> KnownMemory | None:
        """The preference a switch replaces: the latest active, affirmative preference that
        names all of what the user switched from ("likes coffee in the morning" for "from
        coffee"), or, with no "from", something of what they switched to ("likes black tea"
        for "to green tea")."""
        wanted, switched_to = _terms(old), _terms(new) - {"user"}

        def replaced(known: KnownMemory) -> bool:
            if known.negated or known.memory.topic != PREFERENCES:
                return False
            return wanted <= known.terms if wanted else bool(switched_to & known.terms)

        candidates = [known for known in self.by_id.values() if replaced(known)]
        return max(candidates, key=lambda known: known.last_seen, default=None)
