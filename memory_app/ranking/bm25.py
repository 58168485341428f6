"""Okapi BM25 over one user's memories, updated in place, scored with numpy."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

DocId = Hashable
# A compound's head is a word ending it ("nut" in "peanut"): both parts at least this long, so
# "art" is not the head of "start" nor "ring" of "spring".
COMPOUND_PART_MIN = 3


class BM25Index:
    """An Okapi BM25 index over one user's memories, updated in place as memories come and go.

    Documents live in dense slots 0..n-1 (``ids[slot]``); removing one moves the last document
    into its slot, so a caller keeping arrays aligned with the slots (MemoryIndex's vectors)
    does the same move. Adding, replacing or removing a document costs time proportional to its
    length, not to the index size; collection statistics (document frequencies, average length)
    are always those of the documents currently held, so a removed memory leaves no trace.
    IDF is Lucene's ``log(1 + (N - df + 0.5) / (df + 0.5))``: positive for every term, so a term
    present in most memories still counts a little instead of going negative.

    ``documents``: when the index holds a sample of a larger collection (the turns a database
    search found, out of a person's whole history), the size of that collection, which N is
    then; the document frequencies stay those of the sample, exact for every term whose
    matches the sample holds all of.
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75, documents: int | None = None) -> None:
        self.k1 = k1
        self.b = b
        self.documents = documents
        self.ids: list[DocId] = []
        self._slots: dict[DocId, int] = {}
        self._terms: list[dict[str, int]] = []  # per slot: term -> count
        self._postings: dict[str, dict[int, int]] = {}  # term -> slot -> count
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # cached postings as arrays
        self._compounds: dict[str, set[str]] = {}  # head -> indexed terms ending with it
        self._lengths = np.zeros(16, dtype=np.float64)
        self._total_length = 0

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slots

    def slot_of(self, doc_id: DocId) -> int | None:
        """The slot ``doc_id`` occupies now (slots move on removal), or ``None``."""
        return self._slots.get(doc_id)

    def add(self, *, doc_id: DocId, tokens: Sequence[str]) -> int:
        """Index ``tokens`` under ``doc_id`` (replacing what that id held); returns its slot."""
        if doc_id in self._slots:
            self.remove(doc_id=doc_id)
        slot = len(self.ids)
        if slot == len(self._lengths):
            self._lengths = np.concatenate([self._lengths, np.zeros(slot)])
        counts = dict(Counter(tokens))
        for term, count in counts.items():
            if term not in self._postings:
                self._postings[term] = {}
                for head in _heads(term):
                    self._compounds.setdefault(head, set()).add(term)
            self._postings[term][slot] = count
            self._arrays.pop(term, None)
        self.ids.append(doc_id)
        self._slots[doc_id] = slot
        self._terms.append(counts)
        self._lengths[slot] = len(tokens)
        self._total_length += len(tokens)
        return slot

    def remove(self, *, doc_id: DocId) -> bool:
        """Forget ``doc_id``, moving the last document into its slot; returns whether it was
        indexed."""
        slot = self._slots.pop(doc_id, None)
        if slot is None:
            return False
        self._total_length -= int(self._lengths[slot])
        for term in self._terms[slot]:
            posting = self._postings[term]
            del posting[slot]
            self._arrays.pop(term, None)
            if not posting:
                del self._postings[term]
                for head in _heads(term):
                    self._compounds[head].discard(term)
                    if not self._compounds[head]:
                        del self._compounds[head]
        last = len(self.ids) - 1
        if slot != last:
            moved = self.ids[last]
            for term, count in self._terms[last].items():
                posting = self._postings[term]
                del posting[last]
                posting[slot] = count
                self._arrays.pop(term, None)
            self.ids[slot] = moved
            self._slots[moved] = slot
            self._terms[slot] = self._terms[last]
            self._lengths[slot] = self._lengths[last]
        self.ids.pop()
        self._terms.pop()
        return True

    def compounds(self, head: str) -> set[str]:
        """The indexed terms that end with the word ``head``: "peanut" and "walnut" for "nut"."""
        return self._compounds.get(head, set())

    def document_terms(self, slot: int) -> dict[str, int]:
        """The terms of the document in ``slot`` with their counts."""
        return self._terms[slot]

    def slots_with(self, term: str) -> np.ndarray:
        """The slots of the documents holding ``term``."""
        posting = self._postings.get(term)
        if not posting:
            return np.zeros(0, dtype=np.int64)
        return np.fromiter(posting.keys(), dtype=np.int64, count=len(posting))

    def document_frequency(self, term: str) -> int:
        return len(self._postings.get(term, ()))

    def idf(self, term: str) -> float:
        """Lucene's always-positive IDF of ``term`` over the documents held now."""
        df = self.document_frequency(term)
        return math.log(1.0 + (self._collection_size() - df + 0.5) / (df + 0.5))

    def _collection_size(self) -> int:
        """N of the IDF: the documents held, or the collection they were drawn from."""
        return max(len(self.ids), self.documents or 0)

    def score_array(
        self,
        *,
        query_tokens: Sequence[str] = (),
        weights: Mapping[str, float] | None = None,
    ) -> np.ndarray:
        """BM25 score of every slot (0 where no query term occurs), one float64 per document.

        A term repeated in the query counts once per repeat, as Okapi BM25 defines; ``weights``
        (term -> weight, instead of ``query_tokens``) lets a term count a fraction, as the
        terms a query expansion adds do.
        """
        n = len(self.ids)
        scores = np.zeros(n)
        if not n:
            return scores
        size = self._collection_size()
        norm = self.k1 * (
            1.0 - self.b + self.b * self._lengths[:n] / (self._total_length / n or 1.0)
        )
        for term, query_count in (weights or Counter(query_tokens)).items():
            posting = self._postings.get(term)
            if not posting:
                continue
            arrays = self._arrays.get(term)
            if arrays is None:
                arrays = self._arrays[term] = (
                    np.fromiter(posting.keys(), dtype=np.int64, count=len(posting)),
                    np.fromiter(posting.values(), dtype=np.float64, count=len(posting)),
                )
            slots, tf = arrays
            idf = math.log(1.0 + (size - len(slots) + 0.5) / (len(slots) + 0.5)) * query_count
            scores[slots] += idf * tf * (self.k1 + 1.0) / (tf + norm[slots])
        return scores

    def scores(self, *, query_tokens: Sequence[str]) -> dict[DocId, float]:
        """BM25 score of each document sharing at least one term with the query, by id."""
        array = self.score_array(query_tokens=query_tokens)
        return {self.ids[i]: float(array[i]) for i in np.flatnonzero(array)}


def _heads(term: str) -> list[str]:
    """The possible heads of ``term`` as a compound word: its endings that leave at least
    ``COMPOUND_PART_MIN`` characters on both sides."""
    return [term[cut:] for cut in range(COMPOUND_PART_MIN, len(term) - COMPOUND_PART_MIN + 1)]
