"""The per-user chat turn limit, a sliding minute counted in Django's cache (Redis when
``REDIS_URL`` is set, the local-memory cache of the embedded shape otherwise)."""

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from agents_app import rate_limits as chat_rate_limits
from agents_app.rate_limits import chat_turn_rate_limit_exceeded
from core import rate_limits


@pytest.fixture(autouse=True)
def own_counters(settings, monkeypatch):
    """Counters of this test only (even in a shared Redis), on a clock held mid-window."""
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
    }
    clock = {"now": 1_000_020.0}
    monkeypatch.setattr(rate_limits, "_clock", lambda: clock["now"])
    return clock


def test_turns_beyond_the_limit_are_refused():
    results = [chat_turn_rate_limit_exceeded(user_pk=1, limit=3) for _ in range(5)]

    assert results == [False, False, False, True, True]


def test_users_are_counted_apart():
    for _ in range(2):
        chat_turn_rate_limit_exceeded(user_pk=1, limit=2)

    assert chat_turn_rate_limit_exceeded(user_pk=1, limit=2) is True
    assert chat_turn_rate_limit_exceeded(user_pk=2, limit=2) is False


def test_the_next_minute_starts_a_new_count(own_counters):
    for _ in range(3):
        chat_turn_rate_limit_exceeded(user_pk=1, limit=2)

    own_counters["now"] += chat_rate_limits.TURN_WINDOW_SECONDS

    assert chat_turn_rate_limit_exceeded(user_pk=1, limit=2) is False


def test_no_minute_across_a_window_boundary_gets_more_than_the_limit_through(own_counters):
    """A fixed window let 20 turns through in its last seconds and 20 more in the next
    window's first: 22 or more in one minute against a limit of 20."""
    minute = chat_rate_limits.TURN_WINDOW_SECONDS
    own_counters["now"] = 1_000_000 * minute - 2
    before = [chat_turn_rate_limit_exceeded(user_pk=1, limit=20) for _ in range(20)]
    own_counters["now"] += 4
    after = [chat_turn_rate_limit_exceeded(user_pk=1, limit=20) for _ in range(2)]
    own_counters["now"] += minute - 4
    a_minute_later = chat_turn_rate_limit_exceeded(user_pk=1, limit=20)

    assert before.count(False) == 20
    assert after == [True, True]
    assert a_minute_later is False


def test_a_refused_turn_does_not_hold_the_next_one_back(own_counters):
    chat_turn_rate_limit_exceeded(user_pk=1, limit=2)
    own_counters["now"] += 30
    chat_turn_rate_limit_exceeded(user_pk=1, limit=2)
    refused = [chat_turn_rate_limit_exceeded(user_pk=1, limit=2) for _ in range(5)]
    own_counters["now"] += 30

    assert refused == [True] * 5
    assert chat_turn_rate_limit_exceeded(user_pk=1, limit=2) is False
    assert chat_turn_rate_limit_exceeded(user_pk=1, limit=2) is True


def test_a_limit_of_zero_means_no_limit():
    assert not any(chat_turn_rate_limit_exceeded(user_pk=1, limit=0) for _ in range(50))


def test_without_a_reachable_cache_turns_are_let_through(unreachable_cache, caplog):
    assert chat_turn_rate_limit_exceeded(user_pk=1, limit=1) is False
    assert chat_turn_rate_limit_exceeded(user_pk=1, limit=1) is False
    assert "chat-turns rate limit not checked, no cache" in caplog.text


def test_parallel_turns_of_one_user_never_get_more_than_the_limit_through():
    """Sockets on several processes start turns at the same moment: each is counted once."""
    barrier = threading.Barrier(24)

    def turn() -> bool:
        barrier.wait(timeout=30)
        return chat_turn_rate_limit_exceeded(user_pk=7, limit=10)

    with ThreadPoolExecutor(24) as threads:
        refused = list(threads.map(lambda _: turn(), range(24)))

    assert refused.count(False) == 10
