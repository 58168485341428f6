"""HTTP Basic on the REST API, behind the sign-in guard (``access_app.signin``).

DRF's own class answered a wrong password with a plain 403 (the session authenticator came
first, and it has no challenge to send) and let a guesser try forever at the cost of a
password hash each. This one comes first: wrong credentials answer 401 with
``WWW-Authenticate: Basic``, a locked account or address 429 with ``Retry-After`` and no
password hashed. A request without Basic credentials gets no challenge (so a browser whose
cookie expired shows no password dialog) and falls through to the session cookie.
Production turns Basic off by default (``API_BASIC_AUTH``).
"""

from __future__ import annotations

from axes.handlers.proxy import AxesProxyHandler
from django.contrib.auth import get_user_model
from drf_spectacular.authentication import BasicScheme
from rest_framework.authentication import BasicAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, Throttled

from access_app.signin import lockout_message, lockout_minutes
from core.text import unstorable_text_problem


class LockedOut(Throttled):
    default_code = "locked_out"


class GuardedBasicAuthentication(BasicAuthentication):
    www_authenticate_realm = "api"

    def authenticate_credentials(self, userid, password, request=None):
        """As DRF's, behind the guard; credentials no account can hold (a NUL) are wrong ones
        without a look at any store, which could not read them."""
        if unstorable_text_problem(userid, password):
            raise AuthenticationFailed("Invalid username/password.")
        credentials = {get_user_model().USERNAME_FIELD: userid}
        if not AxesProxyHandler.is_allowed(request, credentials):
            raise LockedOut(wait=60 * lockout_minutes(), detail=lockout_message())
        try:
            return super().authenticate_credentials(userid, password, request)
        except AuthenticationFailed:
            if not AxesProxyHandler.is_allowed(request, credentials):
                raise LockedOut(wait=60 * lockout_minutes(), detail=lockout_message()) from None
            raise

    def authenticate_header(self, request) -> str | None:
        """A challenge only for a client that sent Basic credentials."""
        scheme = get_authorization_header(request).split()[:1]
        if scheme and scheme[0].lower() == b"basic":
            return super().authenticate_header(request)
        return None


class GuardedBasicScheme(BasicScheme):
    """The OpenAPI schema names it as HTTP Basic, like DRF's own class."""

    target_class = GuardedBasicAuthentication
