"""Worker heartbeats: each Celery worker says "alive" in Redis every few seconds.

Readiness (``/readyz``) counts the workers heard from recently instead of
asking them (``celery inspect ping`` waits for replies from every worker, a
second or more, and none at all while the broker is busy). The heartbeats
sit in one sorted set, worker name -> last time, so counting the live ones is
a single range query however many workers there are; entries of workers that
vanished without a goodbye drop out after ``WORKER_HEARTBEAT_INTERVAL_SECONDS``
times ``MISSED_BEATS``.

The beat comes from a thread of the worker's main process, not from a task,
so a worker busy with long jobs (or running the solo pool) still reports.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings

from core.redis_clients import redis_client

logger = logging.getLogger(__name__)

MISSED_BEATS = 3


def _key() -> str:
    return f"{settings.CACHE_KEY_PREFIX}:worker-heartbeats"


def _expiry_seconds() -> float:
    return settings.WORKER_HEARTBEAT_INTERVAL_SECONDS * MISSED_BEATS


def worker_heartbeat_publish(*, worker: str) -> None:
    """Record that ``worker`` is alive now, and forget workers silent for too long."""
    now = time.time()
    client = redis_client(settings.REDIS_URL)
    with client.pipeline() as pipeline:
        pipeline.zadd(_key(), {worker: now})
        pipeline.zremrangebyscore(_key(), "-inf", now - _expiry_seconds())
        pipeline.expire(_key(), int(_expiry_seconds()) + 1)
        pipeline.execute()


def worker_heartbeat_remove(*, worker: str) -> None:
    """Forget ``worker`` at once (it is shutting down cleanly)."""
    redis_client(settings.REDIS_URL).zrem(_key(), worker)


def workers_alive() -> list[str]:
    """Names of the workers heard from within the expiry window, oldest beat first."""
    now = time.time()
    names = redis_client(settings.REDIS_URL).zrangebyscore(_key(), now - _expiry_seconds(), "+inf")
    return [name.decode() for name in names]


class WorkerHeartbeat:
    """A daemon thread publishing ``worker``'s heartbeat until ``stop``."""

    def __init__(self, *, worker: str) -> None:
        self.worker = worker
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-heartbeat", daemon=True)

    def start(self) -> WorkerHeartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop beating and say goodbye, so readiness stops counting this worker at once."""
        self._stop.set()
        self._thread.join(timeout=settings.WORKER_HEARTBEAT_INTERVAL_SECONDS + 5)
        try:
            worker_heartbeat_remove(worker=self.worker)
        except Exception:
            logger.warning("could not remove the heartbeat of %s", self.worker, exc_info=True)

    def _run(self) -> None:
        while True:
            try:
                worker_heartbeat_publish(worker=self.worker)
            except Exception:
                # Redis is away: the next beat tries again; readiness shows the gap.
                logger.warning("worker heartbeat failed", exc_info=True)
            if self._stop.wait(settings.WORKER_HEARTBEAT_INTERVAL_SECONDS):
                return
