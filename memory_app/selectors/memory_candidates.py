"""The memories a search ranks, read through the database's indexes (memory_app migration 0017).

A person's memories holding a word of the query are found through the full-text index of their
words (PostgreSQL: the GIN index of the person's words, ``memory_owner_words``; SQLite: the FTS5
table), each word its ``per_word`` most recently changed matches (``related_per_word`` for a
word the query relates to, not its own); beside them the person's
newest memories (through ``memory_owner_recent``), which the semantic score and the prior of
recency rank with the rest, their most important ones for a question about them as a whole
(``memory_owner_important``), and the app's shared memories, a handful. What a search reads grows
with its words and those bounds, never with how many memories a person has: one statement,
which also counts the memories the candidates were drawn from (the collection BM25's IDF is
computed over, counted up to ``COLLECTION_COUNTED``).

Only what the person may see now is read: active, unexpired, theirs (a session's memories only
in that session) or, with ``shared``, the app's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.db import connection, transaction
from django.db.models.expressions import RawSQL

from memory_app.models import Memory, MemoryScope, MemoryStatus
from memory_app.selectors.turn_vectors import (
    HNSW_MAX_DIMENSIONS,
    HNSW_MAX_SCAN_TUPLES,
    pgvector_enabled,
    vector_literal,
)
from sessions_app.selectors.search import PG_OWNED_QUERY, word_match

MEMORIES = Memory._meta.db_table
# What every part of the statement keeps: the person's active memories of the app, unexpired,
# a session's own only in that session. Its parameters: user, app, session, now.
_OWNED = (
    f"memory.user_id = %s AND memory.app_name = %s AND memory.status = '{MemoryStatus.ACTIVE}' "
    f"AND (memory.scope <> '{MemoryScope.SESSION}' OR memory.session_id = %s) "
    "AND (memory.expires_at IS NULL OR memory.expires_at > %s)"
)
# A word's matches, newest first (parameters: the word's match, then _OWNED's, then the bound).
# PostgreSQL reads them through the owner's words index (its partial condition, status, is in
# _OWNED); ``OFFSET 0`` keeps the planner from walking the person's memories newest first
# instead; each entry is checked again against the memory's own words, whose positions the
# index lacks.
_PG_WORD = (
    "SELECT matched.id FROM (SELECT memory.id, memory.updated_at FROM memory_app_memory AS memory "
    "WHERE sessions_app_owner_words(memory.user_id, memory.search_vector) @@ "
    + PG_OWNED_QUERY.format(query="%s", owner="%s")
    + " AND memory.search_vector @@ to_tsquery('simple', %s) AND "
    + _OWNED
    + " OFFSET 0) AS matched ORDER BY matched.updated_at DESC LIMIT %s"
)
# SQLite keeps the order of a CROSS JOIN: from the word's matches to their memories, not along
# the person's memories newest first matching each against the word.
_SQLITE_WORD = (
    "SELECT memory.id FROM memory_app_memory_search AS found "
    "CROSS JOIN memory_app_memory_search_row AS row "
    "CROSS JOIN memory_app_memory AS memory "
    "WHERE row.id = found.rowid AND memory.id = row.memory_id "
    f"AND memory_app_memory_search MATCH %s AND {_OWNED} "
    "ORDER BY memory.updated_at DESC LIMIT %s"
)
_NEWEST = (
    f"SELECT memory.id FROM {MEMORIES} AS memory WHERE {_OWNED} "
    "ORDER BY memory.updated_at DESC LIMIT %s"
)
_IMPORTANT = (
    f"SELECT memory.id FROM {MEMORIES} AS memory WHERE {_OWNED} "
    "ORDER BY memory.importance DESC LIMIT %s"
)
# The person's memories nearest a query's vector, through the HNSW index of the vectors'
# dimension (``memory_vector_index_ensure``; parameters: _OWNED's, the embedder's name, the
# query's vector and the bound). The expression and its condition are the index's own.
_PG_NEAREST = (
    f"SELECT memory.id FROM {MEMORIES} AS memory WHERE {_OWNED} "
    "AND memory.embedding_model = %s AND octet_length(memory.embedding) = {octets} "
    "ORDER BY memory_app_vector(memory.embedding)::halfvec({dimension}) "
    "<=> %s::halfvec({dimension}) LIMIT %s"
)
# The app's shared memories, unexpired (parameters: app, now): the newest, and the newest
# holding any of the query's words (parameters: the words' match, then these).
_SHARED_KEPT = (
    f"memory.app_name = %s AND memory.scope = '{MemoryScope.APP}' "
    f"AND memory.status = '{MemoryStatus.ACTIVE}' "
    "AND (memory.expires_at IS NULL OR memory.expires_at > %s)"
)
_SHARED = (
    f"SELECT memory.id FROM {MEMORIES} AS memory WHERE {_SHARED_KEPT} "
    "ORDER BY memory.updated_at DESC LIMIT %s"
)
_PG_SHARED_WORDS = (
    f"SELECT memory.id FROM {MEMORIES} AS memory "
    f"WHERE memory.search_vector @@ to_tsquery('simple', %s) AND {_SHARED_KEPT} "
    "ORDER BY memory.updated_at DESC LIMIT %s"
)
_SQLITE_SHARED_WORDS = (
    "SELECT memory.id FROM memory_app_memory_search AS found "
    "CROSS JOIN memory_app_memory_search_row AS row "
    "CROSS JOIN memory_app_memory AS memory "
    "WHERE row.id = found.rowid AND memory.id = row.memory_id "
    f"AND memory_app_memory_search MATCH %s AND {_SHARED_KEPT} "
    "ORDER BY memory.updated_at DESC LIMIT %s"
)
# How many of the person's memories are counted as the collection: past that many, BM25's IDF
# of a word that a few hundred hold moves by a few hundredths, and the count would be the one
# read of a search that grows with the memories.
COLLECTION_COUNTED = 10_000
_COLLECTION = (
    f"SELECT count(*) FROM (SELECT 1 FROM {MEMORIES} AS memory WHERE memory.user_id = %s "
    f"AND memory.app_name = %s AND memory.status = '{MemoryStatus.ACTIVE}' LIMIT %s) AS counted"
)
# What a search ranks by and answers with (the embedding only with an embedder).
FIELDS = (
    "id",
    "app_name",
    "user_id",
    "text",
    "scope",
    "topic",
    "source_type",
    "confidence",
    "importance",
    "updated_at",
    "image__filename",
    "image__version",
    "image__mime_type",
)
VECTOR_FIELDS = ("embedding", "embedding_model")


@dataclass(frozen=True)
class MemoryCandidates:
    """The rows a search ranks (``FIELDS`` of each memory, as dicts, and ``VECTOR_FIELDS`` when
    asked for) and how many memories of the person they were drawn from."""

    rows: list[dict]
    collection: int


def memory_candidates(
    *,
    app_name: str,
    user_pk: int,
    session_id: str | None,
    words: list[tuple[str, ...]],
    per_word: int,
    own_words: int,
    related_per_word: int,
    newest: int,
    important: int,
    shared: int,
    now: datetime,
    vectors: bool,
    nearest: int = 0,
    query_vector: np.ndarray | None = None,
    embedder_name: str = "",
) -> MemoryCandidates:
    """The memories of the person (and the app's ``shared`` newest shared ones, and as many
    newest of those holding one of the words) that a search
    of ``words`` ranks (module docstring), in one statement. ``words``: each as its forms, any
    of which matches the words starting with it (letters and digits only, as ``tokenize`` makes
    them), the query's own first (``own_words`` of them, ``per_word`` matches each), then those
    it relates to (``related_per_word`` each). ``newest`` and ``important``: how many of the
    person's most recently changed and most important memories join them. ``vectors``:
    whether to read the stored vectors too (not without an embedder). Where PostgreSQL has
    pgvector, the ``nearest`` memories to ``query_vector`` among those ``embedder_name``
    embedded join them too, through the HNSW index of their dimension: a memory saying the
    same in other words."""
    vendor = connection.vendor
    moment = connection.ops.adapt_datetimefield_value(now)
    owned = [user_pk, app_name, session_id or "", moment]
    parts: list[str] = []
    params: list[object] = []
    for number, forms in enumerate(words):
        if not forms:
            continue
        match = word_match(forms, vendor)
        bound = per_word if number < own_words else related_per_word
        if vendor == "postgresql":
            parts.append(_PG_WORD)
            params += [match, user_pk, match, *owned, bound]
        else:
            parts.append(_SQLITE_WORD)
            params += [match, *owned, bound]
    if newest:
        parts.append(_NEWEST)
        params += [*owned, newest]
    if important:
        parts.append(_IMPORTANT)
        params += [*owned, important]
    if shared:
        parts.append(_SHARED)
        params += [app_name, moment, shared]
        matches = [f"({word_match(forms, vendor)})" for forms in words if forms]
        if matches:
            postgresql = vendor == "postgresql"
            parts.append(_PG_SHARED_WORDS if postgresql else _SQLITE_SHARED_WORDS)
            params += [(" | " if postgresql else " OR ").join(matches), app_name, moment, shared]
    semantic = (
        nearest > 0
        and query_vector is not None
        and len(query_vector) <= HNSW_MAX_DIMENSIONS
        and pgvector_enabled()
    )
    if semantic:
        dimension = len(query_vector)
        parts.append(_PG_NEAREST.format(octets=4 * dimension, dimension=dimension))
        params += [*owned, embedder_name, vector_literal(query_vector), nearest]
    if not parts:
        return MemoryCandidates(rows=[], collection=0)
    chosen = " UNION ".join(f"SELECT part.id FROM ({part}) AS part" for part in parts)
    fields = FIELDS + VECTOR_FIELDS if vectors else FIELDS
    found = (
        Memory.objects.filter(pk__in=RawSQL(chosen, params))
        .annotate(collection=RawSQL(_COLLECTION, [user_pk, app_name, COLLECTION_COUNTED]))
        .values(*fields, "collection")
        .order_by("updated_at", "id")
    )
    if semantic:
        # pgvector's iterative scan, so that the person's filter does not starve the index's
        # answer (as for past turns, ``turns_nearest``).
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            cursor.execute(f"SET LOCAL hnsw.max_scan_tuples = {HNSW_MAX_SCAN_TUPLES}")
            rows = list(found)
    else:
        rows = list(found)
    collection = rows[0]["collection"] if rows else 0
    return MemoryCandidates(rows=rows, collection=collection)


def memory_vector_index_name(dimension: int) -> str:
    return f"memory_vector_hnsw_{dimension}"
