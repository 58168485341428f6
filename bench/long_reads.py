"""Reading a long session in a process that keeps other objects alive: collector pauses.

    python -m bench.long_reads                    # PostgreSQL, database chatapp_scale_long_reads
    python -m bench.long_reads --reads 300 --kept 10

A server process holds objects between requests (indexes, open sockets, results still being
sent), and CPython's collector walks every tracked object it holds whenever a full collection
runs: a long read then and there takes that walk's time on top of its own. This bench reads
the same 2,000-event session (``SessionService.get_session`` on PostgreSQL) ``--reads`` times
in one process that keeps the last ``--kept`` results alive and a heap of ``--heap`` small
long-lived objects (as caches are), each read timed alone, in three settings of the process:

- ``default``: CPython's collector as a plain program has it;
- ``tuned``: ``chatapp.process.process_tune_gc`` called once the process has started, as the
  web and worker processes do (the start-up heap frozen, a larger first-generation threshold);
- ``tuned, heap built before the freeze``: the same with the long-lived heap made before the
  call, as a server that builds its caches at start-up.

For each: p50, p95 and max of a read, p95 / p50 (target: 1.5 or under), the collections of
each generation during the reads, and the objects the collector tracks per event read. Each
setting runs in a process of its own (``--setting``), so one does not inherit another's heap.
Figures to build/bench-long-reads.json; timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psycopg
from psycopg import sql

BASE_DIR = Path(__file__).resolve().parent.parent
RESULTS_PATH = BASE_DIR / "build" / "bench-long-reads.json"
SETTINGS = ("default", "tuned", "tuned, heap built before the freeze")
APP_NAME = "bench-long-reads"


def arguments_parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="chatapp_scale_long_reads")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--kept", type=int, default=8, help="earlier results kept alive")
    parser.add_argument("--heap", type=int, default=300_000, help="long-lived objects held")
    parser.add_argument("--setting", choices=SETTINGS, help="run one setting (internal)")
    return parser.parse_args(argv)


def _django_setup(url: str) -> None:
    os.environ.update(
        {"DATABASE_URL": url, "DEBUG": "false", "DJANGO_SETTINGS_MODULE": "chatapp.settings"}
    )
    import django

    django.setup()


def session_prepare(server: str, name: str, events: int) -> tuple[str, str]:
    """A fresh database with one user and a session of ``events`` chat events."""
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    _django_setup(f"{server}/{name}")
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from bench.workload import chat_turns
    from sessions_app import services
    from sessions_app.events import Event, EventActions

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user(username="long-reader")
    session = services.session_create(app_name=APP_NAME, user_id=str(user.pk))
    for turn in chat_turns(events):
        services.event_append(
            session=session,
            event=Event(
                invocation_id=turn.invocation_id,
                author=turn.author,
                content={"role": turn.role, "parts": [{"text": turn.text}]},
                actions=EventActions(state_delta=dict(turn.state_delta)),
            ),
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return str(user.pk), session.id


def _heap(size: int) -> list[dict]:
    """Long-lived small objects, as a server's caches hold."""
    return [{"key": number, "value": [number]} for number in range(size // 2)]


def setting_run(args: argparse.Namespace, user_id: str, session_id: str) -> dict:
    """Time the reads in this process under ``args.setting``."""
    _django_setup(f"{args.server}/{args.database}")
    from bench.workload import percentile
    from chatapp.process import process_tune_gc
    from sessions_app.services import SessionService

    heap = None
    if args.setting == SETTINGS[2]:
        heap = _heap(args.heap)
    if args.setting != SETTINGS[0]:
        process_tune_gc()
    if heap is None:
        heap = _heap(args.heap)
    collections = [0, 0, 0]
    pauses: list[float] = []
    started_at: list[float] = []

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            started_at.append(time.perf_counter())
        else:
            collections[info["generation"]] += 1
            pauses.append(time.perf_counter() - started_at.pop())

    service = SessionService()

    async def reads() -> tuple[list[float], float]:
        kept: list = []
        samples = []
        for number in range(args.reads + 5):
            started = time.perf_counter()
            session = await service.get_session(
                app_name=APP_NAME, user_id=user_id, session_id=session_id
            )
            elapsed = time.perf_counter() - started
            if len(session.events) != args.events:
                raise RuntimeError(f"read {len(session.events)} events")
            kept.append(session)
            del kept[: -args.kept]
            if number == 4:
                gc.callbacks.append(on_gc)
            elif number > 4:
                samples.append(elapsed)
        gc.callbacks.remove(on_gc)
        gc.collect()
        before = len(gc.get_objects())
        kept.append(
            await service.get_session(app_name=APP_NAME, user_id=user_id, session_id=session_id)
        )
        gc.collect()
        return samples, (len(gc.get_objects()) - before) / args.events

    samples, tracked = asyncio.run(reads())
    del heap
    p50, p95 = percentile(samples, 0.5) * 1000, percentile(samples, 0.95) * 1000
    return {
        "setting": args.setting,
        "reads": len(samples),
        "p50_ms": round(p50, 2),
        "p95_ms": round(p95, 2),
        "max_ms": round(max(samples) * 1000, 2),
        "p95_over_p50": round(p95 / p50, 2),
        "collections": dict(zip(("gen0", "gen1", "gen2"), collections, strict=True)),
        "longest_collection_ms": round(max(pauses, default=0.0) * 1000, 2),
        "tracked_objects_per_event": round(tracked, 2),
    }


def main(argv: list[str] | None = None) -> None:
    args = arguments_parse(argv)
    if args.setting:
        user_id, session_id = os.environ["LONG_READS_USER"], os.environ["LONG_READS_SESSION"]
        print(json.dumps(setting_run(args, user_id, session_id)))
        return
    load_before = os.getloadavg()
    sys.stderr.write(f"preparing a session of {args.events} events\n")
    user_id, session_id = session_prepare(args.server, args.database, args.events)
    results = []
    for setting in SETTINGS:
        sys.stderr.write(f"reading {args.reads} times: {setting}\n")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.long_reads",
                *(argv or sys.argv[1:]),
                "--setting",
                setting,
            ],
            env={**os.environ, "LONG_READS_USER": user_id, "LONG_READS_SESSION": session_id},
            cwd=BASE_DIR,
            capture_output=True,
            text=True,
            check=True,
        )
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    report = {
        "arguments": {key: value for key, value in vars(args).items() if key != "setting"},
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "settings": results,
    }
    RESULTS_PATH.parent.mkdir(exist_ok=True)
    RESULTS_PATH.write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"{args.reads} reads of {args.events} events, {args.kept} results and {args.heap:,}"
        f" objects kept alive; load average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'setting':<38} {'p50':>7} {'p95':>7} {'max':>7} {'p95/p50':>8}  gen0/1/2  tracked/event"
    )
    for row in results:
        counts = "/".join(str(value) for value in row["collections"].values())
        print(
            f"{row['setting']:<38} {row['p50_ms']:>7.1f} {row['p95_ms']:>7.1f}"
            f" {row['max_ms']:>7.1f} {row['p95_over_p50']:>8.2f}  {counts:<9} "
            f"{row['tracked_objects_per_event']:>6.1f}"
        )
    print(f"Figures written to {RESULTS_PATH.relative_to(BASE_DIR)}.")


if __name__ == "__main__":
    main()
