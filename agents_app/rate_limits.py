"""Per-user rate limits of the chat, counted in Django's cache (``core.rate_limits``)."""

from __future__ import annotations

from core.rate_limits import window_count_exceeded

TURN_WINDOW_SECONDS = 60


def chat_turn_rate_limit_exceeded(*, user_pk: int, limit: int) -> bool:
    """Count one chat turn of the user; True when it is more than ``limit`` this minute.

    Concurrent turns of one user on several sockets or processes are all counted, refused
    turns too. A ``limit`` of 0 or less means no limit; with the cache unreachable the limit
    is not enforced (logged), as the chat itself only needs the database.
    """
    return window_count_exceeded(
        key=f"chat-turns:{user_pk}", limit=limit, window_seconds=TURN_WINDOW_SECONDS
    )
