"""Rate limits of the REST API: one budget per signed-in user, one per anonymous address.

DRF's throttles count in Django's default cache, which is Redis when
``REDIS_URL`` is set, so every web process shares one count per user. The
rates are read from settings on each request (DRF's own classes bind them at
import), so they come from the environment and can change in tests. A refused
request answers 429 with a JSON ``detail`` and a ``Retry-After`` header.
"""

from __future__ import annotations

import logging

from django.conf import settings
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from chatapp.outages import REDIS_ERRORS

logger = logging.getLogger(__name__)


class _OutageTolerantThrottle(SimpleRateThrottle):
    """With the cache unreachable (Redis down) there is no shared count to check: the
    request goes through (logged) rather than the whole API answering 500 while the
    database, which serves it, is fine."""

    def allow_request(self, request, view) -> bool:
        try:
            return super().allow_request(request, view)
        except REDIS_ERRORS as error:
            logger.warning("API rate limit not checked, no cache: %s", error)
            return True


class APIUserRateThrottle(_OutageTolerantThrottle, UserRateThrottle):
    """Requests per signed-in user (anonymous ones by address), ``API_THROTTLE_USER_RATE``."""

    def get_rate(self) -> str | None:
        return settings.API_THROTTLE_USER_RATE or None


class APIAnonRateThrottle(_OutageTolerantThrottle, AnonRateThrottle):
    """Requests per anonymous client address, ``API_THROTTLE_ANON_RATE``."""

    def get_rate(self) -> str | None:
        return settings.API_THROTTLE_ANON_RATE or None
