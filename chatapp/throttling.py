"""Rate limits of the REST API: one budget per signed-in user, one per anonymous address.

DRF's throttles count in Django's default cache, which is Redis when
``REDIS_URL`` is set, so every web process shares one count per user. The
rates are read from settings on each request (DRF's own classes bind them at
import), so they come from the environment and can change in tests. A refused
request answers 429 with a JSON ``detail`` and a ``Retry-After`` header.
"""

from __future__ import annotations

from django.conf import settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class APIUserRateThrottle(UserRateThrottle):
    """Requests per signed-in user (anonymous ones by address), ``API_THROTTLE_USER_RATE``."""

    def get_rate(self) -> str | None:
        return settings.API_THROTTLE_USER_RATE or None


class APIAnonRateThrottle(AnonRateThrottle):
    """Requests per anonymous client address, ``API_THROTTLE_ANON_RATE``."""

    def get_rate(self) -> str | None:
        return settings.API_THROTTLE_ANON_RATE or None
