"""The base of the service-account API's views: the key, its app, the end user, the audit."""

from __future__ import annotations

import re

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.exceptions import NotFound
from rest_framework.permissions import SAFE_METHODS

from agents_app import selectors, services
from agents_app.models import App, EndUser, Scope, ServiceRequest
from agents_app.service_api.auth import BearerKeyAuthentication, HasScope, ServicePrincipal
from core.api import ErrorSerializer
from core.throttling import APIServiceAccountRateThrottle
from sessions_app.api import SessionStoreAPIView

END_USER_ID = re.compile(r"^[A-Za-z0-9._:@-]{1,128}\Z")
DETAIL_MAX = 300

APP_NAME = OpenApiParameter(
    "app_name", str, OpenApiParameter.PATH, description="The app of the key; any other: 404."
)
USER_ID = OpenApiParameter(
    "user_id",
    str,
    OpenApiParameter.PATH,
    pattern=END_USER_ID.pattern,
    description="The end user's id in the app (ADK's user_id).",
)
NO_KEY = OpenApiResponse(ErrorSerializer, description="No, unknown, revoked or expired key.")
NO_SCOPE = OpenApiResponse(ErrorSerializer, description="The key lacks the scope.")
UNKNOWN = OpenApiResponse(ErrorSerializer, description="Unknown app, user or object.")


class ServiceAPIView(SessionStoreAPIView):
    """A view of ``/api/v1/apps/<app_name>/``: authenticated by a service account's key of that
    app (another app's name answers 404), scoped (``read_scope`` for GET, ``write_scope``
    otherwise), throttled per key, and audited: every request and its outcome becomes a
    ``ServiceRequest`` row."""

    authentication_classes = [BearerKeyAuthentication]
    permission_classes = [HasScope]
    throttle_classes = [APIServiceAccountRateThrottle]
    read_scope = Scope.SESSIONS_READ
    write_scope = Scope.SESSIONS_WRITE
    app: App | None = None
    end_user_record: EndUser | None = None

    def required_scope(self, request) -> str:
        scope = self.read_scope if request.method in SAFE_METHODS else self.write_scope
        return str(scope.value if hasattr(scope, "value") else scope)

    def initial(self, request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        app = request.user.key.service_account.app
        if kwargs.get("app_name") != app.name:
            raise NotFound(f"This key has no app named {kwargs.get('app_name')!r}.")
        self.app = app
        services.service_key_used(key=request.user.key)

    def end_user(self, user_id: str, *, create: bool = False) -> EndUser | None:
        """The app's end user ``user_id``; created on a write, None on a read of an unknown
        one (a malformed id is unknown)."""
        if not END_USER_ID.fullmatch(user_id):
            if create:
                raise NotFound("A user id is 1-128 letters, digits and . _ : @ -.")
            return None
        if create:
            record = services.end_user_ensure(app=self.app, external_id=user_id)
        else:
            record = selectors.end_user_get(app=self.app, external_id=user_id)
        self.end_user_record = record
        return record

    def end_user_required(self, user_id: str) -> EndUser:
        record = self.end_user(user_id)
        if record is None:
            raise NotFound(f"The app has no user {user_id!r}.")
        return record

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        principal = getattr(request, "_user", None)
        key = principal.key if isinstance(principal, ServicePrincipal) else None
        detail = ""
        if response.status_code >= 400 and isinstance(getattr(response, "data", None), dict):
            detail = str(response.data.get("detail", response.data))[:DETAIL_MAX]
        ServiceRequest.objects.create(
            app_name=kwargs.get("app_name", "")[:128],
            service_account=key.service_account if key else None,
            key_prefix=key.prefix if key else getattr(request, "key_prefix", "")[:16],
            method=request.method[:8],
            route=request.resolver_match.route[:200] if request.resolver_match else "",
            status_code=response.status_code,
            detail=detail,
            end_user=self.end_user_record.user if self.end_user_record else None,
        )
        return response
