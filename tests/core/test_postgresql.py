"""The connection pool of core.postgresql (the suite itself runs without it, tests/conftest.py):
connections reused, and working again at once after PostgreSQL ended every connection it held
(as a restart does); and a connection a thread keeps, with or without the pool, replaced before
its next query once the server has ended it."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings
from django.db import connection

from core.postgresql.base import DatabaseWrapper

pytestmark = pytest.mark.django_db(transaction=True)

ALIAS = "pooled-test"


@pytest.fixture
def pooled(requires_postgres) -> Iterator[Callable[..., int]]:
    """Run one query on a connection of a pool as production configures it, from whichever
    thread calls it, and give the connection back; returns the server process id."""
    if not getattr(settings, "DATABASE_POOL", None):
        pytest.skip("DATABASE_POOL_MAX_SIZE=0: no pool configured")
    settings_dict = {
        **connection.settings_dict,
        "OPTIONS": {**connection.settings_dict["OPTIONS"], "pool": dict(settings.DATABASE_POOL)},
        "CONN_HEALTH_CHECKS": False,
    }
    wrappers: list[DatabaseWrapper] = []

    def query(barrier: threading.Barrier | None = None) -> int:
        wrapper = DatabaseWrapper(settings_dict, alias=ALIAS)
        wrappers.append(wrapper)
        try:
            with wrapper.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                if barrier is not None:
                    barrier.wait(timeout=10)
                return cursor.fetchone()[0]
        finally:
            wrapper.close()

    yield query
    wrappers[0].close_pool()


def _idle_connections_open(query, count: int) -> set[int]:
    """Have the pool open ``count`` connections (as many threads at once) and keep them idle."""
    barrier = threading.Barrier(count)
    with ThreadPoolExecutor(count) as threads:
        return set(threads.map(lambda _: query(barrier), range(count)))


def test_the_pool_keeps_its_connections_for_the_next_requests(pooled):
    first = _idle_connections_open(pooled, 4)
    again = _idle_connections_open(pooled, 4)

    assert len(first) == 4
    assert again == first, "the same four connections serve again, none is opened anew"


def test_after_the_server_ended_every_idle_connection_the_next_query_works(pooled):
    idle = _idle_connections_open(pooled, 4)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ANY(%s)",
            [list(idle)],
        )

    with ThreadPoolExecutor(1) as thread:
        answered_by = thread.submit(pooled).result()

    assert answered_by not in idle


def test_a_kept_connection_the_server_ended_is_replaced_before_the_next_query(requires_postgres):
    """As the database thread of a process keeps its connection between hops: after a restart
    its next query runs on a new connection instead of failing."""
    kept = DatabaseWrapper({**connection.settings_dict}, alias=ALIAS)
    try:
        with kept.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            first = cursor.fetchone()[0]
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s, 5000)", [first])

        with kept.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            answered_by = cursor.fetchone()[0]
    finally:
        kept.close()

    assert answered_by != first
