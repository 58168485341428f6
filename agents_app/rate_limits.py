"""Per-user rate limits of the chat, counted in Django's cache (``core.rate_limits``)."""

from __future__ import annotations

from core.rate_limits import sliding_window_count_exceeded

TURN_WINDOW_SECONDS = 60


def chat_turn_rate_limit_exceeded(*, user_pk: int, limit: int) -> bool:
    """Count one chat turn of the user; True when ``limit`` turns already started in the last
    minute (a sliding minute: never more than ``limit`` in any 60 seconds).

    Concurrent turns of one user on several sockets or processes are all counted; a refused
    turn is not, and is let through once the oldest counted one is a minute old. A ``limit``
    of 0 or less means no limit; with the cache unreachable the limit is not enforced
    (logged), as the chat itself only needs the database.
    """
    return sliding_window_count_exceeded(
        key=f"chat-turns:{user_pk}", limit=limit, window_seconds=TURN_WINDOW_SECONDS
    )
