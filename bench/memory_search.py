"""Latency of ``memory_search`` with 1,000 and 10,000 memories of one user.

    DATABASE_URL=sqlite:///build/bench-memory.sqlite3 python manage.py migrate
    DATABASE_URL=sqlite:///build/bench-memory.sqlite3 \\
        python -m bench.memory_search /work/shared/data/locomo/locomo_dev.json [--queries 300]

The whole read path as a request runs it (index versions from the database, the process's index,
ranking, and the winners read again from the database with their sources), the index already
built (one untimed search first). Memories are LoCoMo turns as the offline rules keep them
("[8 May 2023] Caroline: ..."), tiled to the size; queries are LoCoMo questions. Rows, each
query in turn: the query embedding alone (local MiniLM), search lexical only (no query
embedding), and hybrid search including the query embedding. Stored vectors are computed once
per distinct text before timing. Without torch (no ``local-embeddings`` extra) only the lexical
row runs.

Writes one user (``bench-memory-search-...``) with its memories to the configured database and
deletes it at the end. Progress on stderr, figures on stdout; nothing is asserted.
"""

from __future__ import annotations

import os

# One BLAS/OpenMP thread: on a small shared CPU, spinning thread pools made a query 2-5x slower
# (docs/memory-retrieval.md). Set before numpy and torch are imported; the caller's value wins.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402

from memory_app import selectors  # noqa: E402
from memory_app.embedding import local_model_installed, vector_to_bytes  # noqa: E402
from memory_app.evaluation import locomo_load  # noqa: E402
from memory_app.models import Memory, SourceType  # noqa: E402
from memory_app.ranking import Embedder, MiniLMEmbedder, NoEmbedder  # noqa: E402
from memory_app.selectors import search as search_selectors  # noqa: E402
from memory_app.services import memory_index_invalidate  # noqa: E402

APP = "bench-memory-search"
SIZES = (1_000, 10_000)


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def progress(message: str) -> None:
    sys.stderr.write(f"\r{message[:78]:<78}")
    sys.stderr.flush()


def corpus(path: Path) -> tuple[list[str], list[str]]:
    """Memory texts as the offline rules write them, and the questions, from a LoCoMo file."""
    texts, questions = [], []
    for conversation in locomo_load(path=path):
        for session in conversation.sessions:
            date = f"{session.date.day} {session.date:%B %Y}"
            texts += [f"[{date}] {turn.speaker}: {turn.text}." for turn in session.turns]
        questions += [question.question for question in conversation.questions]
    return texts, questions


def memories_store(
    *, user_pk: int, texts: list[str], vectors: dict[str, bytes], model: str
) -> None:
    """Replace the user's memories with ``texts`` (stored vectors where given) and make every
    process's index of the user stale, as a write through the services would."""
    Memory.objects.filter(user_id=user_pk).delete()
    Memory.objects.bulk_create(
        (
            Memory(
                app_name=APP,
                user_id=user_pk,
                topic="key_conversation_details",
                text=text,
                source_type=SourceType.IMPLICIT,
                confidence=0.8,
                importance=0.5,
                embedding=vectors.get(text),
                embedding_model=model if text in vectors else "",
            )
            for text in texts
        ),
        batch_size=1000,
    )
    memory_index_invalidate(app_name=APP, user_pk=user_pk)
    if connection.vendor == "postgresql":
        # As autovacuum soon would after such a load: the words index's pending entries
        # merged, the visibility map and the planner's statistics made (VACUUM runs outside a
        # transaction: Django's connection autocommits here).
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM (ANALYZE) {Memory._meta.db_table}")


def use_embedder(embedder: Embedder) -> None:
    """Make ``memory_search`` use ``embedder``: it asks ``selectors.search.embedder_get`` which
    one the process has, so both rows can run in one process with one loaded model."""
    search_selectors.embedder_get = lambda: embedder


def timed(call: Callable[[], object]) -> tuple[float, float]:
    """Wall-clock and thread CPU milliseconds of one call."""
    cpu, started = time.thread_time(), time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000, (time.thread_time() - cpu) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    load_at_start = os.getloadavg()[0]
    texts, questions = corpus(args.path)
    questions = questions[: args.queries]
    hybrid = local_model_installed()
    vectors: dict[str, bytes] = {}
    lexical, minilm = NoEmbedder(), MiniLMEmbedder()
    if hybrid:
        distinct = sorted(set(texts))
        for start in range(0, len(distinct), 256):
            progress(f"embedding memories {start}/{len(distinct)}")
            batch = distinct[start : start + 256]
            for text, vector in zip(batch, minilm.encode(batch), strict=True):
                vectors[text] = vector_to_bytes(vector)
    user = get_user_model().objects.create_user(username=f"{APP}-{uuid.uuid4().hex[:8]}")
    results = []
    try:
        for size in SIZES:
            tiled = [texts[i % len(texts)] for i in range(size)]
            memories_store(user_pk=user.pk, texts=tiled, vectors=vectors, model=minilm.name)
            rows: dict[str, list[tuple[float, float]]] = {"search, lexical only": []}
            if hybrid:
                rows = {
                    "query embedding alone (MiniLM)": [],
                    "search, lexical only": [],
                    "search, hybrid, incl. query embedding": [],
                }
            for embedder in (lexical, minilm) if hybrid else (lexical,):
                use_embedder(embedder)
                selectors.memory_search(app_name=APP, user_pk=user.pk, query="warm up", limit=10)
            for number, question in enumerate(questions, start=1):
                progress(f"{size} memories: query {number}/{len(questions)}")
                if hybrid:
                    use_embedder(minilm)
                    rows["query embedding alone (MiniLM)"].append(
                        timed(lambda q=question: minilm.encode([q]))
                    )
                    rows["search, hybrid, incl. query embedding"].append(
                        timed(
                            lambda q=question: selectors.memory_search(
                                app_name=APP, user_pk=user.pk, query=q, limit=10
                            )
                        )
                    )
                use_embedder(lexical)
                rows["search, lexical only"].append(
                    timed(
                        lambda q=question: selectors.memory_search(
                            app_name=APP, user_pk=user.pk, query=q, limit=10
                        )
                    )
                )
            for name, values in rows.items():
                wall, cpu = [v[0] for v in values], [v[1] for v in values]
                results.append(
                    {
                        "memories": size,
                        "row": name,
                        "queries": len(values),
                        "p50_ms": round(percentile(wall, 0.50), 2),
                        "p95_ms": round(percentile(wall, 0.95), 2),
                        "cpu_p50_ms": round(percentile(cpu, 0.50), 2),
                        "cpu_p95_ms": round(percentile(cpu, 0.95), 2),
                    }
                )
    finally:
        user.delete()
    sys.stderr.write("\n")
    load_at_end = os.getloadavg()[0]
    print(f"load average (1 min): {load_at_start:.2f} at the start, {load_at_end:.2f} at the end")
    print(f"{'memories':>8}  {'row':<40} {'p50 ms':>7} {'p95 ms':>7} {'cpu p50':>7} {'cpu p95':>7}")
    for row in results:
        print(
            f"{row['memories']:>8}  {row['row']:<40} {row['p50_ms']:>7} {row['p95_ms']:>7}"
            f" {row['cpu_p50_ms']:>7} {row['cpu_p95_ms']:>7}"
        )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
