"""Graceful shutdown of a web process: take no new work, let the work under way finish for a
grace period, cut the rest short so it can record itself, then let the process go.

Work registers its task with ``work_track``; the project's ASGI module starts ``drain`` when
the server is asked to stop (SIGTERM). While draining, ``draining()`` is true: doors that
start work refuse it, and the readiness probe answers 503 so a load balancer sends new
clients elsewhere. What a task does when it is cut short is its own business: it is
cancelled with the message given to ``drain``, and awaited (briefly) so it can store what it
must before the process exits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

# How long tasks cut short at the end of the grace period get to record that they were.
CUT_SHORT_SECONDS = 5.0

_draining = False
_work: set[asyncio.Task] = set()
_after_drain: list[Callable[[], Awaitable[None]]] = []


def draining() -> bool:
    """Whether this process is shutting down and takes no new work."""
    return _draining


def work_track(task: asyncio.Task) -> None:
    """Count ``task`` as work under way, which a shutdown waits for, until it ends."""
    _work.add(task)
    task.add_done_callback(_work.discard)


def work_pending() -> list[asyncio.Task]:
    """Tracked tasks not finished yet."""
    return [task for task in _work if not task.done()]


def after_drain(callback: Callable[[], Awaitable[None]]) -> None:
    """Run ``callback`` once the work has finished or been cut short (e.g. close sockets with a
    code that tells clients to reconnect elsewhere). Kept for the process's life."""
    _after_drain.append(callback)


@dataclass(frozen=True)
class DrainReport:
    finished: int
    cut_short: int


async def drain(*, grace_seconds: float, cancel_message: str) -> DrainReport:
    """Refuse new work from now on, wait up to ``grace_seconds`` for the work under way, then
    cancel what is left with ``cancel_message`` and wait for it to record itself."""
    global _draining
    _draining = True
    pending = {task for task in _work if not task.done()}
    logger.warning(
        "shutting down: %d turns under way, waiting up to %s s", len(pending), grace_seconds
    )
    finished: set[asyncio.Task] = set()
    if pending:
        finished, pending = await asyncio.wait(pending, timeout=grace_seconds)
    for task in pending:
        task.cancel(cancel_message)
    if pending:
        await asyncio.wait(pending, timeout=CUT_SHORT_SECONDS)
    for callback in _after_drain:
        try:
            await callback()
        except Exception:
            logger.exception("shutdown step %r failed", callback)
    report = DrainReport(finished=len(finished), cut_short=len(pending))
    logger.warning("shut down: %d turns finished, %d cut short", report.finished, report.cut_short)
    return report
