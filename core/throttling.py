"""Rate limits of the REST API: one budget per signed-in user, one per anonymous address.

They count with ``core.rate_limits`` in Django's default cache, which is Redis when
``REDIS_URL`` is set, so every web process shares one count per user: ``cache.add`` (Redis
``SET NX`` with an expiry: the window's counter is made once) and ``cache.incr`` (Redis
``INCRBY``), so concurrent requests each get a number of their own and no more than the limit
get through (a budget of 200 or more is taken from the count a hundredth at a time:
``core.rate_limits.WindowLeases``). DRF's own throttles read a list of times and write it
back, which lost counts under concurrency: 16 clients at once got 781 requests through a
limit of 600.

The REST API's rates are read from settings on each request (DRF's own classes bind them at
import), so they come from the environment and can change in tests. A refused request
answers 429 with a JSON ``detail`` and a ``Retry-After`` header.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from core.rate_limits import client_address, window_count_exceeded, window_seconds_left


class _CountingThrottle(SimpleRateThrottle):
    """DRF's throttle interface over ``core.rate_limits.window_count_exceeded``: one atomic
    count per request in fixed windows aligned on the clock; a refused request waits for the
    next window. With the cache unreachable (Redis down) there is no shared count to check:
    the request goes through (logged) rather than the whole API answering 500 while the
    database, which serves it, is fine."""

    def allow_request(self, request, view) -> bool:
        if self.rate is None:
            return True
        key = self.get_cache_key(request, view)
        if key is None:
            return True
        return not window_count_exceeded(
            key=key, limit=self.num_requests, window_seconds=self.duration
        )

    def wait(self) -> float:
        return window_seconds_left(window_seconds=self.duration)

    def get_ident(self, request) -> str:
        """The client's address as every per-address limit counts it (``TRUSTED_PROXIES``)."""
        return client_address(request)


class APIUserRateThrottle(_CountingThrottle, UserRateThrottle):
    """Requests per signed-in user (anonymous ones by address), ``API_THROTTLE_USER_RATE``."""

    def get_rate(self) -> str | None:
        return settings.API_THROTTLE_USER_RATE or None


class APIAnonRateThrottle(_CountingThrottle, AnonRateThrottle):
    """Requests per anonymous client address, ``API_THROTTLE_ANON_RATE``."""

    def get_rate(self) -> str | None:
        return settings.API_THROTTLE_ANON_RATE or None


class APIServiceAccountRateThrottle(_CountingThrottle, UserRateThrottle):
    """Requests per service-account API key, ``API_THROTTLE_SERVICE_ACCOUNT_RATE``: a backend
    speaks for many end users, so its budget is its own."""

    scope = "service_account"

    def get_rate(self) -> str | None:
        return settings.API_THROTTLE_SERVICE_ACCOUNT_RATE or None
