"""Heartbeats of running generation jobs: a job says "alive" in the cache while it runs.

A worker killed mid-job leaves its job ``running``; the broker hands the task out again only
after ``TASK_VISIBILITY_TIMEOUT_SECONDS`` (a quarter of an hour). The heartbeat lets the
periodic redispatch tell a live run from a dead one within a minute: a thread of the running
job renews a cache key every ``MEMORY_JOB_HEARTBEAT_SECONDS`` with an expiry of
``MISSED_BEATS`` of them, so the key outlives no run by more than that. The cache is shared by
every process (Redis), or, embedded, is the one process that both runs and sweeps the jobs.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import uuid
from collections.abc import Iterable, Iterator

from django.conf import settings
from django.core.cache import cache

from core.outages import REDIS_ERRORS

logger = logging.getLogger(__name__)

HEARTBEAT_KEY = "memory-job-heartbeat:{job_id}"
MISSED_BEATS = 3


def job_heartbeat_expiry_seconds() -> float:
    """How long after its last beat a job counts as dead."""
    return settings.MEMORY_JOB_HEARTBEAT_SECONDS * MISSED_BEATS


def job_heartbeat_beat(job_id: uuid.UUID | str) -> None:
    """Say ``job_id`` is alive for the next ``job_heartbeat_expiry_seconds``."""
    try:
        # Whole seconds: Redis keeps a key no shorter than that.
        timeout = math.ceil(job_heartbeat_expiry_seconds())
        cache.set(HEARTBEAT_KEY.format(job_id=job_id), 1, timeout=timeout)
    except REDIS_ERRORS as error:
        logger.warning("memory job %s: no heartbeat (%r)", job_id, error)


@contextlib.contextmanager
def job_heartbeat(*, job_id: uuid.UUID | str) -> Iterator[None]:
    """Beat for ``job_id`` from a thread of its own while the block runs, and stop at once
    after (the key is deleted: a finished job is no longer running anyway)."""
    stopped = threading.Event()

    def beat_until_stopped() -> None:
        while not stopped.wait(settings.MEMORY_JOB_HEARTBEAT_SECONDS):
            job_heartbeat_beat(job_id)

    job_heartbeat_beat(job_id)
    thread = threading.Thread(target=beat_until_stopped, name=f"heartbeat-{job_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopped.set()
        thread.join()
        with contextlib.suppress(*REDIS_ERRORS):
            cache.delete(HEARTBEAT_KEY.format(job_id=job_id))


def jobs_beating(*, job_ids: Iterable[uuid.UUID | str]) -> set[str] | None:
    """The ids (as strings) among ``job_ids`` whose heartbeat is alive; None when the cache
    cannot be read (then no run may be judged dead by its heartbeat)."""
    keys = {HEARTBEAT_KEY.format(job_id=job_id): str(job_id) for job_id in job_ids}
    if not keys:
        return set()
    try:
        found = cache.get_many(list(keys))
    except REDIS_ERRORS as error:
        logger.warning("memory job heartbeats unreadable: %r", error)
        return None
    return {keys[key] for key in found}
