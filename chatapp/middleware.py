"""Middleware for operations: request ids, the access log, the probe endpoints, text no store
can hold refused at the edge, and 503s while the database is away.

``RequestIdMiddleware`` and ``ProbeMiddleware`` come first in ``MIDDLEWARE``:
a probe is answered before the host check, the HTTPS redirect and the session,
because load balancers and orchestrators call it over plain HTTP with an
address (not the public host name) in the Host header.

The access log (logger ``chatapp.access``) has one line per HTTP request and
one per WebSocket connection, when it ends, with the ids of ``log_context``;
probes are left out, as they come every few seconds. It replaces daphne's own
access log (run daphne with ``--verbosity 0``), which is plain text.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
import zoneinfo
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.contrib.auth import SESSION_KEY
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.deprecation import MiddlewareMixin
from whitenoise.middleware import WhiteNoiseMiddleware

from chatapp import health, metrics
from core.log_context import log_context_bind, log_context_clear, request_id_from
from core.outages import (
    CLOSE_DATABASE_UNAVAILABLE,
    DATABASE_UNAVAILABLE_CODE,
    DATABASE_UNAVAILABLE_ERRORS,
    DATABASE_UNAVAILABLE_MESSAGE,
    RETRY_AFTER_SECONDS,
    SOCKET_REFUSED,
)
from core.text import unstorable_text_problem

logger = logging.getLogger(__name__)
access_logger = logging.getLogger("chatapp.access")

REQUEST_ID_HEADER = "X-Request-ID"

PROBES: dict[str, Callable[[HttpRequest], HttpResponse]] = {
    "/healthz": health.healthz,
    "/readyz": health.readyz,
    "/metrics": metrics.metrics_view,
}
# Probes that touch nothing but the request: in an async chain, answered on the event loop.
PROBES_WITHOUT_IO = frozenset({health.healthz})


class _SyncAndAsyncMiddleware:
    """Runs natively in both Django modes, so neither mode pays a thread switch for it."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)


class RequestIdMiddleware(_SyncAndAsyncMiddleware):
    """Give every request an id (the caller's ``X-Request-ID`` if sane), log it, echo it."""

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        started = time.monotonic()
        request_id = self._bind(request)
        response = self.get_response(request)
        return self._finish(request, response, request_id, started)

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        started = time.monotonic()
        request_id = self._bind(request)
        response = await self.get_response(request)
        return self._finish(request, response, request_id, started)

    @staticmethod
    def _finish(
        request: HttpRequest, response: HttpResponse, request_id: str, started: float
    ) -> HttpResponse:
        response[REQUEST_ID_HEADER] = request_id
        if request.path_info.rstrip("/") not in PROBES:
            duration_ms = round((time.monotonic() - started) * 1000, 1)
            access_logger.info(
                "%s %s %s in %.1f ms",
                request.method,
                request.path,
                response.status_code,
                duration_ms,
                extra={
                    "method": request.method,
                    "path": request.path,
                    "status_code": response.status_code,
                    "duration_ms": duration_ms,
                },
            )
        return response

    @staticmethod
    def _bind(request: HttpRequest) -> str:
        request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))
        request.request_id = request_id
        log_context_clear()
        log_context_bind(request_id=request_id)
        return request_id


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    """whitenoise's static files, in both Django modes.

    whitenoise's middleware is sync only: in the middle of the chain it made every request
    under daphne hop to a thread and back, and so paid two thread switches before any view
    ran. Here a request that is no static file goes on in the chain's own mode; a static file
    is served as whitenoise serves it (its file work in a thread under ASGI).
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        super().__init__(get_response)
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request: HttpRequest) -> Any:
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file)(request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve)(static_file, request)
        return await self.get_response(request)


class ProbeMiddleware(_SyncAndAsyncMiddleware):
    """Answer ``/healthz``, ``/readyz`` and ``/metrics`` before any other middleware."""

    def __call__(self, request: HttpRequest) -> Any:
        probe = PROBES.get(request.path_info.rstrip("/") or "/")
        if self.is_async:
            if probe is None:
                return self.get_response(request)
            if probe in PROBES_WITHOUT_IO:
                return _answered(probe(request))
            # On the thread that Django's request signals keep the database connection of.
            return sync_to_async(probe)(request)
        if probe is None:
            return self.get_response(request)
        return probe(request)


async def _answered(response: HttpResponse) -> HttpResponse:
    return response


class UnstorableTextMiddleware(_SyncAndAsyncMiddleware):
    """Refuse a request whose path, query string or form (URL-encoded or multipart) holds text
    no store can hold (a NUL character or a lone surrogate), before any view, admin page or
    database reads it.

    The one rule of every HTTP door: such a path is an unknown one (404, as the ``<id:...>``
    routes of ``core.converters`` also say), such a query string or form a bad request (400
    with the reason, JSON under ``/api/``). JSON bodies are the API's parser's
    (``core.api.StoreJSONParser``), chat frames the socket's (``agents_app.chat.protocol``).
    """

    def __call__(self, request: HttpRequest) -> Any:
        if unstorable_text_problem(request.path_info):
            raise Http404("No such page.")
        problem = unstorable_text_problem(*_form_text(request))
        if problem is None:
            return self.get_response(request)
        if not request.path_info.startswith("/api/"):
            refused = HttpResponseBadRequest(
                render_to_string("400.html", {"reason": f"{problem} in the form."}, request)
            )
            return _answered(refused) if self.is_async else refused
        refused = JsonResponse({"detail": f"{problem} in the query string or form."}, status=400)
        return _answered(refused) if self.is_async else refused


def _form_text(request: HttpRequest) -> list[str]:
    """The query string's names and values, and a form's: URL-encoded, or multipart outside
    ``/api/``, whose parsers read their own bodies as JSON and attachments (Django's drops
    a NUL from a file's name); every transfer encoding and charset a form declares is
    decoded before the check. A form too large to read is left to the view, which refuses it
    as it always does; a malformed multipart body is a bad request (Django's
    ``MultiPartParserError``)."""
    fields = list(request.GET.lists())
    forms = {"application/x-www-form-urlencoded"}
    if not request.path_info.startswith("/api/"):
        forms.add("multipart/form-data")
    if request.content_type in forms:
        with contextlib.suppress(SuspiciousOperation):
            fields += request.POST.lists()
    return [text for name, values in fields for text in (name, *values)]


TIME_ZONE_COOKIE = "tz"


@functools.cache
def _time_zone(name: str) -> zoneinfo.ZoneInfo | None:
    if name not in zoneinfo.available_timezones():
        return None
    return zoneinfo.ZoneInfo(name)


class TimeZoneMiddleware(_SyncAndAsyncMiddleware):
    """Dates and times of the request in the reader's time zone, which the site's script keeps
    in the ``tz`` cookie (an IANA name such as ``Europe/Lisbon``); without it, or with a name
    that is not a known zone, ``TIME_ZONE``. So a grant "until 30 Nov" ends when that day
    ends where the user is, and is shown as that day. The zone is the request's alone: it is
    given back when the response is, so nothing run later on the same thread reads its dates
    in this reader's zone."""

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        self._activate(request)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        self._activate(request)
        try:
            return await self.get_response(request)
        finally:
            timezone.deactivate()

    @staticmethod
    def _activate(request: HttpRequest) -> None:
        zone = _time_zone(request.COOKIES.get(TIME_ZONE_COOKIE, "")[:64])
        if zone is None:
            timezone.deactivate()
        else:
            timezone.activate(zone)


class LogUserMiddleware(_SyncAndAsyncMiddleware):
    """Put the signed-in user's id on this request's log lines (after SessionMiddleware).

    The id comes from the session, which the request loads anyway, rather than
    from ``request.user``, which would cost a user query on requests that never
    needed one.
    """

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        # Without the database the user stays off the log line; the view's own database
        # error makes the 503 (DatabaseUnavailableMiddleware).
        with contextlib.suppress(*DATABASE_UNAVAILABLE_ERRORS):
            log_context_bind(user_id=request.session.get(SESSION_KEY))
        return self.get_response(request)

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        with contextlib.suppress(*DATABASE_UNAVAILABLE_ERRORS):
            log_context_bind(user_id=await request.session.aget(SESSION_KEY))
        return await self.get_response(request)


class WebSocketLogContextMiddleware:
    """ASGI middleware for WebSockets: a request id and the user on the connection's log lines.

    Sits inside ``AuthMiddlewareStack`` so the user is resolved; the consumer
    and every turn task it starts inherit the binding.
    """

    def __init__(self, inner: Callable) -> None:
        self.inner = inner

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> Any:
        headers = dict(scope.get("headers") or ())
        header = headers.get(REQUEST_ID_HEADER.lower().encode(), b"").decode("latin-1")
        user = scope.get("user")
        log_context_bind(
            request_id=request_id_from(header),
            invocation_id=None,
            user_id=user.pk if user is not None and user.is_authenticated else None,
        )
        started = time.monotonic()
        seen: dict[str, Any] = {"accepted": False, "close_code": None}

        async def observed_send(message: dict) -> None:
            if message["type"] == "websocket.accept":
                seen["accepted"] = True
            elif message["type"] == "websocket.close":
                seen["close_code"] = message.get("code", 1000)
            await send(message)

        try:
            return await self.inner(scope, receive, observed_send)
        finally:
            duration_seconds = round(time.monotonic() - started, 3)
            log_context_bind(invocation_id=None)
            access_logger.info(
                "WEBSOCKET %s %s after %.1f s",
                scope["path"],
                "ended" if seen["accepted"] else f"refused ({seen['close_code']})",
                duration_seconds,
                extra={
                    "method": "WEBSOCKET",
                    "path": scope["path"],
                    "accepted": seen["accepted"],
                    "close_code": seen["close_code"],
                    "duration_seconds": duration_seconds,
                },
            )


UNAVAILABLE_PAGE = (
    "<!doctype html><html lang=en><meta charset=utf-8><title>Service unavailable</title>"
    "<h1>Service unavailable</h1><p>{message}</p></html>"
)


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    """Answer 503 with a clear message, not a 500 traceback, while the database is away.

    The API gets ``{"detail", "code": "database_unavailable"}`` like its other errors, pages
    a short HTML page; both carry ``Retry-After``. The page is written out here rather than
    rendered from a template, because the site's templates read the signed-in user, which
    needs the database. Innermost in ``MIDDLEWARE``, so it sees the view's exception first;
    middleware that reads the database before the view must leave the error to the view.
    """

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DATABASE_UNAVAILABLE_ERRORS):
            return None
        logger.error("database unavailable for %s %s: %s", request.method, request.path, exception)
        wants_json = "application/json" in request.headers.get("Accept", "")
        if request.path.startswith("/api/") or wants_json:
            response: HttpResponse = JsonResponse(
                {"detail": DATABASE_UNAVAILABLE_MESSAGE, "code": DATABASE_UNAVAILABLE_CODE},
                status=503,
            )
        else:
            response = HttpResponse(
                UNAVAILABLE_PAGE.format(message=DATABASE_UNAVAILABLE_MESSAGE), status=503
            )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response


class WebSocketDatabaseUnavailableMiddleware:
    """ASGI middleware for WebSockets: a socket opened while the database is away is told so.

    Signing the socket in (``AuthMiddlewareStack``) reads the session from the database
    before any consumer runs, so an outage there would end the handshake with a bare
    HTTP 500. Instead the socket is accepted, gets a ``database_unavailable`` error
    frame, and is closed with 4503, as the chat consumer does when the
    database fails it after sign-in.
    """

    def __init__(self, inner: Callable) -> None:
        self.inner = inner

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> Any:
        accepted = False

        async def tracking_send(message: dict) -> None:
            nonlocal accepted
            accepted = accepted or message.get("type") in ("websocket.accept", "websocket.close")
            await send(message)

        try:
            return await self.inner(scope, receive, tracking_send)
        except DATABASE_UNAVAILABLE_ERRORS as error:
            if accepted:
                raise
            logger.error("chat socket refused, database unavailable: %s", error)
            message = await receive()
            if message.get("type") != "websocket.connect":
                return None
            frame = {"type": "error", "code": DATABASE_UNAVAILABLE_CODE, "message": SOCKET_REFUSED}
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.send", "text": json.dumps(frame)})
            await send({"type": "websocket.close", "code": CLOSE_DATABASE_UNAVAILABLE})
            # Stay until the close completes: the server closes the socket of an app that
            # has ended with 1011 (internal error) instead.
            while (await receive()).get("type") != "websocket.disconnect":
                pass
            return None
