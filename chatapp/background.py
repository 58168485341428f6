"""Dispatch of background work, the one door through which tasks are started.

With a broker (``BACKGROUND_TASKS=celery``) a task goes to Celery workers. In the
embedded mode there is no broker, yet a turn must still never wait for
background work, so the task runs on a small thread pool of this process,
through Celery's own ``apply`` so retries behave the same way. Either way the
task is only sent once the surrounding transaction has committed, so a worker
never looks for rows that are not visible yet.
"""

from __future__ import annotations

import json
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from celery import Task
from django.conf import settings
from django.db import connections, transaction

from chatapp.log_context import log_context_bind, log_context_clear, log_context_get
from chatapp.outages import BROKER_ERRORS

logger = logging.getLogger(__name__)

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()
_pending: set[Future] = set()
# How often the in-process runner reads the schedules again, so staff edits apply.
PERIODIC_REFRESH_SECONDS = 30.0


def _in_process_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="background")
        return _executor


def _run_in_process(task: Task, kwargs: dict[str, Any], log_context: dict[str, Any]) -> None:
    """Run ``task`` on a pool thread, which keeps no database connection between tasks.

    An idle pool thread holding connections would count against the
    database's limit and keep a test database from being dropped.
    """
    log_context_bind(**log_context)
    try:
        result = task.apply(kwargs=kwargs)
        if result.failed():
            logger.error("background task %s failed: %r", task.name, result.result)
    finally:
        log_context_clear()
        connections.close_all()


def task_headers() -> dict[str, Any]:
    """Message headers that carry this context's log ids to the worker that runs the task.

    A task's log lines then name the request, turn and user that caused it;
    ``chatapp.celery`` binds them when the task starts.
    """
    return {"log_context": log_context_get()}


def task_enqueue(*, task: Task, **kwargs: Any) -> None:
    """Start ``task`` with keyword arguments after the current transaction commits.

    Tasks take ids, never model instances, so the arguments must be JSON values.
    A broker that cannot take the task (Redis down) is logged, not raised: the
    request that asked for the work has committed and must still succeed, and
    work that matters is recorded in the database before it is sent (a memory
    job stays ``queued``), so the periodic sweeper sends it once the broker is back.
    """

    headers = task_headers()

    def send() -> None:
        if settings.BACKGROUND_TASKS == "celery":
            try:
                task.apply_async(kwargs=kwargs, headers=headers)
            except BROKER_ERRORS as error:
                logger.warning(
                    "task %s %s not enqueued, the broker is unavailable: %s",
                    task.name,
                    json.dumps(kwargs, sort_keys=True),
                    error,
                )
            return
        future = _in_process_executor().submit(
            _run_in_process, task, kwargs, headers["log_context"]
        )
        _pending.add(future)
        future.add_done_callback(_pending.discard)

    transaction.on_commit(send)


def background_pending_count() -> int:
    """In-process background tasks started and not finished yet (the embedded mode's queue)."""
    return len(_pending)


def background_wait_idle(timeout: float = 30.0) -> None:
    """Wait until in-process background work started so far has finished.

    For management commands and tests that need the embedded mode's effects to
    be visible before they go on; the web process never calls it.
    """
    for future in list(_pending):
        future.result(timeout=timeout)


def periodic_start() -> threading.Thread | None:
    """In the embedded mode, run the periodic tasks on a daemon thread.

    Celery beat does this job when there is a broker; without one the web
    process is the only process there is, so it keeps the schedule itself:
    the enabled ``PeriodicTask`` rows staff edit in the console, read again
    every ``PERIODIC_REFRESH_SECONDS`` (see ``chatapp.periodic``).
    Task modules are imported first, as a worker does at start, so every
    scheduled task is registered.
    Returns the thread, or None when beat is in charge or ``PERIODIC_IN_PROCESS`` is off.
    """
    if settings.BACKGROUND_TASKS != "inprocess" or not settings.PERIODIC_IN_PROCESS:
        return None
    from chatapp.celery import app
    from chatapp.periodic import periodic_due, periodic_entries

    app.loader.import_default_modules()
    stop = threading.Event()

    def loop() -> None:
        import time

        entries: dict = {}
        last_run: dict = {}
        refreshed = float("-inf")
        while not stop.wait(1.0):
            if time.monotonic() - refreshed >= PERIODIC_REFRESH_SECONDS:
                try:
                    entries = periodic_entries()
                finally:
                    connections.close_all()
                refreshed = time.monotonic()
            for name in periodic_due(entries=entries, last_run=last_run):
                task = app.tasks.get(name)
                if task is None:
                    logger.error("periodic task %s is not a registered task", name)
                    continue
                future = _in_process_executor().submit(_run_in_process, task, {}, {})
                _pending.add(future)
                future.add_done_callback(_pending.discard)

    thread = threading.Thread(target=loop, name="periodic", daemon=True)
    thread.start()
    return thread
