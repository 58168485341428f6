"""Redis clients for probes, heartbeats and metrics, one pool per URL and process."""

from __future__ import annotations

from functools import lru_cache

import redis

# A probe must answer quickly even when Redis does not: short timeouts, no retries.
PROBE_TIMEOUT_SECONDS = 2.0


@lru_cache(maxsize=8)
def redis_client(url: str) -> redis.Redis:
    """A client for ``url``; its pool reconnects by itself after Redis comes back."""
    return redis.Redis.from_url(
        url,
        socket_timeout=PROBE_TIMEOUT_SECONDS,
        socket_connect_timeout=PROBE_TIMEOUT_SECONDS,
        retry_on_timeout=False,
        health_check_interval=30,
    )
