"""Per-user rate limits, counted in Django's cache.

The counters live in the cache so that every web process shares them when the
cache is Redis (with the local-memory cache each process counts on its own,
which is right for the embedded shape: there is only one process).
"""

from __future__ import annotations

import logging
import time

from django.core.cache import cache

from chatapp.outages import REDIS_ERRORS

logger = logging.getLogger(__name__)

TURN_WINDOW_SECONDS = 60

# The wall clock, a name of its own so that tests can hold it inside one window.
_clock = time.time


def chat_turn_rate_limit_exceeded(*, user_pk: int, limit: int) -> bool:
    """Count one chat turn of the user; True when it is more than ``limit`` this minute.

    Fixed one-minute windows: ``cache.add`` creates the window's counter (a
    no-op when another process already did) and ``cache.incr`` bumps it
    atomically, so concurrent turns of one user on several sockets or
    processes are all counted. (Synchronous on purpose: Django's ``aincr`` is
    a get then a set, which would lose counts between concurrent turns.)
    Refused turns count too, so hammering does not earn more turns.
    A ``limit`` of 0 or less means no limit; with the cache unreachable the limit is
    not enforced (logged), as the chat itself only needs the database.
    """
    if limit <= 0:
        return False
    window = int(_clock() // TURN_WINDOW_SECONDS)
    key = f"chat-turns:{user_pk}:{window}"
    # Twice the window, so the counter cannot expire while its window is current.
    timeout = 2 * TURN_WINDOW_SECONDS
    try:
        cache.add(key, 0, timeout=timeout)
        try:
            count = cache.incr(key)
        except ValueError:
            # Evicted between add and incr (a full local-memory cache): start again.
            cache.set(key, 1, timeout=timeout)
            count = 1
    except REDIS_ERRORS as error:
        # No shared counter to check against (Redis down): let the turn through rather
        # than refuse every user's chat while the database, which holds it, is fine.
        logger.warning("chat rate limit not checked, no cache: %s", error)
        return False
    return count > limit
