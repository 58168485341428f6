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
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from celery import Task
from celery.exceptions import Ignore
from django.conf import settings
from django.db import connections, transaction

from core.log_context import log_context_bind, log_context_clear, log_context_get
from core.outages import BROKER_ERRORS

logger = logging.getLogger(__name__)

_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()
_pending: set[Future] = set()
# Retries of in-process tasks waiting for their time (timers not yet fired).
_waiting: set[threading.Timer] = set()
_waiting_lock = threading.Lock()
# Set on a pool thread while it runs a task, so that ``task_retry`` knows the task runs in
# process (Celery's ``apply`` would otherwise run the retry at once, whatever its countdown).
_runner = threading.local()


def _in_process_executor() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="background")
        return _executor


def _run_in_process(
    task: Task, kwargs: dict[str, Any], log_context: dict[str, Any], retries: int = 0
) -> None:
    """Run ``task`` on a pool thread, which keeps no database connection between tasks,
    not even a closed one: each task connects as the settings say when it starts.

    An idle pool thread holding connections would count against the
    database's limit and keep a test database from being dropped; a closed one kept for the
    thread's life would reopen with the settings of whenever the thread first connected.
    """
    log_context_bind(**log_context)
    _runner.active = True
    try:
        result = task.apply(kwargs=kwargs, retries=retries)
        if result.failed():
            logger.error("background task %s failed: %r", task.name, result.result)
    finally:
        _runner.active = False
        log_context_clear()
        connections.close_all()
        for connection in connections.all(initialized_only=True):
            del connections[connection.alias]


def task_retry(task: Task, *, exc: Exception, countdown: float) -> Exception:
    """The exception a bound task raises to be run again in ``countdown`` seconds, which
    really wait: a Celery worker gets Celery's ``Retry``; the embedded mode's pool gets the
    run started by a timer after the countdown (Celery's ``apply`` would run a retry at once:
    six attempts in 130 ms), and ``Ignore`` ends this run (``exc`` itself once the task's
    ``max_retries`` are used, as Celery raises it). A task applied directly (a test,
    a management command) is retried at once, as Celery's ``apply`` does."""
    if not getattr(_runner, "active", False):
        logger.info("task %s: %s; retry in %.2fs", task.name, exc, countdown)
        return task.retry(exc=exc, countdown=countdown)
    if task.max_retries is not None and task.request.retries >= task.max_retries:
        return exc
    logger.info("task %s: %s; retry in %.2fs", task.name, exc, countdown)
    timer = threading.Timer(countdown, _retry_start)
    timer.args = (timer, task, dict(task.request.kwargs or {}), task.request.retries + 1)
    timer.kwargs = {"log_context": log_context_get()}
    timer.daemon = True
    with _waiting_lock:
        _waiting.add(timer)
    timer.start()
    return Ignore()


def _retry_start(
    timer: threading.Timer,
    task: Task,
    kwargs: dict[str, Any],
    retries: int,
    *,
    log_context: dict[str, Any],
) -> None:
    background_submit(task=task, kwargs=kwargs, log_context=log_context, retries=retries)
    with _waiting_lock:
        _waiting.discard(timer)


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
        background_submit(task=task, kwargs=kwargs, log_context=headers["log_context"])

    transaction.on_commit(send)


def background_submit(
    *, task: Task, kwargs: dict[str, Any], log_context: dict[str, Any], retries: int = 0
) -> None:
    """Run ``task`` now on the embedded mode's thread pool, counted as pending until it ends.

    For ``task_enqueue`` once the transaction has committed, for the embedded mode's
    periodic runner (``chatapp.periodic``), which has no transaction to wait for, and for a
    retry whose time has come (``retries``: the retries before it, as Celery counts them).
    """
    future = _in_process_executor().submit(_run_in_process, task, kwargs, log_context, retries)
    _pending.add(future)
    future.add_done_callback(_pending.discard)


def background_pending_count() -> int:
    """In-process background tasks started and not finished yet, or waiting for a retry (the
    embedded mode's queue)."""
    return len(_pending) + len(_waiting)


def background_wait_idle(timeout: float = 30.0) -> None:
    """Wait until in-process background work started so far has finished.

    For management commands and tests that need the embedded mode's effects to
    be visible before they go on; the web process never calls it.
    """
    deadline = time.monotonic() + timeout
    while _pending or _waiting:
        for timer in list(_waiting):
            timer.join(timeout=max(0.0, deadline - time.monotonic()))
        for future in list(_pending):
            future.result(timeout=max(0.0, deadline - time.monotonic()))
        if time.monotonic() >= deadline:
            raise TimeoutError("background work still pending")
