"""Who calls the service-account API: ``Authorization: Bearer <key>`` of one app's service
account, the key's scopes, and the audit of every request and its outcome."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission

from agents_app.models import ServiceAccountKey
from agents_app.selectors import key_verified, key_verified_async

KEYWORD = b"bearer"


@dataclass(frozen=True)
class ServicePrincipal:
    """The caller as DRF's ``request.user``: a service account, never a person. It holds no
    Django permission and is no user, so no view of the browser API accepts it."""

    key: ServiceAccountKey

    is_authenticated = True
    is_active = True
    is_staff = False
    is_superuser = False
    is_anonymous = False

    @property
    def pk(self) -> str:
        """The throttles' identity: one budget per key."""
        return f"key-{self.key.prefix}"

    def has_perm(self, perm: str, obj=None) -> bool:
        return False


class BearerKeyAuthentication(BaseAuthentication):
    """A service account's API key in ``Authorization: Bearer <prefix>.<secret>``.

    No header: not authenticated (the permission answers 401). An unknown, malformed,
    revoked or expired key: 401 saying which, with ``WWW-Authenticate: Bearer``.
    """

    def authenticate(self, request):
        secret = self._secret(request)
        if secret is None:
            return None
        return self._principal(key_verified(key=secret))

    async def authenticate_async(self, request):
        """``authenticate`` from an event loop: a key verified lately costs no thread hop."""
        secret = self._secret(request)
        if secret is None:
            return None
        return self._principal(await key_verified_async(key=secret))

    def _secret(self, request) -> str | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != KEYWORD:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Send the key as 'Authorization: Bearer <key>'.")
        try:
            secret = parts[1].decode()
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("The API key is not valid.") from None
        request.key_prefix = secret.partition(".")[0][:16]
        return secret

    def _principal(self, key: ServiceAccountKey | None) -> tuple[ServicePrincipal, object]:
        if key is None:
            raise exceptions.AuthenticationFailed("The API key is not valid.")
        if key.revoked:
            raise exceptions.AuthenticationFailed("The API key was revoked.")
        if key.expiry_date is not None and key.expiry_date <= timezone.now():
            raise exceptions.AuthenticationFailed("The API key has expired.")
        return ServicePrincipal(key=key), key

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'


class HasScope(BasePermission):
    """A service account's key holding the view's ``required_scope`` (403 saying which)."""

    def has_permission(self, request, view) -> bool:
        principal = request.user
        if not isinstance(principal, ServicePrincipal):
            raise exceptions.NotAuthenticated(
                "An API key is needed: send 'Authorization: Bearer <key>'."
            )
        scope = str(view.required_scope(request))
        if scope not in principal.key.scopes:
            self.message = f"This API key lacks the scope {scope!r}."
            return False
        return True


class BearerKeyScheme(OpenApiAuthenticationExtension):
    """The API's security scheme in the OpenAPI schema: an HTTP bearer token (the API key)."""

    target_class = BearerKeyAuthentication
    name = "serviceAccountKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key of one of the app's service accounts.",
        }
