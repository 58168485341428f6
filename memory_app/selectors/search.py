"""Search of long-term memory, and the per-process index cache behind it.

Search is exact over everything one user may see in an app: their user-scope memories, the
app's shared memories, and the session-scope memories of the current session only. Each
process keeps a :class:`~memory_app.ranking.MemoryIndex` per (app, user), checked against
versions in the database that every write replaces in its own transaction, so a change made
by a worker in another process is seen on the next search, cache or no cache. The best
candidates are then read again from the database, so a memory deleted a moment ago is never
returned, even from a stale index.

An index is built from the database alone: the vectors are those stored with the memories
(made once, in the background, by ``memory_app.services.embeddings``), so a cold search embeds
its query and nothing else. The cache is bounded in bytes (``MEMORY_INDEX_CACHE_BYTES``), not
in people.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q, Subquery
from django.utils import timezone

from memory_app.embedding import SearchEmbedder, embedder_get, vector_from_bytes
from memory_app.extraction.offline import fact_is_turn_record
from memory_app.models import (
    AppIndexVersion,
    Memory,
    MemoryScope,
    MemorySource,
    MemoryStatus,
)
from memory_app.ranking import Embedder, MemoryIndex, Origin, recency_prior, tokenize
from sessions_app.artifact_files import artifact_uri

# Chosen on the LoCoMo dev split (docs/memory-retrieval.md, "Second wave" and "Speakers"): a
# name the query mentions adds NAME_WEIGHT to a memory holding it (half when the name is a
# speaker's) and SPEAKER_WEIGHT to a memory that person said; a memory gains NEIGHBOUR_WEIGHT of
# the best score of the memories said just before and after it; the query is expanded.
NAME_WEIGHT = 0.2
SPEAKER_WEIGHT = 0.4
NEIGHBOUR_WEIGHT = 0.2
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


@dataclass
class _CachedIndex:
    """One (app, user)'s index with what search filters on, valid for one pair of versions."""

    versions: tuple
    index: MemoryIndex  # priors: mean of recency and importance
    nbytes: int  # what the cache counts it as (see MemoryIndex.nbytes)
    session_of: dict[str, str]  # session-scope memory id -> its session
    shared: set[str]  # ids of the app's shared (app-scope) memories
    expiry: dict[str, datetime]  # id -> expiry, for memories that have one
    lock: threading.Lock = field(default_factory=threading.Lock)


# By (app, user, embedder); the user None for the app's shared memories alone.
_indexes: OrderedDict[tuple[str, int | None, str], _CachedIndex] = OrderedDict()
_indexes_lock = threading.Lock()
# What an entry holds per memory beside its index: the ids of its session, shared and expiry
# maps (an upper bound).
_ENTRY_ID_BYTES = 200


def _visible(*, app_name: str, user_pk: int | None) -> Q:
    """What a user may see in the app; for None, the app's shared memories alone."""
    shared = Q(scope=MemoryScope.APP)
    if user_pk is not None:
        shared |= Q(user_id=user_pk, scope__in=[MemoryScope.USER, MemoryScope.SESSION])
    return Q(app_name=app_name, status=MemoryStatus.ACTIVE) & shared


def _visible_now(memory: dict, *, app_name: str, user_pk: int, session_id: str | None, now) -> bool:
    """``_visible`` and unexpired, and a session memory only within its own session."""
    if memory["app_name"] != app_name or memory["status"] != MemoryStatus.ACTIVE:
        return False
    if memory["expires_at"] is not None and memory["expires_at"] <= now:
        return False
    if memory["scope"] == MemoryScope.APP:
        return True
    if memory["user_id"] != user_pk:
        return False
    return memory["scope"] == MemoryScope.USER or memory["session_id"] == session_id


def _vectors(embedder: Embedder, rows: list[dict]) -> tuple[np.ndarray | None, list[bool]]:
    """The vectors the current embedder stored for ``rows`` and which rows have one; nothing is
    encoded: a memory not embedded yet (its task is on the way) ranks by its words alone."""
    stored = [
        vector_from_bytes(row["embedding"])
        if embedder.name != "none" and row["embedding_model"] == embedder.name
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


def _index_build(
    *, app_name: str, user_pk: int | None, embedder: Embedder, versions: tuple
) -> _CachedIndex:
    """Index everything the user may see in the app (for None, the app's shared memories);
    priors: mean of recency and importance (recency as of now: ages grow alike for all, so
    the order they give holds until rebuilt)."""
    rows = list(
        Memory.objects.filter(_visible(app_name=app_name, user_pk=user_pk)).values(
            "id",
            "text",
            "embedding",
            "embedding_model",
            "importance",
            "updated_at",
            "expires_at",
            "scope",
            "session_id",
            "topic",
        )
    )
    ids = [str(row["id"]) for row in rows]
    origins = _origins(visible=_visible(app_name=app_name, user_pk=user_pk))
    now = timezone.now()
    recency = recency_prior(
        ages_seconds={
            memory_id: (now - row["updated_at"]).total_seconds()
            for memory_id, row in zip(ids, rows, strict=True)
        },
        half_life_days=settings.MEMORY_RECENCY_HALF_LIFE_DAYS,
    )
    index = MemoryIndex(embedder=embedder)
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
            _origin(origins.get(memory_id), row=row)
            for memory_id, row in zip(ids, rows, strict=True)
        ],
    )
    entry = _CachedIndex(
        versions=versions, index=index, nbytes=0, session_of={}, shared=set(), expiry={}
    )
    for memory_id, row in zip(ids, rows, strict=True):
        if row["scope"] == MemoryScope.SESSION:
            entry.session_of[memory_id] = row["session_id"]
        elif row["scope"] == MemoryScope.APP:
            entry.shared.add(memory_id)
        if row["expires_at"]:
            entry.expiry[memory_id] = row["expires_at"]
    entry.nbytes = index.nbytes() + _ENTRY_ID_BYTES * len(ids)
    return entry


def _origins(*, visible: Q) -> dict[str, tuple[str, int, str]]:
    """Where each memory ``visible`` selects was first said: (session id, sequence, speaker) of
    its earliest source event, the speaker being the event's ``custom_metadata["speaker"]``
    when it names one (an imported transcript does), else ""."""
    origins: dict[str, tuple[str, int, str]] = {}
    rows = (
        MemorySource.objects.filter(memory_id__in=Memory.objects.filter(visible).values("id"))
        .order_by("event__sequence")
        .values_list("memory_id", "event__session_id", "event__sequence", "event__custom_metadata")
    )
    for memory_id, session_id, sequence, metadata in rows.iterator(chunk_size=2000):
        if str(memory_id) not in origins:
            speaker = (metadata or {}).get("speaker") if isinstance(metadata, dict) else None
            speaker = speaker if isinstance(speaker, str) else ""
            origins[str(memory_id)] = (session_id, sequence, speaker)
    return origins


def _origin(found: tuple[str, int, str] | None, *, row: dict) -> Origin | None:
    """The index's view of where a memory was said, and whether it is the turn kept whole."""
    if found is None:
        return None
    session_id, sequence, speaker = found
    return Origin(
        conversation=session_id,
        position=sequence,
        speaker=speaker,
        whole_turn=fact_is_turn_record(text=row["text"], topic=row["topic"]),
    )


def _versions(*, app_name: str, user_pk: int) -> tuple[int | None, int]:
    """The (user, app) index versions, read in one query; the user's is None while they have
    no settings row (the app's is 0 until its first shared memory is written).

    The database, not the cache, holds them: a write commits its version with it, so an
    index is never taken for current after a write, even one made while Redis was away,
    and the read costs the round trip a cache read would.
    """
    row = (
        get_user_model()
        .objects.filter(pk=user_pk)
        .values_list(
            "memory_settings__index_version",
            Subquery(AppIndexVersion.objects.filter(app_name=app_name).values("version")[:1]),
        )
        .first()
    )
    user_version, app_version = row if row is not None else (None, None)
    return (user_version, app_version or 0)


def _index_get(
    *, app_name: str, user_pk: int, versions: tuple[int | None, int] | None = None
) -> _CachedIndex:
    """The (app, user) index of this process, rebuilt when a write replaced a version.

    ``versions`` as :func:`_versions` reads them, when the caller already has them. A user
    with no settings row, or whose version is still 0, has no memories of their own: every
    write of a memory replaces its user's version by one that is not 0, creating the row
    (``memory_index_invalidate``, also run for any saved memory). Such users, a new user's
    first turns, all share the one index of the app's shared memories, kept under the app's
    version: a turn does not index them again.
    """
    embedder = SearchEmbedder(embedder_get())
    if versions is None:
        versions = _versions(app_name=app_name, user_pk=user_pk)
    if not versions[0]:
        versions = (None, versions[1])
    owner = user_pk if versions[0] is not None else None
    key = (app_name, owner, embedder.name)
    with _indexes_lock:
        entry = _indexes.get(key)
        if entry is not None and entry.versions == versions:
            _indexes.move_to_end(key)
            return entry
    entry = _index_build(app_name=app_name, user_pk=owner, embedder=embedder, versions=versions)
    _cache_keep(key, entry)
    return entry


def _cache_keep(key: tuple[str, int | None, str], entry: _CachedIndex) -> None:
    """Keep ``entry`` in this process's cache, dropping the least recently used indexes while
    the cache holds more than ``MEMORY_INDEX_CACHE_BYTES`` (an index larger than that alone is
    used once and not kept): the process's memory is bounded whoever it serves."""
    with _indexes_lock:
        _indexes.pop(key, None)
        if entry.nbytes <= settings.MEMORY_INDEX_CACHE_BYTES:
            _indexes[key] = entry
        held = sum(cached.nbytes for cached in _indexes.values())
        while held > settings.MEMORY_INDEX_CACHE_BYTES:
            _key, evicted = _indexes.popitem(last=False)
            held -= evicted.nbytes


def index_cache_bytes() -> int:
    """The bytes this process's cache of memory indexes holds, as counted against
    ``MEMORY_INDEX_CACHE_BYTES``."""
    with _indexes_lock:
        return sum(cached.nbytes for cached in _indexes.values())


def index_cache_drop(*, user_pk: int) -> None:
    """Forget this process's search indexes of the user, with the texts they hold.

    Other processes' copies are already unusable once the version changed (see
    ``memory_index_invalidate``) and leave their caches as newer indexes push them out.
    """
    with _indexes_lock:
        for key in [key for key in _indexes if key[1] == user_pk]:
            del _indexes[key]


_SCORED_FIELDS = (
    "id",
    "text",
    "scope",
    "topic",
    "source_type",
    "confidence",
    "importance",
    "updated_at",
    "app_name",
    "status",
    "expires_at",
    "user_id",
    "session_id",
    "image__filename",
    "image__version",
    "image__mime_type",
)


def memory_search(
    *,
    app_name: str,
    user_pk: int,
    query: str,
    session_id: str | None = None,
    limit: int = 10,
    sources: bool = True,
    index_versions: tuple[int | None, int] | None = None,
    shared: bool = True,
) -> list[ScoredMemory]:
    """The ``limit`` memories most relevant to ``query`` that this user may see, best first.

    Candidates: the user's active, unexpired memories of the app, the app's shared ones, and
    session-scope memories of ``session_id`` only. A question about the user as a whole
    (:func:`query_is_broad`) gets the memories of highest importance and recency. Ranking:
    BM25 and (when the embedder has a model) cosine similarity blended half and half, plus
    ``MEMORY_PRIOR_WEIGHT`` times the mean of a recency prior and the memory's importance.
    Exact: every candidate is scored.
    ``sources=False`` leaves each result's sources empty, for callers (the preload) that
    need only the text and confidence and should not pay for the join. ``index_versions``:
    as :func:`~memory_app.selectors.generation.session_memory_access` read them a moment ago,
    else read here. ``shared=False`` leaves out the app's shared memories: the agent's prompt
    has them as the app's guidance (:func:`app_guidance`), apart from what it recalls of the
    person.
    """
    if limit <= 0 or not query.strip():
        return []
    entry = _index_get(app_name=app_name, user_pk=user_pk, versions=index_versions)
    now = timezone.now()
    excluded = {i for i, owner in entry.session_of.items() if owner != session_id}
    excluded.update(i for i, expires_at in entry.expiry.items() if expires_at <= now)
    if not shared:
        excluded.update(entry.shared)
    with entry.lock:
        if query_is_broad(query):
            ranked = entry.index.by_prior(limit=limit + len(excluded))
        else:
            ranked = entry.index.search(
                query=query,
                limit=limit + len(excluded),
                prior_weight=settings.MEMORY_PRIOR_WEIGHT,
                expand=True,
                name_weight=NAME_WEIGHT,
                speaker_weight=SPEAKER_WEIGHT,
                neighbour_weight=NEIGHBOUR_WEIGHT,
            )
    scores = {r.doc_id: r.score for r in ranked if r.doc_id not in excluded}
    chosen = list(scores)[:limit]
    return memories_scored(
        app_name=app_name,
        user_pk=user_pk,
        session_id=session_id,
        scores={i: scores[i] for i in chosen},
        sources=sources,
    )


def memories_scored(
    *,
    app_name: str,
    user_pk: int,
    session_id: str | None,
    scores: dict[str, float],
    sources: bool = True,
) -> list[ScoredMemory]:
    """The memories of ``scores`` that are still visible now, read fresh, in the given order.

    Re-checking status, expiry and scope against the database is what guarantees that a
    memory deleted or invalidated a moment ago never comes back from a cached index. One
    query, plain rows rather than model instances: this is on every search's path.
    """
    if not scores:
        return []
    now = timezone.now()
    # One query, memories with their sources (a row per source, oldest first), fetched by
    # primary key alone and checked here: combined with the visibility filter in SQL,
    # SQLite's planner scanned every memory of the app through its app index.
    if sources:
        rows = (
            Memory.objects.filter(pk__in=list(scores))
            .order_by("sources__event__session_id", "sources__event__sequence")
            .values_list(
                *_SCORED_FIELDS,
                "sources__event__session__session_id",
                "sources__event__event_id",
            )
        )
    else:
        rows = (
            (*row, None, None)
            for row in Memory.objects.filter(pk__in=list(scores)).values_list(*_SCORED_FIELDS)
        )
    found: dict[str, tuple[dict, list[SourceRef]]] = {}
    hidden: set[str] = set()
    for *values, source_session_id, source_event_id in rows:
        memory_id = str(values[0])
        if memory_id in hidden:
            continue
        if memory_id not in found:
            memory = dict(zip(_SCORED_FIELDS, values, strict=True))
            if not _visible_now(
                memory, app_name=app_name, user_pk=user_pk, session_id=session_id, now=now
            ):
                hidden.add(memory_id)
                continue
            found[memory_id] = (memory, [])
        if source_event_id is not None:
            found[memory_id][1].append(SourceRef(source_session_id, source_event_id))
    return [
        _scored(found[memory_id][0], score=score, sources=found[memory_id][1])
        for memory_id, score in scores.items()
        if memory_id in found
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
