"""Fixtures of the rate limits' tests: the counters' cache on each backend, a clock held
still, and threads released at the same moment."""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from core import rate_limits

REDIS_URL = os.environ.get("REDIS_URL", "")


@pytest.fixture(params=["locmem", "redis"])
def cache_backend(request, settings):
    """Each test on both cache backends, with counters of its own (even in a shared Redis)."""
    prefix = f"throttle-test-{uuid.uuid4().hex}"
    if request.param == "locmem":
        backend = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": prefix}
    else:
        if not REDIS_URL:
            pytest.skip("needs REDIS_URL; runs in CI's PostgreSQL + Redis pass")
        backend = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    settings.CACHES = {"default": {**backend, "KEY_PREFIX": prefix}}
    return request.param


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    """The rate limits' clock, held still (mid-window of every window length the tests use)
    and moved on by the test: ``clock[0]``."""
    now = [1_800_000_000.0]
    monkeypatch.setattr(rate_limits, "_clock", lambda: now[0])
    return now


@pytest.fixture
def concurrently() -> Callable[[int, Callable], list]:
    """``concurrently(count, call)``: ``call()`` from ``count`` threads released at the same
    moment; their results."""

    def run(count: int, call: Callable) -> list:
        barrier = threading.Barrier(count)

        def released():
            barrier.wait(timeout=30)
            return call()

        with ThreadPoolExecutor(count) as threads:
            return list(threads.map(lambda _: released(), range(count)))

    return run
