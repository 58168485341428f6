"""Search of long-term memory, answered by the database's indexes.

Search covers everything one user may see in an app: their user-scope memories, the app's
shared memories, and the session-scope memories of the current session only. The candidates
come from the database (:mod:`memory_app.selectors.memory_candidates`: the memories holding a
word of the query or one it relates to, through the full-text index of their words, with the
person's newest memories, the app's shared ones and, where PostgreSQL has pgvector, the
memories nearest the query's vector through an HNSW index), read with everything a result
shows in one statement; only they are ranked here, in a
:class:`~memory_app.ranking.MemoryIndex` made for the search and dropped after it (BM25 over
them, the collection being all the person's memories; cosine similarity with the vectors
stored with them; names, speakers, neighbours, priors of recency and importance). A
question about the person as a whole gets their memories of highest importance and recency.

No process builds or keeps anything of a person's memories, so any process answers anyone as
fast from its first search, and a change made by any process is seen by the next search: the
database answers each. The vectors were made once, in the background
(``memory_app.services.embeddings``): a search embeds its query and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from django.conf import settings
from django.utils import timezone

from memory_app.embedding import SearchEmbedder, embedder_get, vector_from_bytes
from memory_app.extraction.offline import fact_is_turn_record
from memory_app.models import MemoryScope, MemorySource
from memory_app.ranking import (
    Embedder,
    MemoryIndex,
    Origin,
    recency_prior,
    stem,
    tokenize,
    words_related,
)
from memory_app.selectors.memory_candidates import memory_candidates
from memory_app.selectors.turn_vectors import pgvector_enabled
from sessions_app.artifact_files import artifact_uri

# Chosen on the LoCoMo dev split (docs/memory-retrieval.md, "Second wave" and "Speakers"): a
# name the query mentions adds NAME_WEIGHT to a memory holding it (half when the name is a
# speaker's) and SPEAKER_WEIGHT to a memory that person said; a memory gains NEIGHBOUR_WEIGHT of
# the best score of the memories said just before and after it; the query is expanded.
NAME_WEIGHT = 0.2
SPEAKER_WEIGHT = 0.4
NEIGHBOUR_WEIGHT = 0.2
# The database's candidates (docs/benchmarks.md, "Memories searched by the database"): each word
# of the query brings its CANDIDATES_PER_WORD most recently changed matches, each word it
# relates to (up to CANDIDATE_WORDS words in all) its RELATED_PER_WORD; the person's
# NEWEST_CANDIDATES newest memories and the app's SHARED_CANDIDATES newest shared ones join
# them; a question about the person as a whole reads their BROAD_CANDIDATES newest and as many
# most important memories. The semantic score (with an embedder) ranks them all. LoCoMo's
# memories-alone recall on the dev split was the same from 20 to 100 a word (0.180, 0.179 with
# every memory a candidate); 100 a word made a search of 10,000 memories three times slower.
CANDIDATE_WORDS = 10
CANDIDATES_PER_WORD = 30
RELATED_PER_WORD = 10
NEWEST_CANDIDATES = 50
SHARED_CANDIDATES = 50
BROAD_CANDIDATES = 100
# Where PostgreSQL has pgvector, the person's memories nearest the query through the HNSW index
# of their stored vectors join the candidates, up to this many.
SEMANTIC_CANDIDATES = 20
# Words of a question about the user as a whole ("What do you know about me?"): a query with
# nothing else is answered with the user's most important memories, not by matching words.
_BROAD_WORDS = frozenset(
    re.findall(
        r"\w+",
        "know knows remember recall tell say anything everything something stuff things thing "
        "info information me myself user whole",
    )
)
_ABOUT_THE_USER = frozenset(re.findall(r"\w+", "me myself i my user know remember recall"))


def query_is_broad(query: str) -> bool:
    """Whether ``query`` asks about the user as a whole: it names the user (or asks what is
    known or remembered) and no topic."""
    words = set(tokenize(query, stemming=False, drop_stopwords=False))
    topical = set(tokenize(query, stemming=False)) - _BROAD_WORDS
    return bool(words & _ABOUT_THE_USER) and not topical


@dataclass(frozen=True)
class SourceRef:
    """One event a memory was derived from, as the session store names it."""

    session_id: str
    event_id: str


@dataclass(frozen=True)
class ScoredMemory:
    """A search result: the memory's fields, its blended score and where it came from."""

    id: str
    text: str
    score: float
    scope: str
    topic: str
    source_type: str
    confidence: float
    importance: float
    updated_at: datetime
    sources: list[SourceRef] = field(default_factory=list)
    image_uri: str = ""  # the ``artifact://`` address of the file the memory keeps, if any
    image_mime_type: str = ""


def query_candidate_words(query: str) -> tuple[list[tuple[str, ...]], int]:
    """The words a database is asked for, each as its forms (the word and its stem, which
    match the words starting with them): the query's own words, then those it relates to
    (``words_related``), at most ``CANDIDATE_WORDS``; and how many are the query's own."""
    own = list(dict.fromkeys(tokenize(query, stemming=False)))
    related = words_related(stem(word) for word in own)
    words = []
    for word in [*own, *related][:CANDIDATE_WORDS]:
        forms = dict.fromkeys([word, stem(word)])
        words.append(tuple(form for form in forms if form))
    return words, min(len(own), CANDIDATE_WORDS)


@dataclass(frozen=True)
class _Said:
    """Where a memory was said: its sources in chat order, and its earliest source event
    as (session key, sequence, speaker)."""

    sources: list[SourceRef]
    first: tuple[str, int, str]


def _sources_read(memory_ids: Iterable) -> dict[str, _Said]:
    """The source events of the memories (id -> where it was said), in one query: what a result
    names and what the ranking's neighbours and speakers come from. The speaker is the event's
    ``custom_metadata["speaker"]`` when it names one (an imported transcript does), else ""."""
    rows = (
        MemorySource.objects.filter(memory_id__in=list(memory_ids))
        .order_by("event__session_id", "event__sequence")
        .values_list(
            "memory_id",
            "event__session_id",
            "event__session__session_id",
            "event__event_id",
            "event__sequence",
            "event__custom_metadata",
        )
    )
    said: dict[str, _Said] = {}
    for memory_id, session_key, session_id, event_id, sequence, metadata in rows:
        speaker = metadata.get("speaker") if isinstance(metadata, dict) else None
        here = (session_key, sequence, speaker if isinstance(speaker, str) else "")
        found = said.get(str(memory_id))
        if found is None:
            found = said[str(memory_id)] = _Said(sources=[], first=here)
        elif sequence < found.first[1]:
            found = said[str(memory_id)] = _Said(sources=found.sources, first=here)
        found.sources.append(SourceRef(session_id, event_id))
    return said


def _origin(found: _Said | None, *, row: dict) -> Origin | None:
    """The index's view of where a memory was said, and whether it is the turn kept whole."""
    if found is None:
        return None
    session_key, sequence, speaker = found.first
    return Origin(
        conversation=session_key,
        position=sequence,
        speaker=speaker,
        whole_turn=fact_is_turn_record(text=row["text"], topic=row["topic"]),
    )


def _vectors(embedder: Embedder, rows: list[dict]) -> tuple[np.ndarray | None, list[bool]]:
    """The vectors the current embedder stored for ``rows`` and which rows have one; nothing is
    encoded: a memory not embedded yet (its task is on the way) ranks by its words alone."""
    stored = [
        vector_from_bytes(row["embedding"])
        if embedder.name != "none" and row.get("embedding_model") == embedder.name
        else None
        for row in rows
    ]
    present = [vector is not None for vector in stored]
    if not any(present):
        return None, present
    dimension = len(next(vector for vector in stored if vector is not None))
    matrix = np.zeros((len(rows), dimension), dtype=np.float32)
    for i, vector in enumerate(stored):
        if vector is not None and len(vector) == dimension:
            matrix[i] = vector
        else:
            present[i] = False
    return matrix, present


def _index_make(
    rows: list[dict], *, said: dict[str, _Said], collection: int, embedder: Embedder
) -> MemoryIndex:
    """The candidates in an index made for one search; priors: mean of recency and
    importance, recency as of the newest change among them (not the clock), so the same
    memories score the same in every search until one of them changes, as they did when a
    process kept an index until a write."""
    ids = [str(row["id"]) for row in rows]
    latest = max(row["updated_at"] for row in rows)
    recency = recency_prior(
        ages_seconds={
            memory_id: (latest - row["updated_at"]).total_seconds()
            for memory_id, row in zip(ids, rows, strict=True)
        },
        half_life_days=settings.MEMORY_RECENCY_HALF_LIFE_DAYS,
    )
    index = MemoryIndex(embedder=embedder, documents=collection)
    vectors, has_vector = _vectors(embedder, rows)
    index.add_many(
        doc_ids=ids,
        texts=[row["text"] for row in rows],
        vectors=vectors,
        vector_mask=has_vector,
        priors=[
            (recency[memory_id] + row["importance"]) / 2
            for memory_id, row in zip(ids, rows, strict=True)
        ],
        origins=[
            _origin(said.get(memory_id), row=row) for memory_id, row in zip(ids, rows, strict=True)
        ],
    )
    return index


def memory_search(
    *,
    app_name: str,
    user_pk: int,
    query: str,
    session_id: str | None = None,
    limit: int = 10,
    sources: bool = True,
    shared: bool = True,
) -> list[ScoredMemory]:
    """The ``limit`` memories most relevant to ``query`` that this user may see, best first.

    Candidates (module docstring): the user's active, unexpired memories of the app, the
    app's shared ones, and session-scope memories of ``session_id`` only, as they stand in the
    database now (a memory deleted a moment ago is never returned). A question about the user
    as a whole (:func:`query_is_broad`) gets the memories of highest importance and recency.
    Ranking: BM25 and (when the embedder has a model) cosine similarity blended half and
    half, plus ``MEMORY_PRIOR_WEIGHT`` times the mean of a recency prior and the memory's
    importance. ``sources=False`` leaves each result's sources empty, for callers (the
    preload) that need only the text and confidence and should not pay for the join, unless
    the ranking needs them. ``shared=False`` leaves out the app's shared memories: the agent's
    prompt has them as the app's guidance (:func:`app_guidance`), apart from what it recalls
    of the person.
    """
    if limit <= 0 or not query.strip():
        return []
    embedder = SearchEmbedder(embedder_get())
    broad = query_is_broad(query)
    words, own_words = ([], 0) if broad else query_candidate_words(query)
    query_vector = None
    if not broad and embedder.name != "none" and pgvector_enabled():
        encoded = embedder.encode([query])
        query_vector = None if encoded is None else encoded[0]
    found = memory_candidates(
        app_name=app_name,
        user_pk=user_pk,
        session_id=session_id,
        words=words,
        per_word=CANDIDATES_PER_WORD,
        own_words=own_words,
        related_per_word=RELATED_PER_WORD,
        newest=BROAD_CANDIDATES if broad else NEWEST_CANDIDATES,
        important=BROAD_CANDIDATES if broad else 0,
        shared=SHARED_CANDIDATES if shared else 0,
        now=timezone.now(),
        vectors=embedder.name != "none",
        nearest=SEMANTIC_CANDIDATES,
        query_vector=query_vector,
        embedder_name=embedder.name,
    )
    if not found.rows:
        return []
    rows = {str(row["id"]): row for row in found.rows}
    said = _sources_read(rows) if sources or not broad else {}
    shared_read = sum(row["scope"] == MemoryScope.APP for row in found.rows)
    index = _index_make(
        found.rows, said=said, collection=found.collection + shared_read, embedder=embedder
    )
    if broad:
        ranked = index.by_prior(limit=limit)
    else:
        ranked = index.search(
            query=query,
            query_vector=query_vector,
            limit=limit,
            prior_weight=settings.MEMORY_PRIOR_WEIGHT,
            expand=True,
            name_weight=NAME_WEIGHT,
            speaker_weight=SPEAKER_WEIGHT,
            neighbour_weight=NEIGHBOUR_WEIGHT,
        )
    return [
        _scored(
            rows[r.doc_id],
            score=r.score,
            sources=said[r.doc_id].sources if sources and r.doc_id in said else [],
        )
        for r in ranked
    ]


def _scored(memory: dict, *, score: float, sources: list[SourceRef]) -> ScoredMemory:
    return ScoredMemory(
        id=str(memory["id"]),
        text=memory["text"],
        score=score,
        scope=memory["scope"],
        topic=memory["topic"],
        source_type=memory["source_type"],
        confidence=memory["confidence"],
        importance=memory["importance"],
        updated_at=memory["updated_at"],
        sources=sources,
        image_uri=_image_uri(memory),
        image_mime_type=memory["image__mime_type"] or "",
    )


def _image_uri(memory: dict) -> str:
    """The address of the user's own copy of the file the memory keeps ("" for none)."""
    if not memory["image__filename"] or memory["user_id"] is None:
        return ""
    return artifact_uri(
        app_name=memory["app_name"],
        user_id=str(memory["user_id"]),
        session_id=None,
        filename=memory["image__filename"],
        version=memory["image__version"],
    )
