"""Rate limits counted in Django's cache (fixed windows, and a sliding window for budgets
small enough to log), and the client address they count by.

The counters live in the cache so that every web process shares them when the cache is Redis
(with the local-memory cache each process counts on its own, which is right for the embedded
shape: there is only one process).

A big budget is taken from the shared counter a hundredth at a time: a process counts a
lease of that many down in its own memory and goes to the cache again when the lease is
spent (``WindowLeases``). The service-account API's budget (12,000 a minute) then costs one
round trip to Redis every 120 requests instead of one on each request's path, where it was
the largest part of an append's time after the store's own (``bench.remote_sessions``). No
more than the limit ever gets through; what a process leased and did not use is lost to the
others until the window ends, so with P processes up to P hundredths of the budget may go
unused. Budgets under 200 take one count at a time, every one from the cache, as before.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network
from typing import Any

from django.conf import settings
from django.core.cache import DEFAULT_CACHE_ALIAS, BaseCache, caches
from django.core.cache.backends.redis import RedisCache
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.http import HttpRequest

from core.outages import REDIS_ERRORS

logger = logging.getLogger(__name__)

# The wall clock, a name of its own so that tests can hold it inside one window.
_clock = time.time
# A budget is leased from the shared counter in parts this small, but never less than one.
LEASE_PART_OF_LIMIT = 100
_counters: BaseCache | None = None
_counters_redis: Any = None


def _counter_cache() -> BaseCache:
    """The default cache, one client for the whole process.

    ``django.core.cache.cache`` is one client per thread and per async task: under ASGI every
    request made its own, and with Redis opened a new connection (and its handshake) for its
    two counting commands. The counters are the same keys in the same cache either way.
    """
    global _counters
    if _counters is None:
        _counters = caches.create_connection(DEFAULT_CACHE_ALIAS)
    return _counters


@receiver(setting_changed)
def _counter_cache_forget(*, setting: str, **kwargs) -> None:
    global _counters, _counters_redis
    if setting == "CACHES":
        _counters = _counters_redis = None
        _process_leases.forget()


def window_count_exceeded(*, key: str, limit: int, window_seconds: int) -> bool:
    """Count one event under ``key``; True when it is more than ``limit`` in this window.

    Fixed windows: the window's counter is created when missing (a no-op when another
    process already did) and bumped atomically, so concurrent events on several sockets or
    processes are all counted (``_window_count_add``), a big budget a lease at a time
    (``WindowLeases``). (Synchronous on purpose: Django's ``aincr`` is a get then a set, which
    would lose counts between concurrent events.) Refused events count too, so hammering
    earns nothing. A ``limit`` of 0 or less means no limit; with the cache unreachable the
    limit is not enforced (logged), as what it guards needs only the database.
    """
    if limit <= 0:
        return False
    window = int(_clock() // window_seconds)
    try:
        return not _process_leases.take(
            key=f"{key}:{window}",
            limit=limit,
            # Twice the window, so the counter cannot expire while its window is current.
            timeout=2 * window_seconds,
            ends=(window + 1) * window_seconds,
        )
    except REDIS_ERRORS as error:
        logger.warning("%s rate limit not checked, no cache: %s", key.split(":")[0], error)
        return False


@dataclass
class _Lease:
    left: int
    ends: float


class WindowLeases:
    """One process's share of the windows' shared counters: what it has leased and not used.

    A window's budget of ``limit`` is leased ``limit // LEASE_PART_OF_LIMIT`` at a time (at
    least one): the shared counter is raised by the whole lease at once, and the lease's
    events are then counted here, under a lock, with no round trip. A lease that would take
    the counter past the limit is granted only the part under it, so all processes together
    never let more than ``limit`` through. Threads that find the lease spent at the same time
    each take one; every part granted is used. The cache is never reached under the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leases: dict[str, _Lease] = {}

    def take(self, *, key: str, limit: int, timeout: int, ends: float) -> bool:
        """One event of the window counted by ``key``; False when its budget is spent."""
        with self._lock:
            lease = self._leases.get(key)
            if lease is not None and lease.left > 0:
                lease.left -= 1
                return True
        part = max(1, limit // LEASE_PART_OF_LIMIT)
        count = _window_count_add(key=key, amount=part, timeout=timeout)
        granted = min(part, limit - (count - part))
        if granted <= 0:
            return False
        if granted > 1:
            with self._lock:
                lease = self._leases.get(key)
                if lease is None:
                    self._expired_forget()
                    lease = self._leases[key] = _Lease(left=0, ends=ends)
                lease.left += granted - 1
        return True

    def __len__(self) -> int:
        """How many windows this process holds a lease of."""
        return len(self._leases)

    def forget(self) -> None:
        """Drop every lease (the counters' cache changed)."""
        with self._lock:
            self._leases.clear()

    def _expired_forget(self) -> None:
        """Called under the lock: drop the leases of windows that have ended."""
        now = _clock()
        for key in [key for key, lease in self._leases.items() if lease.ends <= now]:
            del self._leases[key]


_process_leases = WindowLeases()


def _window_count_add(*, key: str, amount: int, timeout: int) -> int:
    """``amount`` more under the counter ``key`` of the counters' cache, made with
    ``timeout`` if missing; the count after it.

    With Redis, ``SET NX`` with the expiry and ``INCRBY`` go in one round trip (a pipeline,
    the same commands and stored value as the cache's ``add`` and ``incr``, which are a round
    trip each: on a loaded host every round trip to another process costs milliseconds, and
    an API request pays this on its path). Another cache: ``add`` then ``incr``.
    """
    cache = _counter_cache()
    if isinstance(cache, RedisCache):
        cache_key = cache.make_and_validate_key(key)
        pipeline = _counters_redis_client(cache).pipeline(transaction=False)
        pipeline.set(cache_key, 0, ex=timeout, nx=True)
        pipeline.incrby(cache_key, amount)
        _created, count = pipeline.execute()
        return count
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key, amount)
    except ValueError:
        # Evicted between add and incr (a full local-memory cache): start again.
        cache.set(key, amount, timeout=timeout)
        return amount


def _counters_redis_client(cache: RedisCache) -> Any:
    """One redis-py client for the counters, on the cache's own connection pool.

    The cache's ``get_client`` makes a client for each command, and making one sets up its
    table of some two hundred reply parsers: that cost more than the round trip to Redis.
    A client is safe to share between threads (each command takes a connection from the
    pool), so one serves the whole process; it writes where the cache writes.
    """
    global _counters_redis
    if _counters_redis is None:
        _counters_redis = cache._cache.get_client(write=True)
    return _counters_redis


# Atomic in Redis: forget the events of the log older than the window, refuse when the window
# holds ``limit`` of them, else log this one. KEYS[1] the log; ARGV now, window, limit, id.
_SLIDING_WINDOW_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1] - ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])))
return 1
"""
_sliding_lock = threading.Lock()


def sliding_window_count_exceeded(*, key: str, limit: int, window_seconds: int) -> bool:
    """Count one event under ``key``; True (and not counted) when the last ``window_seconds``
    already hold ``limit`` counted events, wherever the window starts.

    A fixed window let up to twice the limit through around its boundary (22 turns in a
    minute against 20); here each counted event is logged with its time, in one sorted set
    with Redis (changed atomically by a script, so every process shares it), in the cache
    under a process lock otherwise (the embedded shape's one process). The log holds at
    most ``limit`` times, so it suits small budgets only. A ``limit`` of 0 or less means no
    limit; with the cache unreachable the limit is not enforced (logged).
    """
    if limit <= 0:
        return False
    now = _clock()
    try:
        cache = _counter_cache()
        if isinstance(cache, RedisCache):
            take = _counters_redis_client(cache).register_script(_SLIDING_WINDOW_TAKE)
            cache_key = cache.make_and_validate_key(key)
            return not take(keys=[cache_key], args=[now, window_seconds, limit, uuid.uuid4().hex])
        with _sliding_lock:
            times = [at for at in cache.get(key, []) if at > now - window_seconds]
            if len(times) >= limit:
                return True
            cache.set(key, [*times, now], timeout=window_seconds)
            return False
    except REDIS_ERRORS as error:
        logger.warning("%s rate limit not checked, no cache: %s", key.split(":")[0], error)
        return False


def window_seconds_left(*, window_seconds: int) -> float:
    """Seconds until the current window of ``window_seconds`` ends (a refused count's wait)."""
    return window_seconds - _clock() % window_seconds


@functools.cache
def _trusted_networks(proxies: tuple[str, ...]) -> tuple[IPv4Network | IPv6Network, ...]:
    return tuple(ip_network(proxy, strict=False) for proxy in proxies)


def _trusted(address: str, networks: tuple[IPv4Network | IPv6Network, ...]) -> bool:
    try:
        ip = ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks)


def client_address(request: HttpRequest) -> str:
    """The client's address, as every per-address limit counts it (sign-up, the sign-in
    guard, the anonymous API rate): the connection's own address, unless it is one of the
    proxies of ``TRUSTED_PROXIES``; then the right-most ``X-Forwarded-For`` entry that is not
    one of them, which the last trusted proxy saw connect. Entries further left are the
    client's to forge, so they are never read past an untrusted one."""
    remote = request.META.get("REMOTE_ADDR", "")
    networks = _trusted_networks(tuple(settings.TRUSTED_PROXIES))
    if not networks or not _trusted(remote, networks):
        return remote
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
    hops = [entry.strip() for entry in forwarded.split(",") if entry.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, networks):
            return hop
    return hops[0] if hops else remote
