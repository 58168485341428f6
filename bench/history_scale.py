"""Growth of a person's history: past-conversation search and the turn before the model, as the
past turns of one person grow, on PostgreSQL, in fresh processes.

    python -m bench.history_scale                                  # small sizes, minutes
    python -m bench.history_scale --people 100,1000,20000,100000 --crowd 1000x2000
    python -m bench.history_scale --plot-only                      # the plot from the JSON

It fills a dedicated database (``chatapp_history_bench`` on ``--server``; ``--fresh`` drops it
first) with one *subject* person per size of ``--people`` (that many past user turns, each
with the assistant's reply, in chats of 100 turns, and ``--memories`` memories) and, beside
them, a *crowd* of ``--crowd`` people x turns in the same app: the database a search runs in.
The fill is server-side SQL in bulk (``bench.scale.fill``: ``INSERT ... SELECT`` over
``generate_series``), the secondary indexes dropped while it runs and built once after, a
progress bar meanwhile.

Then, for each subject and each count of ``--processes`` (1: one web process; 2: two started
at once, as two web processes of a deployment both meeting the person), fresh processes
(``--worker``) each measure, from a cold start:

- ``process's first search``: a search of someone of the crowd, the process's first: its
  connection's first search statement (planned, and its tables' catalog entries loaded);
- ``search cold``: then the first past-conversation search of the person in that process (its
  database connection open, as a web process's is by then, and its start-up heap frozen as
  ``chatapp.asgi`` does);
- ``search warm``: p50 / p95 of the next ``--searches``;
- ``rows read``: the rows the database search handed back per search (mean);
- ``memory search``: the same for a search of the person's memories (the first of the
  process, then p50 / p95), and the memories it read;
- ``turn cold`` / ``turn warm``: a chat turn's time before the model (``bench.turn_overhead``:
  the runner as the chat consumer calls it, a stub model answering at once, its time
  subtracted), the first of the process and the p50 of the next;
- ``RSS``: the process's resident memory after its work, and its growth over it.

And once, one process searching ``--served`` crowd people in turn, its resident memory as it
goes: a process's memory should not grow with the people it serves. Figures go to
build/bench-history-scale.json and are printed; the plot to docs/bench-history-scale.png.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
RESULTS_PATH = BASE_DIR / "build" / "bench-history-scale.json"
PLOT_PATH = BASE_DIR / "docs" / "bench-history-scale.png"
APP_NAME = "bench-turn"  # bench.turn_overhead's, whose turn loop this reuses
TURNS_PER_CHAT = 100
SUBJECT_PREFIX = "history-subject-"
CROWD_PREFIX = "history-crowd-"
LOCOMO = Path("/work/shared/data/locomo/locomo_dev.json")


def arguments_parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="chatapp_history_bench")
    parser.add_argument(
        "--people", default="100,1000,5000", help="past user turns of each subject, comma-separated"
    )
    parser.add_argument("--memories", type=int, default=2000, help="memories of each subject")
    parser.add_argument(
        "--crowd", default="100x2000", help="people x past user turns beside the subjects"
    )
    parser.add_argument("--processes", default="1,2", help="web processes started at once")
    parser.add_argument("--searches", type=int, default=30, help="warm searches a process")
    parser.add_argument("--turns", type=int, default=10, help="warm turns a process")
    parser.add_argument("--served", type=int, default=50, help="crowd people one process serves")
    parser.add_argument(
        "--texts",
        type=Path,
        default=LOCOMO,
        help="LoCoMo JSON whose turns are the chats' texts and whose questions the searches",
    )
    parser.add_argument("--fresh", action="store_true", help="drop the database first")
    parser.add_argument("--plot-only", action="store_true", help="plot the saved figures")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.people = [int(size) for size in args.people.split(",") if size]
    people, turns = args.crowd.lower().split("x")
    args.crowd = (int(people), int(turns))
    args.processes = [int(count) for count in args.processes.split(",") if count]
    return args


def rss_mb() -> float:
    """This process's resident memory, MB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def django_setup(url: str) -> None:
    os.environ.update(
        {"DATABASE_URL": url, "DEBUG": "false", "DJANGO_SETTINGS_MODULE": "chatapp.settings"}
    )
    os.environ.setdefault("MEMORY_EMBEDDER", "none")
    import django

    django.setup()
    from django.conf import settings

    from chatapp.process import process_tune_gc

    settings.BACKGROUND_TASKS = "inprocess"
    process_tune_gc()  # as chatapp.asgi does for a web process


def locomo_texts(path: Path) -> tuple[list[str], list[str]]:
    """The turns (in order) and the questions of a LoCoMo file: people's real words, whose
    words are as common in a history as in conversation (the fill's word pool of
    ``bench.workload`` holds every word in a third of the turns, which no search meets)."""
    from memory_app.evaluation import locomo_load

    turns, questions = [], []
    for conversation in locomo_load(path=path):
        turns += [turn.text for session in conversation.sessions for turn in session.turns]
        questions += [question.question for question in conversation.questions]
    return turns, questions


def queries(path: Path, count: int, *, offset: int = 0) -> list[str]:
    """``count`` questions of the LoCoMo file, from ``offset`` on, round."""
    _, questions = locomo_texts(path)
    return [questions[(offset + n) % len(questions)] for n in range(count)]


def texts_pool_create(cursor: Any, path: Path) -> None:
    """The pool of message texts the fill draws from (``bench.scale.fill.pools_create``'s
    table, made first from LoCoMo's turns: pairs of consecutive turns, a user's message and
    the reply)."""
    from bench.scale import fill as bulk

    cursor.execute(
        "CREATE TABLE IF NOT EXISTS bench_scale_texts (n int PRIMARY KEY, user_content json,"
        " model_content json)"
    )
    cursor.execute("SELECT count(*) FROM bench_scale_texts")
    if cursor.fetchone()[0]:
        return
    turns, _ = locomo_texts(path)
    rows = [
        (
            n,
            json.dumps({"parts": [{"text": turns[(2 * n) % len(turns)]}], "role": "user"}),
            json.dumps({"parts": [{"text": turns[(2 * n + 1) % len(turns)]}], "role": "model"}),
        )
        for n in range(bulk.TEXTS)
    ]
    cursor.executemany("INSERT INTO bench_scale_texts VALUES (%s, %s, %s)", rows)


# -- filling ----------------------------------------------------------------------------------


def _chat_lengths(turns: int) -> list[int]:
    """Event counts of the chats holding ``turns`` user turns and their replies."""
    full, rest = divmod(turns, TURNS_PER_CHAT)
    return [2 * TURNS_PER_CHAT] * full + ([2 * rest] if rest else [])


def fill(args: argparse.Namespace, url: str) -> dict[str, int]:
    """Write the subjects and the crowd unless a previous run did; returns each subject's
    username -> pk."""
    import random

    import psycopg
    from django.core.management import call_command
    from rich.progress import Progress

    from bench.scale import fill as bulk
    from bench.scale import loading

    call_command("migrate", verbosity=0)
    tables = bulk.Tables.of_models()
    database = psycopg.connect(url)
    loading.fill_connection_prepare(database)
    now = time.time()
    with database.cursor() as cursor:
        texts_pool_create(cursor, args.texts)
        bulk.pools_create(cursor)
        cursor.execute(
            f"SELECT username FROM {tables.users} WHERE username LIKE %s",
            [f"{SUBJECT_PREFIX}%"],
        )
        done = {row[0] for row in cursor.fetchall()}
        cursor.execute(
            f"SELECT count(*) FROM {tables.users} WHERE username LIKE %s", [f"{CROWD_PREFIX}%"]
        )
        crowd_done = cursor.fetchone()[0]
    database.commit()
    people, crowd_turns = args.crowd
    work = [
        (f"{SUBJECT_PREFIX}{size}", size, args.memories)
        for size in args.people
        if f"{SUBJECT_PREFIX}{size}" not in done
    ] + [(f"{CROWD_PREFIX}{n}", crowd_turns, 0) for n in range(crowd_done, people)]
    if work:
        loading.indexes_drop(database, tables=[tables.events, tables.sessions, tables.memories])
        with Progress() as bar:
            task = bar.add_task("filling", total=sum(2 * turns for _, turns, _ in work))
            for username, turns, memories in work:
                rng = random.Random(username)
                with database.cursor() as cursor:
                    user_pk = bulk.user_insert(cursor, tables, username=username)
                    plan = bulk.session_plan(
                        prefix=username,
                        lengths=_chat_lengths(turns),
                        rng=rng,
                        now=now,
                        age_days=(0.01, 700.0),
                    )
                    bulk.sessions_insert(
                        cursor, tables, user_pk=user_pk, app_name=APP_NAME, plan=plan
                    )
                    if memories:
                        picked = -(-min(turns, TURNS_PER_CHAT) // 5)  # every fifth user turn
                        bulk.memories_insert(
                            cursor,
                            tables,
                            user_pk=user_pk,
                            app_name=APP_NAME,
                            session_ids=plan.ids[:1],
                            extra=max(0, memories - picked),
                        )
                database.commit()
                bar.update(task, advance=2 * turns, description=username)
        loading.indexes_restore([database], report=lambda message: print(message, file=sys.stderr))
    database.commit()
    database.autocommit = True  # VACUUM runs outside a transaction
    with database.cursor() as cursor:
        # As autovacuum would soon after such a load: the visibility map it sets is what lets
        # a count of a person's memories read their index alone.
        cursor.execute("VACUUM (ANALYZE)")
        cursor.execute(
            f"SELECT username, id FROM {tables.users} WHERE username LIKE %s",
            [f"{SUBJECT_PREFIX}%"],
        )
        subjects = dict(cursor.fetchall())
    database.close()
    return subjects


# -- measuring, in a fresh process --------------------------------------------------------------


def _counted_search(user_pk: int, query: str, rows: list[int]) -> float:
    from memory_app.selectors import past_conversations

    windows_read = past_conversations.turn_windows

    def counted(**kwargs: Any) -> Any:
        windows = windows_read(**kwargs)
        rows.append(len(windows.rows))
        return windows

    past_conversations.turn_windows = counted
    try:
        started = time.perf_counter()
        past_conversations.past_conversations_search(
            app_name=APP_NAME, user_pk=user_pk, query=query, limit=5
        )
        return (time.perf_counter() - started) * 1000
    finally:
        past_conversations.turn_windows = windows_read


def _memory_search(user_pk: int, query: str, rows: list[int]) -> float:
    from memory_app.selectors import search

    candidates_read = search.memory_candidates

    def counted(**kwargs: Any) -> Any:
        found = candidates_read(**kwargs)
        rows.append(len(found.rows))
        return found

    search.memory_candidates = counted
    try:
        started = time.perf_counter()
        search.memory_search(app_name=APP_NAME, user_pk=user_pk, query=query, limit=5)
        return (time.perf_counter() - started) * 1000
    finally:
        search.memory_candidates = candidates_read


def _turns(user_pk: int, texts: list[str]) -> list[float]:
    """A chat turn's time before the model, one a text, in a new chat of the person (each
    taken back after it), whose preloads search all their past chats."""
    import asyncio

    from agents_app.runtime.agents import agent_for_app
    from agents_app.runtime.memory_hooks import memory_provider_get
    from agents_app.runtime.runner import Runner
    from bench.turn_overhead import (
        TOTAL,
        InstantModel,
        Phases,
        TimedMemory,
        TimedSessions,
        turns_run,
    )
    from sessions_app import services
    from sessions_app.models import SessionRecord
    from sessions_app.services import SessionService

    created = services.session_create(app_name=APP_NAME, user_id=str(user_pk))
    session = SessionRecord.objects.get(app_name=APP_NAME, user_id=user_pk, session_id=created.id)
    model, phases = InstantModel(), Phases()
    runner = Runner(
        agent=agent_for_app(APP_NAME),
        model=model,
        session_service=TimedSessions(SessionService(), phases),
        memory=TimedMemory(memory_provider_get(), phases),
    )
    samples = asyncio.run(
        turns_run(
            runner=runner,
            model=model,
            phases=phases,
            user_id=str(user_pk),
            session_id=session.session_id,
            session_key=session.pk,
            last_sequence=session.last_sequence,
            texts=texts,
            warm_up=0,
        )
    )
    return [sample[TOTAL] for sample in samples]


def _someone_else() -> int:
    """A person of the crowd: whose search a process makes before the subject's."""
    from django.contrib.auth import get_user_model

    return (
        get_user_model()
        .objects.filter(username__startswith=CROWD_PREFIX)
        .values_list("pk", flat=True)
        .order_by("pk")
        .first()
    )


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One fresh process's figures (see the module's docstring)."""
    started_rss = rss_mb()
    django_setup(spec["url"])
    from django.db import connection

    # By a person's first search a web process has its database connection open (the turn
    # read their chat first, and connections persist): what a search costs the first time is
    # the person's, not the connection's.
    connection.ensure_connection()
    ready_rss = rss_mb()
    if spec["kind"] == "served":
        from sessions_app.models import SessionRecord

        people = list(
            SessionRecord.objects.filter(app_name=APP_NAME, user__username__startswith=CROWD_PREFIX)
            .values_list("user_id", flat=True)
            .distinct()
            .order_by("user_id")[: spec["served"]]
        )
        curve, rows = [(0, ready_rss)], []
        for number, user_pk in enumerate(people, start=1):
            for query in queries(spec["texts"], 3, offset=number):
                _counted_search(user_pk, query, rows)
            if number % max(1, len(people) // 10) == 0 or number == len(people):
                curve.append((number, rss_mb()))
        return {"rss_curve": curve, "rows_mean": statistics.fmean(rows) if rows else 0}
    user_pk, rows = spec["user_pk"], []
    texts = queries(spec["texts"], spec["searches"] + 1, offset=spec["offset"])
    if spec["kind"] == "search":
        # Another person's search first: what the connection's first search statement costs
        # (PostgreSQL plans it and loads the catalog entries of its tables and indexes, once a
        # connection) is the process's, told apart from what this person's first search costs.
        process_first = _counted_search(_someone_else(), texts[-1], [])
        cold = _counted_search(user_pk, texts[0], rows)
        warm = sorted(_counted_search(user_pk, text, rows) for text in texts[1:])
        memory_rows: list[int] = []
        memory_cold = _memory_search(user_pk, texts[0], memory_rows)
        memory_warm = sorted(_memory_search(user_pk, text, memory_rows) for text in texts[1:])
        return {
            "search_process_first_ms": process_first,
            "search_cold_ms": cold,
            "search_p50_ms": warm[len(warm) // 2],
            "search_p95_ms": warm[max(0, -(-95 * len(warm) // 100) - 1)],
            "rows_mean": statistics.fmean(rows),
            "memory_search_cold_ms": memory_cold,
            "memory_search_p50_ms": memory_warm[len(memory_warm) // 2],
            "memory_search_p95_ms": memory_warm[max(0, -(-95 * len(memory_warm) // 100) - 1)],
            "memory_rows_mean": statistics.fmean(memory_rows),
            "rss_start_mb": started_rss,
            "rss_ready_mb": ready_rss,
            "rss_mb": rss_mb(),
        }
    turns = _turns(user_pk, texts[: spec["turns"] + 1])
    warm = sorted(turns[1:])
    return {
        "turn_cold_ms": turns[0],
        "turn_p50_ms": warm[len(warm) // 2],
        "rss_ready_mb": ready_rss,
        "rss_mb": rss_mb(),
    }


def workers_run(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Start one fresh process per spec, all at once; their figures in order."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.history_scale", "--worker", json.dumps(spec)],
            cwd=BASE_DIR,
            stdout=subprocess.PIPE,
            text=True,
        )
        for spec in specs
    ]
    results = []
    for process in processes:
        out, _ = process.communicate()
        if process.returncode:
            raise RuntimeError(f"a worker failed ({process.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


# -- report -------------------------------------------------------------------------------------


def _joined(values: list[float], unit: str) -> str:
    return " / ".join(f"{value:,.1f}" for value in values) + f" {unit}"


def _memory_cells(searches: list[dict[str, Any]]) -> str:
    if "memory_search_cold_ms" not in searches[0]:
        return "-"
    first = " / ".join(f"{s['memory_search_cold_ms']:.1f}" for s in searches)
    p50 = statistics.fmean(s["memory_search_p50_ms"] for s in searches)
    p95 = statistics.fmean(s["memory_search_p95_ms"] for s in searches)
    return f"{first} / {p50:.1f} / {p95:.1f} ms"


def table_lines(results: dict[str, Any]) -> list[str]:
    """The figures as a Markdown table, one row per subject and process count (per process:
    values joined by " / ")."""
    lines = [
        "| past turns | processes | process's first search | search cold | search warm p50 / p95"
        " | rows read a search"
        " | memory search first / warm p50 / p95 | memories read a search"
        " | turn before model, cold | turn warm p50 | process RSS after searches | RSS growth |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["subjects"]:
        searches, turns = row["search"], row["turn"]
        p50 = statistics.fmean(s["search_p50_ms"] for s in searches)
        p95 = statistics.fmean(s["search_p95_ms"] for s in searches)
        rows_read = statistics.fmean(s["rows_mean"] for s in searches)
        cells = [
            f"{row['turns']:,}",
            str(row["processes"]),
            _joined([s.get("search_process_first_ms", 0.0) for s in searches], "ms"),
            _joined([s["search_cold_ms"] for s in searches], "ms"),
            f"{p50:.1f} / {p95:.1f} ms",
            f"{rows_read:.0f}",
            _memory_cells(searches),
            f"{statistics.fmean(s.get('memory_rows_mean', 0) for s in searches):.0f}",
            _joined([t["turn_cold_ms"] for t in turns], "ms"),
            _joined([t["turn_p50_ms"] for t in turns], "ms"),
            _joined([s["rss_mb"] for s in searches], "MB"),
            _joined([s["rss_mb"] - s["rss_ready_mb"] for s in searches], "MB"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    served = results.get("served")
    if served:
        curve = ", ".join(f"{n}: {mb:.0f}" for n, mb in served["rss_curve"])
        lines.append("")
        lines.append(f"One process searching crowd people in turn, RSS MB by people: {curve}")
    return lines


def plot(results: dict[str, Any], path: Path) -> None:
    """Five panels against the subject's past turns: past-conversation search (cold, warm
    p50/p95), memory search (the same), turn before the model (cold, warm), rows read a
    search, process RSS; one line per process count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 5, figsize=(22, 4))
    for processes in sorted({row["processes"] for row in results["subjects"]}):
        rows = [row for row in results["subjects"] if row["processes"] == processes]
        sizes = [row["turns"] for row in rows]

        def mean(key: str, part: str, rows=rows) -> list[float]:
            return [statistics.fmean(s[key] for s in row[part]) for row in rows]

        tag = f"{processes} process{'es' if processes > 1 else ''}"
        axes[0].plot(sizes, mean("search_cold_ms", "search"), "o-", label=f"cold, {tag}")
        axes[0].plot(
            sizes, mean("search_process_first_ms", "search"), "x-.", label=f"process's first, {tag}"
        )
        axes[0].plot(sizes, mean("search_p50_ms", "search"), "s--", label=f"warm p50, {tag}")
        axes[0].plot(sizes, mean("search_p95_ms", "search"), "^:", label=f"warm p95, {tag}")
        axes[1].plot(sizes, mean("memory_search_cold_ms", "search"), "o-", label=f"first, {tag}")
        axes[1].plot(sizes, mean("memory_search_p50_ms", "search"), "s--", label=f"p50, {tag}")
        axes[1].plot(sizes, mean("memory_search_p95_ms", "search"), "^:", label=f"p95, {tag}")
        axes[2].plot(sizes, mean("turn_cold_ms", "turn"), "o-", label=f"cold, {tag}")
        axes[2].plot(sizes, mean("turn_p50_ms", "turn"), "s--", label=f"warm p50, {tag}")
        axes[3].plot(sizes, mean("rows_mean", "search"), "o-", label=f"past turns, {tag}")
        axes[3].plot(sizes, mean("memory_rows_mean", "search"), "s--", label=f"memories, {tag}")
        axes[4].plot(sizes, mean("rss_mb", "search"), "o-", label=f"after searches, {tag}")
        axes[4].plot(sizes, mean("rss_mb", "turn"), "s--", label=f"after turns, {tag}")
    titles = (
        "past-conversation search, ms",
        f"memory search ({results['memories']:,} memories), ms",
        "turn before the model, ms",
        "rows read a search",
        "process RSS, MB",
    )
    for panel, title in zip(axes, titles, strict=True):
        panel.set_xscale("log")
        panel.set_title(title, fontsize=10)
        panel.set_xlabel("the person's past turns")
        panel.grid(True, which="both", alpha=0.3)
        panel.legend(fontsize=7)
    crowd_people, crowd_turns = results["crowd"]
    figure.suptitle(
        "Past conversations and memories searched by the database "
        f"(beside {crowd_people:,} people x {crowd_turns:,} turns)",
        fontsize=11,
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)


def results_save(results: dict[str, Any]) -> None:
    """Keep the figures so far (a run stopped midway keeps the subjects it measured)."""
    RESULTS_PATH.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_PATH.write_text(json.dumps(results, indent=1))


def main(argv: list[str] | None = None) -> None:
    args = arguments_parse(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    if args.plot_only:
        plot(json.loads(RESULTS_PATH.read_text()), PLOT_PATH)
        print(f"plot in docs/{PLOT_PATH.name}")
        return
    import psycopg
    from psycopg import sql

    with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
        if args.fresh:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(args.database)
                )
            )
        if not admin.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", [args.database]
        ).fetchone():
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(args.database)))
    url = f"{args.server}/{args.database}"
    django_setup(url)
    from django.db import connection

    subjects = fill(args, url)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM sessions_app_eventrecord")
        events = cursor.fetchone()[0]
    results: dict[str, Any] = {
        "crowd": list(args.crowd),
        "memories": args.memories,
        "events": events,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "postgresql": connection.pg_version,
        },
        "subjects": [],
    }
    base = {
        "url": url,
        "searches": args.searches,
        "turns": args.turns,
        "texts": str(args.texts),
        "offset": 0,
    }
    for size in args.people:
        user_pk = subjects[f"{SUBJECT_PREFIX}{size}"]
        for processes in args.processes:
            print(f"{size:,} past turns, {processes} process(es)", file=sys.stderr)
            spec = {**base, "user_pk": user_pk}
            results["subjects"].append(
                {
                    "turns": size,
                    "processes": processes,
                    "search": workers_run(
                        [{**spec, "kind": "search", "offset": 97 * n} for n in range(processes)]
                    ),
                    "turn": workers_run(
                        [{**spec, "kind": "turn", "offset": 97 * n + 31} for n in range(processes)]
                    ),
                }
            )
            results_save(results)
    if args.served:
        print(f"one process serving {args.served} people", file=sys.stderr)
        [results["served"]] = workers_run([{**base, "kind": "served", "served": args.served}])
    results_save(results)
    print(f"{events:,} events stored; {args.memories:,} memories a subject")
    print("\n".join(table_lines(results)))
    try:
        plot(results, PLOT_PATH)
    except ImportError:
        print("matplotlib missing (the bench extra): plot with --plot-only where it is")
    print(f"Figures in {RESULTS_PATH.relative_to(BASE_DIR)}, plot in docs/{PLOT_PATH.name}.")


if __name__ == "__main__":
    main()
