"""``python -m bench.scale``: fill, measure, report (see ``bench.scale``)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import sql

import bench.scale

BASE_DIR = Path(__file__).resolve().parents[2]
RESULTS_PATH = BASE_DIR / "build" / "bench-scale.json"
PLOT_PATH = BASE_DIR / "docs" / "bench-scale.png"
STEP_SIZES = {"k": 1_000, "M": 1_000_000}


def step_events(name: str) -> int:
    """'10k' -> 10,000; '1M' -> 1,000,000."""
    try:
        return int(float(name[:-1]) * STEP_SIZES[name[-1]]) if name[-1] in STEP_SIZES else int(name)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a step is a count such as 10k or 1M, not {name!r}"
        ) from None


def arguments_parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=bench.scale.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="chatapp_scale_bench")
    parser.add_argument("--steps", default="10k,1M,10M", help="comma-separated event counts")
    parser.add_argument("--label", default="current", help="the run's name in the JSON and plot")
    parser.add_argument("--repeat", type=int, default=200, help="timed calls of the quick reads")
    parser.add_argument(
        "--figures",
        default="store,search,turn,delete,ttl,generation",
        help="the groups of figures to measure (bench.scale.measures.GROUPS)",
    )
    parser.add_argument("--ttl-rounds", type=int, default=5, help="TTL cleanup rounds a step")
    parser.add_argument("--fresh", action="store_true", help="drop the database first")
    parser.add_argument("--remeasure", action="store_true", help="measure steps already measured")
    parser.add_argument("--fill-only", action="store_true", help="fill the steps, measure none")
    parser.add_argument("--workers", type=int, default=2, help="connections writing blocks at once")
    parser.add_argument(
        "--nice",
        action="store_true",
        help="fill at nice 19 (this process and its database backends); measure at normal priority",
    )
    args = parser.parse_args(argv)
    args.steps = [(name, step_events(name)) for name in args.steps.split(",") if name]
    args.figures = [group for group in args.figures.split(",") if group]
    return args


def progress(message: str) -> None:
    sys.stderr.write(f"\r{message[:100]:<100}")
    sys.stderr.flush()


def database_ensure(server: str, name: str, *, fresh: bool) -> None:
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        if fresh:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def counts(database: psycopg.Connection, tables) -> dict[str, int]:
    """Rows of the main tables (estimates from the statistics, just refreshed by ANALYZE)."""
    names = {
        "events": tables.events,
        "sessions": tables.sessions,
        "users": tables.users,
        "memories": tables.memories,
        "memory_sources": tables.sources,
        "memory_revisions": tables.revisions,
        "generation_jobs": tables.jobs,
    }
    with database.cursor() as cursor:
        found = {}
        for key, table in names.items():
            cursor.execute("SELECT reltuples::bigint FROM pg_class WHERE relname = %s", [table])
            found[key] = max(0, cursor.fetchone()[0])
        cursor.execute("SELECT pg_database_size(current_database())")
        found["database_bytes"] = cursor.fetchone()[0]
    database.commit()
    return found


@contextlib.contextmanager
def niced(*processes: int, enabled: bool) -> Iterator[None]:
    """Run the block with ``processes`` at nice 19, then put back their priorities: the fill
    yields the machine to others, while a measurement at nice 19 on a busy machine would time
    the other work (a niced process gets a sliver of a busy core)."""
    if not enabled:
        yield
        return
    before = {pid: os.getpriority(os.PRIO_PROCESS, pid) for pid in processes}
    for pid in processes:
        os.setpriority(os.PRIO_PROCESS, pid, 19)
    try:
        yield
    finally:
        for pid, priority in before.items():
            os.setpriority(os.PRIO_PROCESS, pid, priority)


def machine_state() -> dict[str, object]:
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"uptime": uptime, "load_average": os.getloadavg(), "at": time.time()}


def main(argv: list[str] | None = None) -> None:
    args = arguments_parse(argv)
    logging.disable(logging.INFO)
    database_ensure(args.server, args.database, fresh=args.fresh)
    url = f"{args.server}/{args.database}"
    os.environ.update(
        {"DATABASE_URL": url, "DEBUG": "false", "DJANGO_SETTINGS_MODULE": "chatapp.settings"}
    )
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from bench.scale import fill, loading, measures, report, subjects
    from chatapp.process import process_tune_gc

    settings.BACKGROUND_TASKS = "inprocess"
    progress("migrating")
    call_command("migrate", verbosity=0)
    tables = fill.Tables.of_models()
    database = psycopg.connect(url)
    with database.cursor() as cursor:
        progress_rows = fill.Progress(cursor)
        fill_started = progress_rows.get("fill_started")
        if not fill_started:
            fill_started = int(time.time())
            progress_rows.add("fill_started", fill_started)
        database.commit()
    subjects.subjects_create(database, tables, fill_started=fill_started)
    subject = subjects.subjects_get(database)
    process_tune_gc()
    writers = [psycopg.connect(url) for _ in range(args.workers)]
    for writer in writers:
        loading.fill_connection_prepare(writer)
    writer_pids = [writer.info.backend_pid for writer in writers]

    results = report.results_load(RESULTS_PATH)
    run = results["runs"].setdefault(args.label, {"steps": {}})
    for name, target in args.steps:
        with niced(os.getpid(), *writer_pids, enabled=args.nice):
            loading.background_fill(
                writers, tables, target_events=target, fill_started=fill_started, report=progress
            )
        step = run["steps"].get(name)
        groups = [
            group
            for group in args.figures
            if args.remeasure
            or step is None
            or not set(measures.GROUPS[group]) <= set(step["figures"])
        ]
        if args.fill_only or not groups:
            continue
        progress(f"step {name}: ANALYZE")
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        subjects.transients_clear(subject)
        step = run["steps"].setdefault(name, {"figures": {}})
        step.update(
            counts=counts(database, tables),
            machine_before=machine_state(),
            commit=subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                cwd=BASE_DIR,
                capture_output=True,
                text=True,
            ).stdout.strip(),
        )
        results["machine"] = {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "postgresql": connection.pg_version,
        }
        for group in groups:
            progress(f"step {name}: measuring {group}")
            step["figures"].update(
                measures.group_measure(
                    group,
                    database,
                    tables,
                    subject,
                    repeat=args.repeat,
                    ttl_rounds=args.ttl_rounds,
                )
            )
            step["machine_after"] = machine_state()
            report.results_save(RESULTS_PATH, results)
        sys.stderr.write("\n")
        print(
            f"step {name}: {step['counts']['events']:,} events; {step['machine_before']['uptime']}"
        )
        print("\n".join(report.table_lines(run)))
        report.plot(results, PLOT_PATH)
    for opened in (database, *writers):
        opened.close()
    sys.stderr.write("\n")
    print(f"Figures in {RESULTS_PATH.relative_to(BASE_DIR)}, plot in docs/{PLOT_PATH.name}.")


if __name__ == "__main__":
    main()
