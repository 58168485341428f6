"""Fixed-window counts shared through the cache: never more than the limit through, on one
process or several, a big budget taken from the shared count a hundredth at a time."""

from __future__ import annotations

import uuid

import pytest
from django.core.cache import caches

from core.rate_limits import WindowLeases, client_address, window_count_exceeded

WINDOW = 60


def _shared_count(key: str, now: float) -> int | None:
    """The window's count as another process reads it, on a connection of its own."""
    return caches.create_connection("default").get(f"{key}:{int(now // WINDOW)}")


def _hits_allowed(leases: WindowLeases, *, key: str, limit: int, hits: int, now: float) -> int:
    window = int(now // WINDOW)
    return sum(
        leases.take(
            key=f"{key}:{window}", limit=limit, timeout=2 * WINDOW, ends=(window + 1) * WINDOW
        )
        for _ in range(hits)
    )


@pytest.mark.parametrize("attempt", range(3))
def test_parallel_hits_never_get_more_than_the_limit_through(
    cache_backend, clock, concurrently, attempt
):
    """The count is one atomic increment per hit: 32 threads at once, 200 hits, a limit of 50:
    exactly 50 get through (DRF's list of times, read and written back, let more through)."""
    key = f"parallel-{uuid.uuid4().hex}"
    hits_per_thread = 200 // 32 + 1

    def hits() -> int:
        allowed = 0
        for _ in range(hits_per_thread):
            exceeded = window_count_exceeded(key=key, limit=50, window_seconds=3600)
            allowed += not exceeded
        return allowed

    assert sum(concurrently(32, hits)) == 50


def test_a_big_budget_is_taken_from_the_shared_count_a_hundredth_at_a_time(cache_backend, clock):
    key = f"big-{uuid.uuid4().hex}"

    def hit() -> bool:
        return window_count_exceeded(key=key, limit=1000, window_seconds=WINDOW)

    assert hit() is False
    assert _shared_count(key, clock[0]) == 10, "the first hit leases ten"
    assert not any(hit() for _ in range(9))
    assert _shared_count(key, clock[0]) == 10, "the lease's other nine reach no cache"
    assert hit() is False
    assert _shared_count(key, clock[0]) == 20


def test_a_small_budget_counts_every_hit_in_the_cache(cache_backend, clock):
    key = f"small-{uuid.uuid4().hex}"
    for _ in range(3):
        window_count_exceeded(key=key, limit=199, window_seconds=WINDOW)

    assert _shared_count(key, clock[0]) == 3


def test_processes_sharing_a_budget_get_exactly_the_limit_through(cache_backend, clock):
    """Two processes taking turns, each until refused: 1,005 in all, the last leases cut
    to what is left under the limit."""
    key = f"shared-{uuid.uuid4().hex}"
    first, second = WindowLeases(), WindowLeases()
    allowed = 0
    for _ in range(200):
        for process, hits in ((first, 3), (second, 7)):
            allowed += _hits_allowed(process, key=key, limit=1005, hits=hits, now=clock[0])

    assert allowed == 1005


def test_what_a_process_leased_and_did_not_use_waits_for_the_next_window(cache_backend, clock):
    key = f"stranded-{uuid.uuid4().hex}"
    idle, busy = WindowLeases(), WindowLeases()
    assert _hits_allowed(idle, key=key, limit=1000, hits=1, now=clock[0]) == 1

    assert _hits_allowed(busy, key=key, limit=1000, hits=1100, now=clock[0]) == 990
    assert _hits_allowed(idle, key=key, limit=1000, hits=20, now=clock[0]) == 9
    clock[0] += WINDOW
    assert _hits_allowed(busy, key=key, limit=1000, hits=1100, now=clock[0]) == 1000


@pytest.mark.parametrize("attempt", range(3))
def test_parallel_hits_on_a_big_budget_use_every_part_leased(
    cache_backend, clock, concurrently, attempt
):
    """32 threads of one process at once, 1,600 hits, a limit of 1,000: threads that find the
    lease spent together each lease a part, and no part is lost: with the hits that follow
    them, exactly 1,000 through."""
    key = f"parallel-big-{uuid.uuid4().hex}"

    def hits() -> int:
        return sum(
            not window_count_exceeded(key=key, limit=1000, window_seconds=WINDOW) for _ in range(50)
        )

    together = sum(concurrently(32, hits))
    after = sum(
        not window_count_exceeded(key=key, limit=1000, window_seconds=WINDOW) for _ in range(20)
    )

    assert together + after == 1000


def test_a_new_counters_cache_drops_the_leases(settings, cache_backend, clock):
    key = f"moved-{uuid.uuid4().hex}"
    window_count_exceeded(key=key, limit=1000, window_seconds=WINDOW)
    settings.CACHES = {
        "default": {
            **settings.CACHES["default"],
            "KEY_PREFIX": f"throttle-test-{uuid.uuid4().hex}",
        }
    }

    window_count_exceeded(key=key, limit=1000, window_seconds=WINDOW)

    assert _shared_count(key, clock[0]) == 10, "the new cache was asked, not the old lease"


def test_leases_of_ended_windows_are_dropped(cache_backend, clock):
    keys = [f"ended-{uuid.uuid4().hex}" for _ in range(2)]
    leases = WindowLeases()
    _hits_allowed(leases, key=keys[0], limit=1000, hits=1, now=clock[0])
    clock[0] += WINDOW

    _hits_allowed(leases, key=keys[1], limit=1000, hits=1, now=clock[0])

    assert len(leases) == 1


def test_refused_hits_count_too(cache_backend, clock):
    key = f"refused-{uuid.uuid4().hex}"
    assert [window_count_exceeded(key=key, limit=2, window_seconds=WINDOW) for _ in range(4)] == [
        False,
        False,
        True,
        True,
    ]
    assert _shared_count(key, clock[0]) == 4


PROXY = "10.0.0.1"


@pytest.mark.parametrize(
    ("trusted", "remote", "forwarded", "counted"),
    [
        ([], "198.51.100.7", "203.0.113.9", "198.51.100.7"),
        ([PROXY], "198.51.100.7", "203.0.113.9", "198.51.100.7"),
        ([PROXY], PROXY, "6.6.6.6, 203.0.113.9", "203.0.113.9"),
        (["10.0.0.0/8"], PROXY, "6.6.6.6, 203.0.113.9, 10.0.0.2", "203.0.113.9"),
        ([PROXY], PROXY, "not-an-address, 203.0.113.9", "203.0.113.9"),
        ([PROXY], PROXY, "", PROXY),
        (["10.0.0.0/8"], PROXY, "10.0.0.3", "10.0.0.3"),
    ],
)
def test_the_client_is_the_right_most_address_no_trusted_proxy_has(
    rf, settings, trusted, remote, forwarded, counted
):
    settings.TRUSTED_PROXIES = trusted
    request = rf.get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)

    assert client_address(request) == counted
