"""Embeddings made once: memories and past user turns are embedded in the background after
they are stored, and their vectors kept with the embedder's name, so that a search embeds its
query alone.

A write asks for the work (:func:`memory_embeddings_request`, :func:`turn_embeddings_request`):
the task is enqueued after commit and takes ids. :func:`embeddings_compute` embeds what is
still without a vector of the current embedder, in batches of ``MEMORY_EMBEDDING_BATCH_SIZE``
texts, so a task run twice embeds nothing the second time. A change of embedder leaves every
stored vector unusable (never compared with the new ones): ``manage.py memory_embed`` makes
them again, through :func:`embeddings_missing_fill`, which the periodic sweep also runs for the
turns stored by other doors (ADK's API, imports).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q

from core.background import task_enqueue
from memory_app.embedding import embedder_get, vector_to_bytes
from memory_app.models import EmbeddingFailure, Memory, MemoryStatus, TurnVector
from memory_app.ranking import Embedder
from memory_app.selectors.memory_candidates import memory_vector_index_name
from memory_app.selectors.turn_vectors import (
    HNSW_MAX_DIMENSIONS,
    pgvector_enabled,
    turn_event_text,
    turn_vector_index_name,
    vector_literal,
)
from memory_app.services.users import memory_index_invalidate
from sessions_app.models import EventRecord

logger = logging.getLogger(__name__)

# Dimensions whose HNSW index this process has made sure of.
_indexed_dimensions: set[tuple] = set()


@dataclass(frozen=True)
class EmbeddingReport:
    """What a run embedded: memories and turns."""

    memories: int = 0
    turns: int = 0

    def __add__(self, other: EmbeddingReport) -> EmbeddingReport:
        return EmbeddingReport(self.memories + other.memories, self.turns + other.turns)


def embedder_active() -> Embedder | None:
    """The process's embedder, or None when it has no model (lexical search only)."""
    embedder = embedder_get()
    return None if embedder.name == "none" else embedder


def memory_embeddings_request(*, memory_ids: Sequence[str]) -> None:
    """Embed these memories in the background once the caller's transaction commits (nothing
    with no embedder)."""
    if not memory_ids or embedder_active() is None:
        return
    from memory_app.tasks import embeddings_compute

    task_enqueue(task=embeddings_compute, memory_ids=[str(i) for i in memory_ids])


def turn_embeddings_request(*, session_key: str) -> None:
    """Embed the chat's user turns still without a vector, in the background after commit (one
    task takes every turn a chat gained since the last: a batch, not a task a turn)."""
    if embedder_active() is None:
        return
    from memory_app.tasks import embeddings_compute

    task_enqueue(task=embeddings_compute, session_key=session_key)


def _memories_missing(embedder_name: str) -> Q:
    return Q(embedding__isnull=True) | ~Q(embedding_model=embedder_name)


def _turns_missing(embedder_name: str):
    """The stored user turns with words and no vector of ``embedder_name``, temporary chats
    left out (they write nothing to long-term memory)."""
    embedded = TurnVector.objects.filter(event_id=OuterRef("pk"), embedding_model=embedder_name)
    return EventRecord.objects.filter(
        author="user", content__isnull=False, session__temporary=False
    ).exclude(Exists(embedded))


def _batches(items: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _memories_embed(*, embedder: Embedder, memory_ids: Sequence[str]) -> int:
    """Embed the memories of ``memory_ids`` still without a vector of ``embedder``; a memory
    whose text changed meanwhile keeps the vector of its new text, made by the write that
    changed it or the task it asked for. Returns how many were stored."""
    rows = list(
        Memory.objects.filter(pk__in=memory_ids)
        .filter(_memories_missing(embedder.name))
        .values_list("pk", "text", "app_name", "user_id")
    )
    stored = 0
    for batch in _batches(rows, settings.MEMORY_EMBEDDING_BATCH_SIZE):
        vectors = embedder.encode([text for _pk, text, _app, _user in batch])
        if vectors is None:
            return stored
        owners = set()
        with transaction.atomic():
            for (pk, text, app_name, user_pk), vector in zip(batch, vectors, strict=True):
                stored += (
                    Memory.objects.filter(pk=pk, text=text)
                    .filter(_memories_missing(embedder.name))
                    .update(embedding=vector_to_bytes(vector), embedding_model=embedder.name)
                )
                owners.add((app_name, user_pk))
            for app_name, user_pk in sorted(owners, key=lambda o: (o[0], o[1] or 0)):
                memory_index_invalidate(app_name=app_name, user_pk=user_pk)
        memory_vector_index_ensure(dimension=vectors.shape[1])  # after its transaction
    return stored


def memory_vector_index_ensure(*, dimension: int) -> bool:
    """Make sure the HNSW index over memories' vectors of ``dimension`` exists (pgvector only;
    over the stored bytes read as a vector, ``memory_app_vector`` of migration 0018, for the
    active memories). Returns whether there is one. As :func:`turn_vector_index_ensure`:
    outside any transaction only, the nearest memories found exactly until then."""
    if not pgvector_enabled() or dimension > HNSW_MAX_DIMENSIONS:
        return False
    if connection.in_atomic_block:
        return False
    key = ("memory", connection.settings_dict["NAME"], dimension)
    if key in _indexed_dimensions:
        return True
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {memory_vector_index_name(dimension)}"
            f" ON {Memory._meta.db_table}"
            f" USING hnsw ((memory_app_vector(embedding)::halfvec({dimension}))"
            " halfvec_cosine_ops)"
            f" WHERE status = '{MemoryStatus.ACTIVE}' AND octet_length(embedding) = {4 * dimension}"
        )
    _indexed_dimensions.add(key)
    return True


def turn_vector_index_ensure(*, dimension: int) -> bool:
    """Make sure the HNSW index over past turns' vectors of ``dimension`` exists (pgvector
    only; an index covers one dimension, as vectors of one embedder have). Returns whether
    there is one. Made outside any transaction only (a task's, or the command's): PostgreSQL
    cannot index a table that the transaction still holds deferred checks for; until then
    the nearest turns are found exactly."""
    if not pgvector_enabled() or dimension > HNSW_MAX_DIMENSIONS:
        return False
    if connection.in_atomic_block:
        return False
    key = (connection.settings_dict["NAME"], dimension)
    if key in _indexed_dimensions:
        return True
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {turn_vector_index_name(dimension)}"
            f" ON {TurnVector._meta.db_table}"
            f" USING hnsw ((vector::halfvec({dimension})) halfvec_cosine_ops)"
            f" WHERE vector_dims(vector) = {int(dimension)}"
        )
    _indexed_dimensions.add(key)
    return True


def _turn_vectors_store(*, embedder: Embedder, rows: Sequence[tuple[int, str]]) -> int:
    """Embed ``rows`` (event pk, text) and store their vectors, replacing those of another
    embedder; on pgvector in the vector column too. Events deleted meanwhile (their chat) are
    skipped: the ones kept are locked until the vectors are in. Returns how many were stored."""
    if not rows:
        return 0
    vectors = embedder.encode([text for _pk, text in rows])
    if vectors is None:
        return 0
    with transaction.atomic():
        present = set(
            EventRecord.objects.select_for_update()
            .filter(pk__in=[pk for pk, _text in rows])
            .values_list("pk", flat=True)
        )
        kept = [
            (pk, vector) for (pk, _text), vector in zip(rows, vectors, strict=True) if pk in present
        ]
        TurnVector.objects.bulk_create(
            [
                TurnVector(
                    event_id=pk, embedding=vector_to_bytes(vector), embedding_model=embedder.name
                )
                for pk, vector in kept
            ],
            update_conflicts=True,
            unique_fields=["event"],
            update_fields=["embedding", "embedding_model"],
        )
        if kept and pgvector_enabled():
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {TurnVector._meta.db_table} AS turn SET vector = given.vector::vector"
                    " FROM unnest(%s::bigint[], %s::text[]) AS given(event_id, vector)"
                    " WHERE turn.event_id = given.event_id",
                    [[pk for pk, _v in kept], [vector_literal(vector) for _pk, vector in kept]],
                )
    if kept:
        turn_vector_index_ensure(dimension=vectors.shape[1])
    return len(kept)


def _turn_rows(events: Sequence[tuple]) -> list[tuple[int, str]]:
    """(event pk, text to embed) of the events (pk, content, metadata, timestamp) that hold
    words."""
    rows = []
    for pk, content, metadata, timestamp in events:
        text = turn_event_text(content=content, metadata=metadata, timestamp=timestamp)
        if text:
            rows.append((pk, text))
    return rows


def _turns_embed(*, embedder: Embedder, session_key: str) -> int:
    events = _turns_missing(embedder.name).filter(session_id=session_key).order_by("sequence")
    rows = _turn_rows(events.values_list("pk", "content", "custom_metadata", "timestamp"))
    return sum(
        _turn_vectors_store(embedder=embedder, rows=batch)
        for batch in _batches(rows, settings.MEMORY_EMBEDDING_BATCH_SIZE)
    )


def embeddings_compute(
    *, memory_ids: Sequence[str] = (), session_key: str | None = None
) -> EmbeddingReport:
    """Embed the memories of ``memory_ids`` and the user turns of the chat ``session_key`` that
    have no vector of the current embedder yet, and store the vectors under its name.

    Idempotent: what already has a vector is not embedded again, so a task run twice (a
    redelivery, a retry after a partial batch) costs no second embedding. The embedder's
    errors propagate, for the task to retry the transient ones.
    """
    embedder = embedder_active()
    if embedder is None:
        return EmbeddingReport()
    memories = _memories_embed(embedder=embedder, memory_ids=memory_ids) if memory_ids else 0
    turns = _turns_embed(embedder=embedder, session_key=session_key) if session_key else 0
    return EmbeddingReport(memories=memories, turns=turns)


def embedding_failure_record(
    *, memory_ids: Sequence[str], session_key: str | None, attempts: int, error: BaseException
) -> EmbeddingFailure:
    """Keep, for staff to see, that an embedding task gave up."""
    embedder = embedder_get()
    return EmbeddingFailure.objects.create(
        embedder=embedder.name,
        memory_ids=[str(i) for i in memory_ids],
        session_key=session_key or "",
        attempts=attempts,
        error=f"{type(error).__name__}: {error}"[:4000],
    )


def embeddings_missing_count() -> EmbeddingReport:
    """How many memories and user turns have no vector of the current embedder."""
    embedder = embedder_active()
    if embedder is None:
        return EmbeddingReport()
    return EmbeddingReport(
        memories=Memory.objects.filter(_memories_missing(embedder.name)).count(),
        turns=_turns_missing(embedder.name).count(),
    )


def embeddings_missing_fill(
    *, progress: Callable[[EmbeddingReport], None] | None = None
) -> EmbeddingReport:
    """Embed every memory and user turn without a vector of the current embedder, batch by
    batch, calling ``progress`` with the running counts of those gone through after each batch:
    after a change of embedder (``manage.py memory_embed``), and for turns stored by doors that
    ask for no task (the periodic sweep). Returns the counts of vectors stored."""
    embedder = embedder_active()
    if embedder is None:
        return EmbeddingReport()
    size = settings.MEMORY_EMBEDDING_BATCH_SIZE
    seen = stored = EmbeddingReport()
    after = None
    while True:
        missing = Memory.objects.filter(_memories_missing(embedder.name)).order_by("pk")
        if after is not None:
            missing = missing.filter(pk__gt=after)
        ids = list(missing.values_list("pk", flat=True)[:size])
        if not ids:
            break
        after = ids[-1]
        stored += EmbeddingReport(memories=_memories_embed(embedder=embedder, memory_ids=ids))
        seen += EmbeddingReport(memories=len(ids))
        if progress:
            progress(seen)
    after_event = 0
    while True:
        events = _turns_missing(embedder.name).filter(pk__gt=after_event).order_by("pk")[:size]
        batch = list(events.values_list("pk", "content", "custom_metadata", "timestamp"))
        if not batch:
            break
        after_event = batch[-1][0]
        rows = _turn_rows(batch)
        if rows:
            stored += EmbeddingReport(turns=_turn_vectors_store(embedder=embedder, rows=rows))
        seen += EmbeddingReport(turns=len(batch))
        if progress:
            progress(seen)
    return stored
