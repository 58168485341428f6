"""Our SessionService against google-adk's DatabaseSessionService: same PostgreSQL, same run.

    python -m bench.sessions                      # the full run (docs/benchmarks.md)
    python -m bench.sessions --events 200 --sessions 500 --repeat 20 --repeat-all 4

Drops and recreates a dedicated database and migrates ours there. google-adk
2.13 runs in its own virtual environment (build/adk-venv, ``bench.adk_venv``,
created on first use: it needs google-genai < 3, the product uses 3.x) as a
subprocess on that same database, with the same host, port and user; ours runs
in this process. The two sides take turns in small steps (100 appends, 500 creates, 10
reads, ... each), so both run under the same load on the machine. Prints
p50/p95 per figure for both sides and the ratio ADK/ours, and writes all of it
to build/bench-sessions.json. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.adk_venv import adk_python
from bench.workload import summary

BASE_DIR = Path(__file__).resolve().parent.parent
RESULTS_PATH = BASE_DIR / "build" / "bench-sessions.json"

# (figure, label, bar): figures both sides measure, then ours only.
COMPARED = (
    ("append_event", "append_event, with a state delta", "ratio >= 3"),
    ("get_session_recent20", "get_session, last 20 events", "ratio >= 3"),
    ("get_session_all", "get_session, all events", "ratio >= 3"),
    ("create_session", "create_session", ""),
    ("list_sessions_all", "list_sessions, all (ours: every page)", ""),
)
OURS_ONLY = (
    ("list_sessions_page", "list_sessions, one page (ours)", "p95 < 10 ms"),
    ("list_sessions_deep_page", "list_sessions, last quarter of pages", "p95 < 10 ms"),
)


def arguments_parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=2000, help="events appended to one session")
    parser.add_argument("--sessions", type=int, default=10000, help="sessions of the listing user")
    parser.add_argument("--repeat", type=int, default=100, help="reads of the last 20 events")
    parser.add_argument("--repeat-all", type=int, default=20, help="reads of all the events")
    parser.add_argument(
        "--list-repeat", type=int, default=5, help="listings of all sessions (ours: page walks)"
    )
    parser.add_argument("--page-size", type=int, default=20, help="ours: list_sessions page size")
    parser.add_argument("--writers", type=int, default=16, help="concurrent writers, one session")
    parser.add_argument("--writer-events", type=int, default=100, help="events per writer")
    parser.add_argument(
        "--server", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL, no database"
    )
    parser.add_argument("--database", default="bench_sessions", help="dropped and recreated")
    parser.add_argument("--skip-adk", action="store_true", help="run our side only")
    return parser.parse_args(argv)


def database_recreate(*, server: str, name: str) -> None:
    """Drop the benchmark database (closing its connections) and create it empty."""
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


class LocalSide:
    """Our side, called in this process; async operations run on one event loop."""

    name = "ours"

    def __init__(self, side: Any) -> None:
        self.side = side
        self.runner = asyncio.Runner()

    def call(self, op: str, **args: Any) -> Any:
        result = getattr(self.side, op)(**args)
        return self.runner.run(result) if inspect.iscoroutine(result) else result

    def close(self) -> None:
        self.runner.close()


class RemoteSide:
    """An ADK side: ``bench.adk_side`` in google-adk's environment, one JSON line per call."""

    def __init__(self, *, name: str, arguments: list[str]) -> None:
        self.name = name
        self.process = subprocess.Popen(
            [str(adk_python()), "-m", "bench.adk_side", *arguments],
            cwd=BASE_DIR,
            env={**os.environ, "PYTHONPATH": str(BASE_DIR)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def call(self, op: str, **args: Any) -> Any:
        self.process.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(
                f"the {self.name} side exited with code {self.process.wait()} (see above)"
            )
        return json.loads(line)["result"]

    def close(self) -> None:
        self.call("close")
        self.process.wait()


class Run:
    """Both sides taking turns, their samples, and the progress lines."""

    def __init__(self, sides: list) -> None:
        self.sides = sides
        self.samples: dict[str, dict[str, list[float]]] = {side.name: {} for side in sides}
        self.started = time.perf_counter()

    def say(self, message: str) -> None:
        print(f"[{time.perf_counter() - self.started:7.1f}s] {message}", flush=True)

    def turns(self, figure: str, *, total: int, block: int, call: Callable) -> None:
        """``call(side, start, stop)`` for items ``start:stop`` of ``total``, ``block`` items
        per side per turn; it returns the durations. Prints a line per quarter."""
        self.say(f"{figure}: {total} per side, turns of {block}")
        quarter = max(1, total // 4)
        for start in range(0, total, block):
            stop = min(total, start + block)
            for side in self.sides:
                self.samples[side.name].setdefault(figure, []).extend(call(side, start, stop))
            if stop // quarter != start // quarter or stop == total:
                medians = ", ".join(
                    f"{side.name} p50 {summary(self.samples[side.name][figure])['p50_ms']:.2f} ms"
                    for side in self.sides
                )
                self.say(f"{figure} {stop}/{total} ({medians})")

    def warm_up(self, op: str, **args: Any) -> None:
        for side in self.sides:
            side.call(op, **args)


def report_print(results: dict, args: argparse.Namespace) -> None:
    """The figures table and the concurrency lines."""
    ours = results["figures"]["ours"]
    adk = results["figures"].get("ADK", {})

    def ms(figure: dict | None, key: str) -> str:
        return f"{figure[key]:9.2f}" if figure else f"{'-':>9}"

    def ratio(key: str, mine: dict | None, theirs: dict | None) -> str:
        return f"{theirs[key] / mine[key]:7.1f}x" if mine and theirs else f"{'-':>8}"

    print(
        f"\n{args.events} events in one session, {args.sessions} sessions of one user, "
        f"pages of {args.page_size}; milliseconds; ratio = ADK / ours"
    )
    header = (
        f"{'figure':<40} {'n':>5} {'ours p50':>9} {'ours p95':>9} {'ADK p50':>9} {'ADK p95':>9} "
        f"{'ratio50':>8} {'ratio95':>8}  bar"
    )
    print(header)
    print("-" * len(header))
    for name, label, bar in COMPARED + OURS_ONLY:
        mine, theirs = ours.get(name), adk.get(name)
        print(
            f"{label:<40} {mine['n']:>5} {ms(mine, 'p50_ms')} {ms(mine, 'p95_ms')} "
            f"{ms(theirs, 'p50_ms')} {ms(theirs, 'p95_ms')} "
            f"{ratio('p50_ms', mine, theirs)} {ratio('p95_ms', mine, theirs)}  {bar}"
        )
    mine = results["concurrency"]["ours"]
    print(
        f"\nours: {args.writers} writer threads x {args.writer_events} events, one session: "
        f"{mine['stored']}/{mine['attempted']} stored in {mine['seconds']:.2f} s "
        f"({mine['stored'] / mine['seconds']:.0f} events/s); sequence contiguous: "
        f"{mine['contiguous']}; each writer in order: {mine['each_writer_in_order']}; "
        f"every state key kept: {mine['state_keys_kept']}; errors: {len(mine['errors'])}"
    )
    for error in mine["errors"][:5]:
        print(f"  {error}")
    theirs = results["concurrency"].get("ADK")
    if theirs:
        print(
            f"ADK:  {args.writers} writer tasks x {args.writer_events} events, one session: "
            f"{theirs['stored']}/{theirs['attempted']} stored, {theirs['stale_errors']} refused "
            f"as stale, in {theirs['seconds']:.2f} s"
        )


def django_on_new_database(*, server: str, database: str) -> tuple[str, str]:
    """Recreate ``database`` on ``server``, set Django up on it (production's DEBUG=false)
    and migrate; answers its URL for Django and for ADK's SQLAlchemy (asyncpg)."""
    django_url = f"{server}/{database}"
    print(f"Database {database} on {server}: dropping and recreating.", flush=True)
    database_recreate(server=server, name=database)
    os.environ["DATABASE_URL"] = django_url
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from chatapp.process import process_tune_gc

    call_command("migrate", verbosity=0)
    process_tune_gc()  # as the web server and workers do at start-up; the ADK side too
    return django_url, "postgresql+asyncpg://" + django_url.split("://", 1)[1]


def main(argv: list[str] | None = None) -> None:
    args = arguments_parse(argv)
    load_before = os.getloadavg()
    _, adk_url = django_on_new_database(server=args.server, database=args.database)
    from django.contrib.auth import get_user_model
    from django.db import connection

    from bench.ours_side import OursSide

    users = get_user_model().objects
    events_user, list_user, writers_user = (
        str(users.create_user(username=f"bench-{name}").pk)
        for name in ("events", "list", "writers")
    )
    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        server_version = cursor.fetchone()[0]

    ours = LocalSide(OursSide(page_size=args.page_size))
    sides = (
        [ours]
        if args.skip_adk
        else [RemoteSide(name="ADK", arguments=[f"--db-url={adk_url}"]), ours]
    )
    run = Run(sides)
    versions = {
        side.name: side.call(
            "setup", events_user=events_user, list_user=list_user, events=args.events
        )
        for side in sides
    }
    run.turns(
        "append_event",
        total=args.events,
        block=100,
        call=lambda side, start, stop: side.call("append", start=start, stop=stop),
    )
    run.turns(
        "create_session",
        total=args.sessions,
        block=500,
        call=lambda side, start, stop: side.call("create_sessions", start=start, stop=stop),
    )
    run.say("ANALYZE (both sides' tables)")
    run.warm_up("analyze")
    for figure, recent, expected, total, block in (
        ("get_session_recent20", 20, min(20, args.events), args.repeat, 10),
        ("get_session_all", None, args.events, args.repeat_all, 2),
    ):
        run.warm_up("get_session", recent=recent, repeat=2, expected=expected)
        run.turns(
            figure,
            total=total,
            block=block,
            call=lambda side, start, stop, recent=recent, expected=expected: side.call(
                "get_session", recent=recent, repeat=stop - start, expected=expected
            ),
        )
    run.say(f"list_sessions: {args.list_repeat} listings of {args.sessions} sessions per side")
    run.warm_up("list_all", expected=args.sessions)
    for side in sides:
        run.samples[side.name]["list_sessions_all"] = []
    for listing_number in range(1, args.list_repeat + 1):
        totals = []
        for side in sides:
            listing = side.call("list_all", expected=args.sessions)
            figures = run.samples[side.name]
            figures["list_sessions_all"].append(listing["total"])
            totals.append(f"{side.name} {listing['total'] * 1000:.0f} ms")
            if side is ours:
                pages = listing["pages"]
                figures.setdefault("list_sessions_page", []).extend(pages)
                figures.setdefault("list_sessions_deep_page", []).extend(
                    pages[len(pages) * 3 // 4 :]
                )
        run.say(f"list_sessions {listing_number}/{args.list_repeat} ({', '.join(totals)})")
    concurrency = {}
    for side in sides:
        run.say(f"{side.name}: {args.writers} writers x {args.writer_events} events, one session")
        concurrency[side.name] = side.call(
            "concurrency", user_id=writers_user, writers=args.writers, per_writer=args.writer_events
        )
    for side in sides:
        side.close()

    results = results_of(
        run=run,
        args=args,
        versions=versions,
        load_before=load_before,
        postgresql=server_version,
        concurrency=concurrency,
    )
    results_write(results, path=RESULTS_PATH)
    if "ADK" in versions:
        print(f"peer: {versions['ADK']}")
    report_print(results, args)
    print(f"\nFigures written to {RESULTS_PATH.relative_to(BASE_DIR)}.")


def results_of(
    *,
    run: Run,
    args: argparse.Namespace,
    versions: dict,
    load_before: tuple[float, float, float],
    postgresql: str | None = None,
    **more: Any,
) -> dict:
    """A run's figures (p50/p95 per side and figure) with the machine and arguments they were
    measured with, and ``more`` results as they are: what the JSON file keeps."""
    machine = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
    }
    if postgresql:
        machine["postgresql"] = postgresql
    return {
        "machine": machine,
        "arguments": vars(args),
        "versions": versions,
        "figures": {
            name: {figure: summary(samples) for figure, samples in figures.items()}
            for name, figures in run.samples.items()
        },
        **more,
    }


def results_write(results: dict, *, path: Path) -> None:
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(results, indent=2))
    print(f"\nmachine: {results['machine']}")


if __name__ == "__main__":
    main()
