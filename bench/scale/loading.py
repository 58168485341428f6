"""Running the fill fast: blocks over parallel connections, secondary indexes built once.

A step's blocks are planned before any is written: block ``n`` is always the same user with the
same sessions (``fill.block_insert``), and a step holds the first blocks whose events reach
its target, so the rows of a step do not depend on how many connections wrote them or where an
earlier run stopped. Each block commits with a row in ``bench_scale_blocks``; a resumed fill
writes the planned blocks that have none.

While a step fills, the tables' secondary indexes (not unique, not primary keys: the full-text
index on events' texts among them) are dropped and then built again from their definitions,
which ``bench_scale_dropped_indexes`` keeps until each is back: building an index over the rows
once costs a fraction of updating it row by row (the events' full-text GIN index alone cut the
fill from 1,800 to 4,000 events a second). Measurements always see every index, and ANALYZE
runs after the build. Fill connections commit without waiting for the WAL flush
(``synchronous_commit = off``, a crash loses the last blocks, which a resume writes again) and
skip the foreign-key triggers (``session_replication_role = replica``, superuser): the rows
are generated consistent with their keys, and the constraints stay defined.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

import psycopg

from bench.scale import fill

DROPPED = "bench_scale_dropped_indexes"
BLOCKS = "bench_scale_blocks"
DROPPED_CREATE = f"CREATE TABLE IF NOT EXISTS {DROPPED} (name text PRIMARY KEY, definition text)"
INDEX_BUILD_MEMORY = "512MB"


def fill_connection_prepare(connection: psycopg.Connection) -> None:
    """Set a connection up for bulk writing (see the module's docstring)."""
    connection.execute("SET synchronous_commit = off")
    connection.execute("SET session_replication_role = replica")
    connection.commit()


def block_events(block: int) -> int:
    """How many events block ``block`` holds, without writing it."""
    return sum(fill.session_lengths(random.Random(block), fill.SESSIONS_PER_USER))


def blocks_planned(*, done: dict[int, int], other_events: int, target_events: int) -> list[int]:
    """The blocks still to write so that the events reach ``target_events``: the first blocks,
    in order, whose events and ``other_events`` (the subjects') reach it, less those ``done``."""
    planned, total, block = [], other_events, 0
    while total < target_events:
        total += done.get(block) or block_events(block)
        if block not in done:
            planned.append(block)
        block += 1
    return planned


def indexes_drop(connection: psycopg.Connection, *, tables: Sequence[str]) -> None:
    """Drop the secondary indexes of ``tables``, keeping their definitions in one transaction
    with the drops."""
    with connection.cursor() as cursor:
        cursor.execute(DROPPED_CREATE)
        cursor.execute(
            "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i"
            " WHERE i.indrelid = ANY(%s::regclass[]) AND NOT i.indisunique AND NOT i.indisprimary",
            [list(tables)],
        )
        for name, definition in cursor.fetchall():
            cursor.execute(f"INSERT INTO {DROPPED} VALUES (%s, %s)", [name, definition])
            cursor.execute(f"DROP INDEX {name}")
    connection.commit()


def indexes_restore(
    connections: Sequence[psycopg.Connection], *, report: Callable[[str], None]
) -> None:
    """Build every dropped index again, the GIN ones first (the longest), one per connection at
    a time; each build commits with the removal of its definition."""
    first = connections[0]
    with first.cursor() as cursor:
        cursor.execute(DROPPED_CREATE)
        cursor.execute(
            f"SELECT name, definition FROM {DROPPED}"
            " ORDER BY definition ILIKE '% USING gin %' DESC, name"
        )
        pending = cursor.fetchall()
    first.commit()
    if not pending:
        return
    lock, total, started = threading.Lock(), len(pending), time.monotonic()

    def build(connection: psycopg.Connection) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"SET maintenance_work_mem = '{INDEX_BUILD_MEMORY}'")
            while True:
                with lock:
                    if not pending:
                        return
                    name, definition = pending.pop(0)
                cursor.execute(definition)
                cursor.execute(f"DELETE FROM {DROPPED} WHERE name = %s", [name])
                connection.commit()
                with lock:
                    report(
                        f"indexes: {name} built, {total - len(pending)}/{total} started,"
                        f" {time.monotonic() - started:,.0f} s"
                    )

    _run_all(build, connections, pending=pending)


def _run_all(
    work: Callable[[psycopg.Connection], None],
    connections: Sequence[psycopg.Connection],
    *,
    pending: list,
) -> None:
    """Run ``work`` on each connection in a thread of its own until ``pending`` is empty; on the
    first error (or an interrupt) empty it, so the others stop after what they are writing."""
    with ThreadPoolExecutor(max_workers=len(connections)) as pool:
        futures = [pool.submit(work, connection) for connection in connections]
        try:
            for future in as_completed(futures):
                future.result()
        except BaseException:
            pending.clear()
            raise


def background_fill(
    connections: Sequence[psycopg.Connection],
    tables: fill.Tables,
    *,
    target_events: int,
    fill_started: float,
    report: Callable[[str], None],
) -> int:
    """Add the blocks that bring the events to ``target_events``, over ``connections`` (prepared
    by ``fill_connection_prepare``) at once, with secondary indexes dropped while it runs and
    built again after; returns the events stored.

    Timestamps count back from ``fill_started``, the time of the fill's first run, so a resumed
    fill writes what an unbroken one would have.
    """
    first = connections[0]
    with first.cursor() as cursor:
        progress = fill.Progress(cursor)
        cursor.execute(f"CREATE TABLE IF NOT EXISTS {BLOCKS} (block int PRIMARY KEY, events int)")
        cursor.execute(f"SELECT block, events FROM {BLOCKS}")
        done = dict(cursor.fetchall())
        events = progress.get("events")
    first.commit()
    pending = blocks_planned(
        done=done, other_events=events - sum(done.values()), target_events=target_events
    )
    if pending:
        indexes_drop(
            first,
            tables=[
                tables.events,
                tables.sessions,
                tables.session_state,
                tables.memories,
                tables.sources,
                tables.revisions,
                tables.jobs,
                tables.watermarks,
            ],
        )
    lock, started, at_start = threading.Lock(), time.monotonic(), events

    def write(connection: psycopg.Connection) -> None:
        nonlocal events
        with connection.cursor() as cursor:
            progress = fill.Progress(cursor)
            while True:
                with lock:
                    if not pending:
                        return
                    block = pending.pop(0)
                written = fill.block_insert(cursor, tables, block=block, now=fill_started)
                cursor.execute(f"INSERT INTO {BLOCKS} VALUES (%s, %s)", [block, written])
                progress.add("events", written)
                connection.commit()
                with lock:
                    events += written
                    elapsed = time.monotonic() - started
                    rate = (events - at_start) / elapsed if elapsed else 0.0
                    eta = (target_events - events) / rate if rate else 0.0
                    report(
                        f"fill: {events:,}/{target_events:,} events, block {block:,},"
                        f" {rate:,.0f} events/s, {eta / 60:,.1f} min left"
                    )

    _run_all(write, connections, pending=pending)
    indexes_restore(connections, report=report)
    return events
