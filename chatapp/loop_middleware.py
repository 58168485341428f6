"""Django's own middleware, its hooks run on the event loop under ASGI when they do no I/O.

Under ASGI, Django's ``MiddlewareMixin`` runs each ``process_request`` and ``process_response``
in a hop to a thread and back, even when the hook only reads a header or sets one: with the
eight middlewares of ``MIDDLEWARE`` that was some fifteen thread hops per request before any
view ran, which on a loaded machine cost more than the request's own work (the
service-account API's session append: ``bench.remote_sessions``). The classes here are the
same middlewares with the same hooks, in the same order; only where a hook runs changes. A
hook that may reach the database for this request (messages to store) still runs in a thread,
as before. Django's security, session, CSRF and clickjacking middlewares are not among them:
``check --deploy`` looks for them by name.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from csp.middleware import CSPMiddleware as _CSPMiddleware
from django.contrib.auth.middleware import AuthenticationMiddleware as _AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware as _MessageMiddleware
from django.http import HttpRequest, HttpResponse
from django.middleware.common import CommonMiddleware as _CommonMiddleware


class _HooksOnTheLoop:
    """For a ``MiddlewareMixin`` middleware whose ``process_request`` does no I/O: in async
    mode its hooks run on the loop, ``process_response`` only when ``response_hook_on_loop``
    says it does no I/O for this response (else in a thread, as Django runs it)."""

    def response_hook_on_loop(self, request: HttpRequest, response: HttpResponse) -> bool:
        return True

    async def __acall__(self, request: HttpRequest) -> Any:
        response = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            if self.response_hook_on_loop(request, response):
                response = self.process_response(request, response)
            else:
                response = await sync_to_async(self.process_response)(request, response)
        return response


class CSPMiddleware(_HooksOnTheLoop, _CSPMiddleware):
    """Its hooks make a nonce and set the policy's header."""


class CommonMiddleware(_HooksOnTheLoop, _CommonMiddleware):
    """Its hooks check the host and resolve the path (no I/O)."""


class AuthenticationMiddleware(_HooksOnTheLoop, _AuthenticationMiddleware):
    """Its hook sets ``request.user`` lazily: the user is read where the view reads it."""


class MessageMiddleware(_HooksOnTheLoop, _MessageMiddleware):
    """The message storage is made lazily; at the response it stores messages only if some
    were added or read."""

    def response_hook_on_loop(self, request: HttpRequest, response: HttpResponse) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is None or not (storage.used or storage.added_new)
