"""MemoryIndex: one user's memories, BM25 plus a vector matrix, searched exactly."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .bm25 import BM25Index, DocId
from .embedders import Embedder, NoEmbedder
from .expansion import feedback_weights, query_names, query_weights
from .fusion import Ranked, rank_arrays
from .text import tokenize

# Bytes a memory's index holds beyond its arrays, measured with tracemalloc as the growth from
# an index of 2,000 texts of 6-30 words to one of 8,000 (about 80 and 380 bytes, rounded up):
# per distinct term of a memory (its count, its posting) and per memory (id, slot, origin).
TERM_ENTRY_BYTES = 100
DOCUMENT_BYTES = 400


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a memory was said: the conversation and the position in it of its first source
    (session id, event sequence), who said it when the conversation names its speakers ("" when
    not), whether the memory is that turn kept whole, as said, rather than a fact drawn
    from it, and the chat the conversation is part of ("": the conversation is the chat; a
    search that reads a chat in stretches names each stretch a conversation of its own)."""

    conversation: str
    position: int
    speaker: str = ""
    whole_turn: bool = False
    chat: str = ""


class MemoryIndex:
    """One user's memories, searchable by text: a BM25 index plus a matrix of unit vectors.

    Memories are added with their text, optionally a prior (recency, importance: a value in
    [0, 1] that search may add to the relevance) and, when an embedder is in use, their vector
    (pass the stored one, or let the index encode the text). Vector rows and priors follow the
    BM25 slots, so adding and removing a memory cost time proportional to its text, not to the
    index size, and a search reads them as they are instead of rebuilding them per query. Search
    is exact over all memories: on 10,000 of them it is a few milliseconds of numpy work.

    A memory may also have a context: words it is found by without saying them, such as the
    question a turn answers ("Where are you flying?" before "Lisbon, for a conference."). They
    are a field of their own (a second BM25 index over the contexts), so a search can count a
    match there at a fraction of a match on the memory's own words.

    ``documents``: the size of the collection the index samples, when it holds only the
    candidates a database search found (see :class:`BM25Index`).
    """

    def __init__(
        self,
        *,
        embedder: Embedder | None = None,
        k1: float = 1.2,
        b: float = 0.5,
        documents: int | None = None,
    ) -> None:
        self.embedder: Embedder = embedder or NoEmbedder()
        self.bm25 = BM25Index(k1=k1, b=b, documents=documents)
        # doc id -> the words of its context
        self._contexts = BM25Index(k1=k1, b=b, documents=documents)
        self._matrix = np.zeros((0, 0), dtype=np.float32)  # row = BM25 slot; grows by doubling
        self._has_vector = np.zeros(0, dtype=bool)
        self._priors = np.zeros(0, dtype=np.float64)
        self._origins: list[Origin | None] = []  # per slot
        self._neighbours: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._turns: np.ndarray | None = None  # per slot: its turn's group, or -1
        self._chats: np.ndarray | None = None  # per slot: its chat's number, or -1
        self._speakers: dict[str, np.ndarray] | None = None  # speaker's term -> their slots
        self._context_slots: np.ndarray | None = None  # per context slot: its memory's slot

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
        priors: Sequence[float] | None = None,
        origins: Sequence[Origin | None] | None = None,
        contexts: Sequence[str] | None = None,
        vector_mask: Sequence[bool] | None = None,
        tokens: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """Index several memories at once (one batch through the embedder when no vectors),
        replacing earlier versions of the same ids. ``priors`` default to 0; ``origins`` (where
        and by whom each was said, None when unknown) make memories said one after the other
        neighbours in search, link a memory to its speaker, and make a turn kept whole and the
        facts drawn from it one result; ``contexts`` (empty: none) are words each is found by
        without saying them (see the class). ``vector_mask``: which rows of ``vectors`` hold a
        vector (stored vectors, some not made yet); with a mask nothing is ever encoded here,
        and a memory without a vector is ranked by its words alone. ``tokens``: each text's
        index terms (``tokenize(text)``) when the caller has made them already, so that a
        search ranking hundreds of candidates tokenizes each once."""
        if len(doc_ids) != len(texts) or any(
            values is not None and len(values) != len(texts)
            for values in (priors, origins, contexts, tokens)
        ):
            raise ValueError("texts and their ids, priors, origins, contexts or tokens differ")
        if vector_mask is not None and len(vector_mask) != len(texts):
            raise ValueError("vector_mask and texts differ in length")
        if vectors is None and doc_ids and vector_mask is None:
            vectors = self.embedder.encode(list(texts))
        for i, (doc_id, text) in enumerate(zip(doc_ids, texts, strict=True)):
            self.remove(doc_id=doc_id)
            slot = self.bm25.add(
                doc_id=doc_id, tokens=tokenize(text) if tokens is None else tokens[i]
            )
            self._ensure_rows(slot + 1, None if vectors is None else len(vectors[i]))
            if vectors is not None:
                self._matrix[slot] = vectors[i]
            self._has_vector[slot] = vectors is not None and (
                vector_mask is None or bool(vector_mask[i])
            )
            self._priors[slot] = 0.0 if priors is None else priors[i]
            self._origins.append(None if origins is None else origins[i])
            context = tokenize(contexts[i]) if contexts is not None else []
            if context:
                self._contexts.add(doc_id=doc_id, tokens=context)
        self._derived_drop()

    def add(
        self, *, doc_id: DocId, text: str, vector: np.ndarray | None = None, prior: float = 0.0
    ) -> None:
        """Index one memory, replacing any earlier version with the same id."""
        self.add_many(
            doc_ids=[doc_id],
            texts=[text],
            vectors=None if vector is None else vector[None, :],
            priors=[prior],
        )

    def nbytes(self) -> int:
        """About how many bytes of memory the index holds: its arrays exactly, its texts' terms
        and postings by the per-entry costs measured above, so that a cache of indexes can be
        bounded in bytes."""
        arrays = self._matrix.nbytes + self._has_vector.nbytes + self._priors.nbytes
        entries = sum(
            len(index.document_terms(slot))
            for index in (self.bm25, self._contexts)
            for slot in range(len(index))
        )
        return arrays + TERM_ENTRY_BYTES * entries + DOCUMENT_BYTES * len(self.bm25)

    def remove(self, *, doc_id: DocId) -> bool:
        """Forget a memory entirely; returns whether it was there."""
        slot = self.bm25.slot_of(doc_id)
        if slot is None:
            return False
        last = len(self.bm25) - 1
        self.bm25.remove(doc_id=doc_id)  # moves the last slot into ``slot``: follow it
        if slot != last:
            self._matrix[slot] = self._matrix[last]
            self._has_vector[slot] = self._has_vector[last]
            self._priors[slot] = self._priors[last]
            self._origins[slot] = self._origins[last]
        self._has_vector[last] = False
        self._priors[last] = 0.0
        self._origins.pop()
        self._contexts.remove(doc_id=doc_id)
        self._derived_drop()
        return True

    def _derived_drop(self) -> None:
        """Forget the arrays built from the origins; the next search that needs them rebuilds
        them."""
        self._neighbours = self._turns = self._chats = None
        self._speakers = self._context_slots = None

    def by_prior(self, *, limit: int) -> list[Ranked]:
        """The ``limit`` memories with the highest prior (recency and importance), ties by id:
        the answer to a question about the user as a whole, which names nothing to match."""
        n = len(self.bm25)
        priors = self._priors[:n]
        ids = self.bm25.ids
        chosen = sorted(range(n), key=lambda i: (-priors[i], ids[i]))[:limit]
        return [Ranked(ids[i], float(priors[i]), 0.0, 0.0) for i in chosen]

    def _neighbour_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per slot its position's number (-1: none), and per position number the previous
        and next position of the same conversation (-1: none); built once per change."""
        if self._neighbours is None:
            spots = [None if o is None else (o.conversation, o.position) for o in self._origins]
            known = sorted({spot for spot in spots if spot is not None})
            number = {spot: i for i, spot in enumerate(known)}
            of_slot = np.array([-1 if p is None else number[p] for p in spots], dtype=np.int64)
            previous = np.full(len(known), -1, dtype=np.int64)
            following = np.full(len(known), -1, dtype=np.int64)
            for i in range(1, len(known)):
                if known[i][0] == known[i - 1][0]:
                    previous[i], following[i - 1] = i - 1, i
            self._neighbours = (of_slot, previous, following)
        return self._neighbours

    def _neighbour_scores(self, scores: np.ndarray) -> np.ndarray:
        """Per slot, the best score among the memories said just before and just after it
        (in the same conversation, at the adjacent position)."""
        of_slot, previous, following = self._neighbour_arrays()
        best = np.zeros(len(previous) + 1)  # the last cell stands for "no position"
        np.maximum.at(best, np.where(of_slot < 0, len(previous), of_slot), scores)
        best[-1] = 0.0
        position = np.where(of_slot < 0, len(previous), of_slot)
        around = np.append(previous, -1)[position], np.append(following, -1)[position]
        return np.maximum(
            np.where(around[0] >= 0, best[around[0]], 0.0),
            np.where(around[1] >= 0, best[around[1]], 0.0),
        )

    def _turn_groups(self) -> np.ndarray:
        """Per slot, a number shared by the memories of one turn when that turn is kept whole
        (the whole turn and the facts drawn from it), else -1; built once per change."""
        if self._turns is None:
            whole = {
                (o.conversation, o.position)
                for o in self._origins
                if o is not None and o.whole_turn
            }
            number = {spot: i for i, spot in enumerate(sorted(whole))}
            self._turns = np.array(
                [
                    -1 if o is None else number.get((o.conversation, o.position), -1)
                    for o in self._origins
                ],
                dtype=np.int64,
            )
        return self._turns

    def _chat_numbers(self) -> np.ndarray:
        """Per slot, a number shared by the memories said in one chat (-1: no origin); built
        once per change."""
        if self._chats is None:
            chats = [None if o is None else o.chat or o.conversation for o in self._origins]
            number = {chat: i for i, chat in enumerate(sorted({c for c in chats if c}))}
            self._chats = np.array(
                [-1 if chat is None else number[chat] for chat in chats], dtype=np.int64
            )
        return self._chats

    def _words_bonus(
        self,
        query: str,
        *,
        lexical: np.ndarray,
        chat_weight: float,
        coverage_weight: float,
        context_weight: float,
    ) -> np.ndarray | None:
        """Per slot, what the share of the query's own terms, each by its IDF, held in its words
        or context adds: ``chat_weight`` times the share its chat's memories hold, to the
        memories that match the query at all (a chat about "the ankle injury" and "the book"
        holds the answer to "which book did I read while my ankle healed?" even when no one
        turn says both), and ``coverage_weight`` times the share the memory itself holds (the
        turn saying both the ankle and the book above one saying "book" twice, which BM25's
        term-by-term sum can rank alike)."""
        terms = [t for t in dict.fromkeys(tokenize(query)) if self.bm25.document_frequency(t)]
        if not terms:
            return None
        chats = self._chat_numbers()
        held = np.zeros(int(chats.max(initial=-1)) + 1)
        own = np.zeros(len(self.bm25))
        for term in terms:
            found = self._lexical({term: 1.0}, context_weight=context_weight) > 0
            idf = self.bm25.idf(term)
            held[np.unique(chats[found & (chats >= 0)])] += idf
            own[found] += idf
        total = sum(self.bm25.idf(term) for term in terms)
        bonus = coverage_weight * own / total
        if len(held):
            bonus += np.where((chats >= 0) & (lexical > 0), chat_weight * held[chats] / total, 0.0)
        return bonus

    def _speaker_slots(self, term: str) -> np.ndarray:
        """The slots of the memories said by a speaker whose name has the index term
        ``term``; built once per change."""
        if self._speakers is None:
            slots: dict[str, list[int]] = {}
            for slot, origin in enumerate(self._origins):
                if origin is not None and origin.speaker:
                    for name_term in set(tokenize(origin.speaker)):
                        slots.setdefault(name_term, []).append(slot)
            self._speakers = {t: np.array(s, dtype=np.int64) for t, s in slots.items()}
        return self._speakers.get(term, np.zeros(0, dtype=np.int64))

    def _name_bonus(
        self, query: str, *, name_weight: float, speaker_weight: float
    ) -> np.ndarray | None:
        """Per slot, what the names the query mentions add: ``speaker_weight`` to the memories
        a named person said; ``name_weight`` to those holding a name nobody of the index
        speaks under, half of it to those holding a speaker's name (they may only be talking
        to that person: "Wow, Caroline!")."""
        names = query_names(query)
        if not names or not (name_weight or speaker_weight):
            return None
        bonus = np.zeros(len(self.bm25))
        for name in names:
            said = self._speaker_slots(name)
            mention = name_weight / 2 if len(said) else name_weight
            holding = self.bm25.slots_with(name)
            bonus[holding] = np.maximum(bonus[holding], mention)
            bonus[said] = np.maximum(bonus[said], speaker_weight)
        return bonus

    def _lexical(self, weights: dict[str, float], *, context_weight: float) -> np.ndarray:
        """BM25 score of every slot for the weighted query terms, a match in a memory's context
        counting ``context_weight`` of one in its own words."""
        scores = self.bm25.score_array(weights=weights)
        if context_weight and len(self._contexts):
            if self._context_slots is None:
                self._context_slots = np.array(
                    [self.bm25.slot_of(doc_id) for doc_id in self._contexts.ids], dtype=np.int64
                )
            scores[self._context_slots] += context_weight * self._contexts.score_array(
                weights=weights
            )
        return scores

    def _ensure_rows(self, rows: int, dimension: int | None) -> None:
        if dimension is not None and self._matrix.shape[1] != dimension:
            if self._has_vector.any():
                raise ValueError("vector dimension differs from the index's")
            self._matrix = np.zeros((len(self._has_vector), dimension), dtype=np.float32)
        if rows > len(self._has_vector):
            capacity = max(16, 2 * rows)
            grown = np.zeros((capacity, self._matrix.shape[1]), dtype=np.float32)
            grown[: len(self._matrix)] = self._matrix
            self._matrix = grown
            added = capacity - len(self._has_vector)
            self._has_vector = np.concatenate([self._has_vector, np.zeros(added, dtype=bool)])
            self._priors = np.concatenate([self._priors, np.zeros(added)])

    def search(
        self,
        *,
        query: str,
        limit: int = 10,
        method: Literal["blend", "rrf"] = "blend",
        semantic_weight: float = 0.5,
        prior_weight: float = 0.0,
        query_vector: np.ndarray | None = None,
        expand: bool = False,
        name_weight: float = 0.0,
        speaker_weight: float = 0.0,
        neighbour_weight: float = 0.0,
        context_weight: float = 0.0,
        chat_weight: float = 0.0,
        coverage_weight: float = 0.0,
    ) -> list[Ranked]:
        """The ``limit`` memories most relevant to ``query``, best first (see :func:`rank`),
        each memory's prior counting ``prior_weight`` times.

        The query is embedded with the index's embedder unless ``query_vector`` is given; with
        no vector (NoEmbedder) or no memory holding one, ranking is lexical; so it is with a
        query vector of another shape than the stored ones, which an embedder that takes word
        of it (``shape_refused``, the search's) is told. ``expand``: the
        lexical query gains sub-word, related and feedback terms (:mod:`.expansion`).
        ``name_weight`` and ``speaker_weight``: added to the blended score of memories holding
        a name the query mentions, and of those said by the person of that name (see
        :meth:`_name_bonus`). ``neighbour_weight``: a memory gains that share of the best score
        of the memories said just before or after it (a question's answer often spans two
        turns). ``context_weight``: what a match in a memory's context counts against one in its
        own words. ``chat_weight``: a memory that matches gains up to that much for the share of
        the query's words its chat holds, ``coverage_weight`` up to that much for the share it
        holds itself (see :meth:`_words_bonus`). A turn kept whole and the facts drawn from that
        turn say the same thing: only the best-ranked of them is returned.
        """
        n = len(self.bm25)
        if expand:
            weights = query_weights(query, bm25=self.bm25)
            lexical = self._lexical(weights, context_weight=context_weight)
            # BM25 adds up term by term, so the feedback pass scores only the terms it adds.
            expanded = feedback_weights(weights, bm25=self.bm25, scores=lexical)
            added = {term: weight for term, weight in expanded.items() if term not in weights}
            if added:
                lexical = lexical + self._lexical(added, context_weight=context_weight)
        else:
            lexical = self._lexical(dict(Counter(tokenize(query))), context_weight=context_weight)
        has_vector = self._has_vector[:n]
        if query_vector is None and has_vector.any():
            encoded = self.embedder.encode([query])
            query_vector = None if encoded is None else encoded[0]
        semantic = None
        if query_vector is not None and has_vector.any():
            if len(query_vector) == self._matrix.shape[1]:
                semantic = self._matrix[:n] @ np.asarray(query_vector, dtype=np.float32)
            elif hasattr(self.embedder, "shape_refused"):
                self.embedder.shape_refused(
                    stored=self._matrix.shape[1], answered=len(query_vector)
                )
        bonus = None
        if n:
            bonus = self._name_bonus(query, name_weight=name_weight, speaker_weight=speaker_weight)
        if n and (chat_weight or coverage_weight):
            words = self._words_bonus(
                query,
                lexical=lexical,
                chat_weight=chat_weight,
                coverage_weight=coverage_weight,
                context_weight=context_weight,
            )
            if words is not None:
                bonus = words if bonus is None else bonus + words
        return rank_arrays(
            ids=self.bm25.ids,
            lexical=lexical,
            semantic=semantic,
            has_vector=None if semantic is None else has_vector,
            method=method,
            semantic_weight=semantic_weight,
            priors=self._priors[:n] if prior_weight else None,
            prior_weight=prior_weight,
            bonus=bonus,
            neighbours=self._neighbour_scores if neighbour_weight and n else None,
            neighbour_weight=neighbour_weight,
            groups=self._turn_groups() if n else None,
            limit=limit,
        )
