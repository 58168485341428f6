"""Reads of past user turns' stored vectors: by event, and (where PostgreSQL has pgvector)
the turns nearest a query's vector through an HNSW index.

Vectors are made once, in the background (``memory_app.services.embeddings``), under their
embedder's name; a vector of another embedder is never compared, so after a change of embedder
turns count as not embedded until ``manage.py memory_embed`` has run. Nothing here embeds.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import numpy as np
from django.db import connection, transaction

from memory_app.embedding import vector_from_bytes
from memory_app.models import TurnVector
from memory_app.selectors.generation import content_text
from sessions_app.models import EventRecord, SessionRecord

# An HNSW index covers vectors of one dimension; halfvec (16-bit floats) indexes up to 4,000
# of them (Gemini's 3,072 included, where a float32 vector index stops at 2,000), and the
# ranking reads the stored float32 vectors back, so the index only finds the candidates.
HNSW_MAX_DIMENSIONS = 4000
# How many index entries a filtered search visits at most before it gives up on finding more
# of the person's turns (pgvector's iterative scan): a person's turns are a small part of all.
HNSW_MAX_SCAN_TUPLES = 20000

_pgvector_known: dict[tuple, bool] = {}


def pgvector_enabled() -> bool:
    """Whether this database holds past turns' vectors in a pgvector column (migration 0013
    added one: PostgreSQL with the extension). Asked of the database once per process."""
    if connection.vendor != "postgresql":
        return False
    key = (connection.settings_dict["HOST"], connection.settings_dict["PORT"], connection.alias)
    key += (connection.settings_dict["NAME"],)
    if key not in _pgvector_known:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_name = %s"
                " AND column_name = 'vector' AND table_schema = current_schema()",
                [TurnVector._meta.db_table],
            )
            _pgvector_known[key] = cursor.fetchone() is not None
    return _pgvector_known[key]


def turn_embedding_text(*, text: str, speaker: str, said_at: datetime) -> str:
    """What a turn's vector is made of: the words past-conversation search indexes it by, its
    date and speaker (an imported transcript names them) before its text."""
    who = f"{speaker}: " if speaker else ""
    return f"[{said_at.day} {said_at:%B %Y}] {who}{' '.join(text.split())}"


def turn_event_text(*, content: dict | None, metadata: object, timestamp: float) -> str:
    """:func:`turn_embedding_text` of a stored event ("" when it holds no words)."""
    text = " ".join(content_text(content).split())
    if not text:
        return ""
    speaker = metadata.get("speaker") if isinstance(metadata, dict) else None
    speaker = " ".join(speaker.split()) if isinstance(speaker, str) else ""
    return turn_embedding_text(
        text=text, speaker=speaker, said_at=datetime.fromtimestamp(timestamp, tz=UTC)
    )


def turn_vectors_read(*, event_ids: Iterable[int], embedder_name: str) -> dict[int, np.ndarray]:
    """The stored vectors of the given events that ``embedder_name`` made (event pk -> unit
    vector); an event with none, or one of another embedder, is left out. One query."""
    ids = list(event_ids)
    if not ids or embedder_name == "none":
        return {}
    rows = TurnVector.objects.filter(event_id__in=ids, embedding_model=embedder_name).values_list(
        "event_id", "embedding"
    )
    return {event_id: vector_from_bytes(data) for event_id, data in rows}


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(repr(float(value)) for value in vector) + "]"


def turn_vector_index_name(dimension: int) -> str:
    return f"memory_turn_vector_hnsw_{dimension}"


def turns_nearest(
    *,
    app_name: str,
    user_pk: int,
    query_vector: np.ndarray,
    embedder_name: str,
    limit: int,
    exclude_session_key: str | None = None,
) -> list[tuple[int, float]] | None:
    """The user's ``limit`` past turns in the app nearest ``query_vector`` (event pk, cosine
    similarity), best first: their own words in their chats of the app, rewound turns and
    temporary chats left out by the query, ``exclude_session_key`` (the chat searched from)
    too. None where the database has no pgvector: the caller ranks its full-text and recent
    candidates by :func:`turn_vectors_read` instead.

    Through the HNSW index of the vector's dimension (``turn_vector_index_ensure``), with
    pgvector's iterative scan so that the person's filter does not starve the result; without
    that index (the first turns of a new dimension) the same query is exact."""
    if not pgvector_enabled():
        return None
    dimension = len(query_vector)
    if limit <= 0 or dimension > HNSW_MAX_DIMENSIONS:
        return []
    vector_type = f"halfvec({dimension})"
    sql = f"""
        SELECT turn.event_id, 1 - ((turn.vector::{vector_type}) <=> %s::{vector_type})
        FROM {TurnVector._meta.db_table} AS turn
        JOIN {EventRecord._meta.db_table} AS event ON event.id = turn.event_id
        JOIN {SessionRecord._meta.db_table} AS chat ON chat."key" = event.session_id
        WHERE vector_dims(turn.vector) = %s AND turn.embedding_model = %s
          AND event.author = 'user' AND NOT event.rewound
          AND chat.user_id = %s AND chat.app_name = %s AND NOT chat.temporary
          AND NOT chat.memory_only
          AND chat."key" <> %s
        ORDER BY turn.vector::{vector_type} <=> %s::{vector_type}
        LIMIT %s
    """
    literal = vector_literal(query_vector)
    parameters = [
        literal,
        dimension,
        embedder_name,
        user_pk,
        app_name,
        exclude_session_key or "",
        literal,
        limit,
    ]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(f"SET LOCAL hnsw.max_scan_tuples = {HNSW_MAX_SCAN_TUPLES}")
        cursor.execute(sql, parameters)
        rows = cursor.fetchall()
    ranked = sorted(((int(pk), float(score)) for pk, score in rows), key=lambda r: (-r[1], r[0]))
    return ranked
