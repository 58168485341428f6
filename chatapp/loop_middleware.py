"""Django's own middleware, its hooks run on the event loop under ASGI when they do no I/O.

Under ASGI, Django's ``MiddlewareMixin`` runs each ``process_request`` and ``process_response``
in a hop to a thread and back, even when the hook only reads a header or sets one, and the
handler runs every ``process_view`` that is not a coroutine in a hop too: with the eight
Django middlewares of ``MIDDLEWARE`` that was some fifteen thread hops per request before any
view ran, which on a loaded machine cost more than the request's own work (the
service-account API's session append: ``bench.remote_sessions``). The classes here are
Django's middlewares, subclassed, with the same hooks, in the same order; only where a hook
runs changes. A hook that may reach the database or read a request body for this request (a
session to save, messages to store, a CSRF token to look for in a form) still runs in a
thread, as Django runs it. In a sync chain (WSGI, the test client) they are Django's classes.

Django's deploy checks find its security, CSRF, session and clickjacking middlewares by their
dotted names; ``chatapp.checks.check_middleware_protections`` finds these subclasses and runs
Django's checks for them (settings: ``SILENCED_SYSTEM_CHECKS``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from csp.middleware import CSPMiddleware as _CSPMiddleware
from django.conf import settings
from django.contrib.auth.middleware import AuthenticationMiddleware as _AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware as _MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware as _SessionMiddleware
from django.http import HttpRequest, HttpResponse
from django.middleware.clickjacking import XFrameOptionsMiddleware as _XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware as _CommonMiddleware
from django.middleware.csrf import CsrfViewMiddleware as _CsrfViewMiddleware
from django.middleware.security import SecurityMiddleware as _SecurityMiddleware

SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")


class _HooksOnTheLoop:
    """For a ``MiddlewareMixin`` middleware: in async mode its hooks run on the loop, each
    unless its ``..._hook_on_loop`` says it may do I/O for this request (then in a thread, as
    Django runs it)."""

    def request_hook_on_loop(self, request: HttpRequest) -> bool:
        return True

    def response_hook_on_loop(self, request: HttpRequest, response: HttpResponse) -> bool:
        return True

    async def __acall__(self, request: HttpRequest) -> Any:
        response = None
        if hasattr(self, "process_request"):
            if self.request_hook_on_loop(request):
                response = self.process_request(request)
            else:
                response = await sync_to_async(self.process_request)(request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            if self.response_hook_on_loop(request, response):
                response = self.process_response(request, response)
            else:
                response = await sync_to_async(self.process_response)(request, response)
        return response


class SecurityMiddleware(_HooksOnTheLoop, _SecurityMiddleware):
    """Its hooks redirect plain HTTP to HTTPS and set the security headers (no I/O)."""


class CSPMiddleware(_HooksOnTheLoop, _CSPMiddleware):
    """Its hooks make a nonce and set the policy's header."""


class SessionMiddleware(_HooksOnTheLoop, _SessionMiddleware):
    """The session is read lazily, where the request first reads it; at the response the
    hook saves it (in a thread) only if it was changed or every request saves it."""

    def response_hook_on_loop(self, request: HttpRequest, response: HttpResponse) -> bool:
        session = getattr(request, "session", None)
        return session is None or not (
            getattr(session, "modified", False) or settings.SESSION_SAVE_EVERY_REQUEST
        )


class CommonMiddleware(_HooksOnTheLoop, _CommonMiddleware):
    """Its hooks check the host and resolve the path (no I/O)."""


class CsrfViewMiddleware(_HooksOnTheLoop, _CsrfViewMiddleware):
    """Its hooks read the CSRF cookie and set it; its view hook checks the token of an unsafe
    request to a view that is not exempt in a thread (it reads the form), and lets every
    other request through on the loop. With ``CSRF_USE_SESSIONS`` the secret is in the
    session, so the request and response hooks run in threads."""

    def __init__(self, get_response: Callable) -> None:
        super().__init__(get_response)
        if self.async_mode:
            # Django's handler awaits a view hook that is a coroutine function as it is.
            self.process_view = self._process_view_async

    def request_hook_on_loop(self, request: HttpRequest) -> bool:
        return not settings.CSRF_USE_SESSIONS

    def response_hook_on_loop(self, request: HttpRequest, response: HttpResponse) -> bool:
        return not settings.CSRF_USE_SESSIONS

    async def _process_view_async(
        self, request: HttpRequest, callback: Callable, callback_args: tuple, callback_kwargs: dict
    ) -> HttpResponse | None:
        checked_in_thread = not (
            getattr(request, "csrf_processing_done", False)
            or getattr(callback, "csrf_exempt", False)
            or request.method in SAFE_METHODS
            or getattr(request, "_dont_enforce_csrf_checks", False)
        )
        process_view = super().process_view
        if checked_in_thread:
            return await sync_to_async(process_view)(
                request, callback, callback_args, callback_kwargs
            )
        return process_view(request, callback, callback_args, callback_kwargs)


class AuthenticationMiddleware(_HooksOnTheLoop, _AuthenticationMiddleware):
    """Its hook sets ``request.user`` lazily: the user is read where the view reads it."""


class MessageMiddleware(_HooksOnTheLoop, _MessageMiddleware):
    """The message storage is made lazily; at the response it stores messages only if some
    were added or read."""

    def response_hook_on_loop(self, request: HttpRequest, response: HttpResponse) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is None or not (storage.used or storage.added_new)


class XFrameOptionsMiddleware(_HooksOnTheLoop, _XFrameOptionsMiddleware):
    """Its hook sets ``X-Frame-Options`` (no I/O)."""
