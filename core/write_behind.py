"""Rows that may reach the database a moment late: a loop's queued inserts in one round trip.

The service API writes an audit row for every request, and its own round trip would hold
the request, and the next one waiting for the same processor: on the two cores of
``bench.remote_sessions`` a row cost the process about as much as the rest of a read of 20
events less its store. Rows queued here with ``write_behind`` are written together, one
round trip per ``WRITE_BEHIND_SECONDS`` on each event loop (sooner when
``WRITE_BEHIND_MAX_ROWS`` wait), from the loop's own connections (``core.async_database``).
When the process exits (a SIGTERM, daphne's stop) what is still queued is written through
Django's connection. A process killed outright loses its queue: at most
``WRITE_BEHIND_SECONDS`` of rows.

With ``WRITE_BEHIND_SECONDS`` 0, or away from PostgreSQL, ``write_behind`` writes at once.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import weakref
from typing import Any

from django.conf import settings
from django.db import connection

from core import async_database

logger = logging.getLogger(__name__)

WRITE_BEHIND_MAX_ROWS = 200

Statement = tuple[str, list[Any]]


class _Queue:
    """One event loop's statements waiting for their round trip, the task that will send
    them, and the event that wakes it early."""

    def __init__(self) -> None:
        self.statements: list[Statement] = []
        self.sender: asyncio.Task | None = None
        self.wake = asyncio.Event()


_queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = weakref.WeakKeyDictionary()


async def write_behind(sql: str, params: list[Any]) -> None:
    """Run ``sql`` (an insert ``RETURNING`` its id: ``fetch_each`` reads every statement's
    rows; ``%s`` placeholders) within ``WRITE_BEHIND_SECONDS``, with the other statements
    this loop queued meanwhile; at once when write-behind is off. Errors of
    a late write are logged with how many rows it lost; those of an immediate one are the
    caller's."""
    delay = settings.WRITE_BEHIND_SECONDS
    if delay <= 0 or not async_database.available():
        await async_database.fetch_each([(sql, params)], repeatable=False)
        return
    loop = asyncio.get_running_loop()
    queue = _queues.get(loop)
    if queue is None:
        queue = _queues[loop] = _Queue()
    queue.statements.append((sql, params))
    if queue.sender is None:
        queue.sender = loop.create_task(_sender(queue, delay))
    elif len(queue.statements) >= WRITE_BEHIND_MAX_ROWS:
        queue.wake.set()


async def write_behind_flush() -> None:
    """Send what this loop has queued now, and wait until it is written."""
    queue = _queues.get(asyncio.get_running_loop())
    if queue is None or queue.sender is None:
        return
    queue.wake.set()
    await queue.sender


async def _sender(queue: _Queue, delay: float) -> None:
    """Waits ``delay`` (or until woken), then sends every statement queued until none is
    left, ``WRITE_BEHIND_MAX_ROWS`` a round trip."""
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(queue.wake.wait(), delay)
        while queue.statements:
            batch = queue.statements[:WRITE_BEHIND_MAX_ROWS]
            del queue.statements[:WRITE_BEHIND_MAX_ROWS]
            try:
                await async_database.fetch_each(batch, repeatable=False)
            except Exception:
                logger.exception("%d rows written behind were lost", len(batch))
    finally:
        queue.wake.clear()
        queue.sender = None


@atexit.register
def write_behind_at_exit() -> None:
    """Write what every loop still has queued, through Django's connection: called as the
    process exits, when its loops no longer run (from sync code only)."""
    statements = [statement for queue in _queues.values() for statement in queue.statements]
    for queue in _queues.values():
        queue.statements.clear()
    if not statements:
        return
    try:
        with connection.cursor() as cursor:
            for sql, params in statements:
                cursor.execute(sql, params)
    except Exception:
        logger.exception("%d rows written behind were lost at exit", len(statements))
