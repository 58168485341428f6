"""MemoryIndex: one user's memories, BM25 plus a vector matrix, searched exactly."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from .bm25 import BM25Index, DocId
from .embedders import Embedder, NoEmbedder
from .fusion import Ranked, rank, rank_arrays
from .text import tokenize


class MemoryIndex:
    """One user's memories, searchable by text: a BM25 index plus a matrix of unit vectors.

    Memories are added with their text and, when an embedder is in use, their vector (pass the
    stored one, or let the index encode the text). Removal is O(length of the text) for BM25 and
    O(1) for vectors (the last row moves into the hole). Search is exact over all memories.
    """

    def __init__(
        self, *, embedder: Embedder | None = None, k1: float = 1.2, b: float = 0.75
    ) -> None:
        self.embedder: Embedder = embedder or NoEmbedder()
        self.bm25 = BM25Index(k1=k1, b=b)
        self._ids: list[DocId] = []  # row order of the vector matrix
        self._rows: dict[DocId, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)  # capacity grows by doubling

    def __len__(self) -> int:
        return len(self.bm25)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.bm25

    def add_many(
        self,
        *,
        doc_ids: Sequence[DocId],
        texts: Sequence[str],
        vectors: np.ndarray | None = None,
    ) -> None:
        """Index several memories at once (one batch through the embedder when no vectors),
        replacing earlier versions of the same ids."""
        if len(doc_ids) != len(texts):
            raise ValueError("doc_ids and texts differ in length")
        if vectors is None and doc_ids:
            vectors = self.embedder.encode(list(texts))
        for i, (doc_id, text) in enumerate(zip(doc_ids, texts, strict=True)):
            self.remove(doc_id=doc_id)
            self.bm25.add(doc_id=doc_id, tokens=tokenize(text))
            if vectors is not None:
                self._append_vector(doc_id, np.asarray(vectors[i], dtype=np.float32))

    def add(self, *, doc_id: DocId, text: str, vector: np.ndarray | None = None) -> None:
        """Index one memory, replacing any earlier version with the same id."""
        self.add_many(
            doc_ids=[doc_id], texts=[text], vectors=None if vector is None else vector[None, :]
        )

    def remove(self, *, doc_id: DocId) -> bool:
        """Forget a memory entirely; returns whether it was there."""
        found = self.bm25.remove(doc_id=doc_id)
        row = self._rows.pop(doc_id, None)
        if row is not None:
            last = len(self._ids) - 1
            if row != last:
                moved = self._ids[last]
                self._matrix[row] = self._matrix[last]
                self._ids[row] = moved
                self._rows[moved] = row
            self._ids.pop()
        return found or row is not None

    def _append_vector(self, doc_id: DocId, vector: np.ndarray) -> None:
        count = len(self._ids)
        if count == self._matrix.shape[0] or self._matrix.shape[1] != vector.shape[0]:
            if count and self._matrix.shape[1] != vector.shape[0]:
                raise ValueError("vector dimension differs from the index's")
            grown = np.zeros((max(16, 2 * count), vector.shape[0]), dtype=np.float32)
            if count:
                grown[:count] = self._matrix[:count]
            self._matrix = grown
        self._matrix[count] = vector
        self._ids.append(doc_id)
        self._rows[doc_id] = count

    def search(
        self,
        *,
        query: str,
        limit: int = 10,
        method: Literal["blend", "rrf"] = "blend",
        semantic_weight: float = 0.5,
        priors: Mapping[DocId, float] | None = None,
        prior_weight: float = 0.0,
        query_vector: np.ndarray | None = None,
    ) -> list[Ranked]:
        """The ``limit`` memories most relevant to ``query``, best first (see :func:`rank`).

        The query is embedded with the index's embedder unless ``query_vector`` is given.
        """
        lexical = self.bm25.scores(query_tokens=tokenize(query))
        if self._ids and query_vector is None:
            encoded = self.embedder.encode([query])
            query_vector = None if encoded is None else encoded[0]
        if not self._ids or query_vector is None:
            return rank(lexical=lexical, priors=priors, prior_weight=prior_weight, limit=limit)
        count = len(self._ids)
        ids = list(self._ids) + [d for d in lexical if d not in self._rows]  # rows lacking vectors
        semantic = np.zeros(len(ids))
        semantic[:count] = self._matrix[:count] @ np.asarray(query_vector, dtype=np.float32)
        has_vector = np.arange(len(ids)) < count
        lex = np.zeros(len(ids))
        extra = count
        for doc_id, value in lexical.items():
            row = self._rows.get(doc_id)
            if row is None:
                row, extra = extra, extra + 1
            lex[row] = value
        prior_array = None
        if priors is not None and prior_weight:
            prior_array = np.array([priors.get(d, 0.0) for d in ids])
        return rank_arrays(
            ids=ids,
            lexical=lex,
            semantic=semantic,
            has_vector=has_vector,
            method=method,
            semantic_weight=semantic_weight,
            priors=prior_array,
            prior_weight=prior_weight,
            limit=limit,
        )
