"""The base of the service-account API's views: the key, its app, the end user, the audit."""

from __future__ import annotations

import inspect

from asgiref.sync import sync_to_async
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.utils.functional import classproperty
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.exceptions import APIException, NotFound
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response
from rest_framework.views import APIView

from agents_app import selectors, services
from agents_app.models import App, EndUser, Scope, ServiceAccountKey
from agents_app.service_api.auth import BearerKeyAuthentication, HasScope, ServicePrincipal
from core.api import ErrorSerializer
from core.throttling import APIServiceAccountRateThrottle
from sessions_app.api import IDENTIFIER_SCHEMA, SessionStoreAPIView
from sessions_app.services import IDENTIFIER_PATTERN, IDENTIFIER_RULE

END_USER_ID = IDENTIFIER_PATTERN

APP_NAME = OpenApiParameter(
    "app_name", str, OpenApiParameter.PATH, description="The app of the key; any other: 404."
)
USER_ID = OpenApiParameter(
    "user_id",
    IDENTIFIER_SCHEMA,
    OpenApiParameter.PATH,
    description="The end user's id in the app (ADK's user_id).",
)
NO_KEY = OpenApiResponse(ErrorSerializer, description="No, unknown, revoked or expired key.")
NO_SCOPE = OpenApiResponse(ErrorSerializer, description="The key lacks the scope.")
UNKNOWN = OpenApiResponse(
    ErrorSerializer,
    description="Unknown app, user or object: a session, memory or job, an invocation a "
    "rewind names, or a `page_token` this API did not give.",
)


class AppNotReached(NotFound):
    """404 for an app the key does not reach, told apart from an unknown object by its
    ``code``: a client names the wrong app rather than reading a session as absent."""

    def __init__(self, app_name: str) -> None:
        super().__init__(
            {
                "detail": f"This key has no app named {app_name!r}.",
                "code": "app_not_found",
                "app_name": app_name,
            }
        )


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
    end_user_pk: int | None = None
    # The end user is a person's own account linked to the app (before issue 43 staff could
    # link one), not one the app made: each use of their data goes in their access log.
    person_linked: bool = False
    person_access_recorded: bool = False

    def required_scope(self, request) -> str:
        scope = self.read_scope if request.method in SAFE_METHODS else self.write_scope
        return str(scope.value if hasattr(scope, "value") else scope)

    def initial(self, request, *args, **kwargs) -> None:
        super().initial(request, *args, **kwargs)
        app = request.user.key.service_account.app
        if kwargs.get("app_name") != app.name:
            raise AppNotReached(str(kwargs.get("app_name")))
        self.app = app
        self.key_use_note(request.user.key)

    def key_use_note(self, key: ServiceAccountKey) -> None:
        services.service_key_used(key=key)

    def end_user(self, user_id: str, *, create: bool = False) -> EndUser | None:
        """The app's end user ``user_id``; created on a write, None on a read of an unknown
        one (a malformed id is unknown)."""
        if not END_USER_ID.fullmatch(user_id):
            if create:
                raise NotFound(f"A user id is {IDENTIFIER_RULE}.")
            return None
        if create:
            record = services.end_user_ensure(app=self.app, external_id=user_id)
        else:
            record = selectors.end_user_get(app=self.app, external_id=user_id)
        self.end_user_pk = record.user_id if record is not None else None
        self.person_linked = record is not None and not services.end_user_app_made(end_user=record)
        return record

    def end_user_required(self, user_id: str) -> EndUser:
        record = self.end_user(user_id)
        if record is None:
            raise NotFound(f"The app has no user {user_id!r}.")
        return record

    def audit_fields(self, request, response, kwargs) -> dict:
        """The ``ServiceRequest`` row of this request and its outcome."""
        principal = getattr(request, "_user", None)
        key = principal.key if isinstance(principal, ServicePrincipal) else None
        detail = ""
        if response.status_code >= 400 and isinstance(getattr(response, "data", None), dict):
            detail = str(response.data.get("detail", response.data))
        return {
            "app_name": kwargs.get("app_name", ""),
            "service_account_id": key.service_account_id if key else None,
            "key_prefix": key.prefix if key else getattr(request, "key_prefix", ""),
            "method": request.method,
            "route": request.resolver_match.route if request.resolver_match else "",
            "status_code": response.status_code,
            "detail": detail,
            "end_user_id": self.end_user_pk,
        }

    def person_access_due(self, response) -> bool:
        """Whether this request read or changed a linked person's data and is not yet in their
        access log."""
        return (
            self.person_linked
            and not self.person_access_recorded
            and self.end_user_pk is not None
            and 200 <= response.status_code < 300
        )

    def person_access_record(self, request) -> None:
        services.person_access_record(
            user_pk=self.end_user_pk,
            app=self.app,
            key=request.user.key,
            method=request.method,
            path=request.path,
        )

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        if self.person_access_due(response):
            self.person_access_record(request)
        services.service_request_record(**self.audit_fields(request, response, kwargs))
        return response


class AsyncServiceAPIView(ServiceAPIView):
    """A ``ServiceAPIView`` whose handlers are coroutines, for the calls an agent makes at
    every step (ADK's ``append_event`` and ``get_session``).

    The request stays on the event loop from the key to the audit row: a key and an end user
    verified lately are kept in the process (``agents_app.key_cache``), the session store and
    the audit row are reached from the loop on PostgreSQL (``core.async_database``), and the
    response is rendered here, so that Django does not hop to a thread to render it. A sync
    view pays two thread hops and a statement for the key and one for the end user on every
    call, which cost more than the store's own work.

    On PostgreSQL the audit row is held a moment and written with the process's other rows of
    that moment (``core.write_behind``): its own round trip was an eighth of an append's time,
    and the agent waiting for the append has no use for it. A process killed outright loses
    what it held (the crash is in the server's log).
    """

    @classproperty
    def view_is_async(cls) -> bool:
        return True

    async def dispatch(self, request, *args, **kwargs):
        self.args = args
        self.kwargs = kwargs
        request = self.initialize_request(request, *args, **kwargs)
        self.request = request
        self.headers = self.default_response_headers
        try:
            await self._authenticate(request)
            self.initial(request, *args, **kwargs)
            method = request.method.lower()
            handler = getattr(self, method, None) if method in self.http_method_names else None
            response = (handler or self.http_method_not_allowed)(request, *args, **kwargs)
            if inspect.isawaitable(response):
                response = await response
        except Exception as exc:
            response = self.handle_exception(exc)
        response = APIView.finalize_response(self, request, response, *args, **kwargs)
        if self.person_access_due(response):
            await sync_to_async(self.person_access_record)(request)
        await services.service_request_record_async(**self.audit_fields(request, response, kwargs))
        self.response = response
        return _rendered(response)

    async def _authenticate(self, request) -> None:
        """DRF's authentication, done before ``initial`` so that it finds the caller set."""
        authenticator = self.get_authenticators()[0]
        try:
            result = await authenticator.authenticate_async(request)
        except APIException:
            request._not_authenticated()
            raise
        if result is None:
            request._not_authenticated()
            return
        request._authenticator = authenticator
        request.user, request.auth = result
        if services.service_key_use_due(key=result[1]):
            await sync_to_async(services.service_key_used)(key=result[1])

    def key_use_note(self, key: ServiceAccountKey) -> None:
        """Noted in ``_authenticate``, from the loop."""

    async def end_user_pk_of(self, user_id: str, *, afresh: bool = False) -> int | None:
        """The account id of the app's end user ``user_id``; None for an unknown or malformed
        one. Kept in the process a few seconds unless ``afresh``."""
        if not END_USER_ID.fullmatch(user_id):
            return None
        account = await selectors.end_user_account_async(
            app=self.app, external_id=user_id, afresh=afresh
        )
        if account is None:
            self.end_user_pk, self.person_linked = None, False
            return None
        self.end_user_pk = account[0]
        self.person_linked = account[1] != services.end_user_username(
            app=self.app, external_id=user_id
        )
        return account[0]


def _rendered(response: HttpResponseBase) -> HttpResponseBase:
    """``response`` rendered, as a plain response if it was a DRF one: Django renders a
    response that can be rendered in a thread hop of its own, even a rendered one."""
    if not isinstance(response, Response):
        return response
    response.render()
    plain = HttpResponse(content=response.content, status=response.status_code)
    for header, value in response.items():
        plain[header] = value
    return plain
