"""Okapi BM25 over one user's memories, updated in place."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

DocId = Hashable


class BM25Index:
    """An Okapi BM25 index over one user's memories, updated in place as memories come and go.

    Adding, replacing or removing a document costs time proportional to its length, not to the
    index size; collection statistics (document frequencies, average length) are always those
    of the documents currently held, so a removed memory leaves no trace in later scores.
    IDF is Lucene's ``log(1 + (N - df + 0.5) / (df + 0.5))``: positive for every term, so a
    term present in most memories still counts a little instead of going negative.
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._postings: dict[str, dict[DocId, int]] = {}
        self._lengths: dict[DocId, int] = {}
        self._terms: dict[DocId, tuple[str, ...]] = {}
        self._total_length = 0

    def __len__(self) -> int:
        return len(self._lengths)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._lengths

    def add(self, *, doc_id: DocId, tokens: Sequence[str]) -> None:
        """Index ``tokens`` under ``doc_id``, replacing what that id held before."""
        if doc_id in self._lengths:
            self.remove(doc_id=doc_id)
        counts = Counter(tokens)
        for term, count in counts.items():
            self._postings.setdefault(term, {})[doc_id] = count
        self._terms[doc_id] = tuple(counts)
        self._lengths[doc_id] = len(tokens)
        self._total_length += len(tokens)

    def remove(self, *, doc_id: DocId) -> bool:
        """Forget ``doc_id``; returns whether it was indexed."""
        length = self._lengths.pop(doc_id, None)
        if length is None:
            return False
        self._total_length -= length
        for term in self._terms.pop(doc_id):
            posting = self._postings[term]
            del posting[doc_id]
            if not posting:
                del self._postings[term]
        return True

    def scores(self, *, query_tokens: Sequence[str]) -> dict[DocId, float]:
        """BM25 score of every document sharing at least one term with the query (others: 0).

        A term repeated in the query counts once per repeat, as Okapi BM25 defines.
        """
        n = len(self._lengths)
        if not n:
            return {}
        average = self._total_length / n or 1.0
        result: dict[DocId, float] = {}
        for term, query_count in Counter(query_tokens).items():
            posting = self._postings.get(term)
            if not posting:
                continue
            idf = math.log(1.0 + (n - len(posting) + 0.5) / (len(posting) + 0.5)) * query_count
            k1, b, lengths = self.k1, self.b, self._lengths
            for doc_id, tf in posting.items():
                norm = k1 * (1.0 - b + b * lengths[doc_id] / average)
                result[doc_id] = result.get(doc_id, 0.0) + idf * tf * (k1 + 1.0) / (tf + norm)
        return result
