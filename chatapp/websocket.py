"""The WebSocket door of the ASGI application: the Origin check, and paths no route answers.

A browser sends the page's origin with every WebSocket handshake, and the session cookie with
it whatever page opened the socket, so the origin is what stops another site's page from
chatting as the user (cross-site WebSocket hijacking). It must be this site's own origin,
compared as Django's CSRF check compares a form's: scheme, host and port, with the host one of
``ALLOWED_HOSTS``; or one of ``CSRF_TRUSTED_ORIGINS`` exactly. (Channels'
``AllowedHostsOriginValidator`` compared the host only: a page on another port of the same
host, another program on the user's machine, passed.)
"""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host


def _header_values(scope: dict[str, Any], name: bytes) -> list[str]:
    return [value.decode("latin-1") for key, value in scope.get("headers") or [] if key == name]


def _scheme(scope: dict[str, Any]) -> str:
    """``https`` when the socket came over TLS: ``wss``, or the proxy's header says so
    (``SECURE_PROXY_SSL_HEADER``, as for HTTP requests)."""
    secure = scope.get("scheme") == "wss"
    if settings.SECURE_PROXY_SSL_HEADER:
        meta_name, expected = settings.SECURE_PROXY_SSL_HEADER
        header = meta_name.removeprefix("HTTP_").replace("_", "-").lower().encode()
        forwarded = _header_values(scope, header)
        if forwarded:
            secure = forwarded[-1].split(",", 1)[0].strip() == expected
    return "https" if secure else "http"


def websocket_origin_allowed(scope: dict[str, Any]) -> bool:
    """Whether the handshake's one ``Origin`` is this site's origin (the scheme and the
    ``Host`` it was sent to, with the host allowed) or a trusted one; no Origin: refused."""
    origins, hosts = _header_values(scope, b"origin"), _header_values(scope, b"host")
    if len(origins) != 1 or len(hosts) != 1:
        return False
    origin, host = origins[0].lower(), hosts[0].lower()
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return False
    if origin in (trusted.lower() for trusted in settings.CSRF_TRUSTED_ORIGINS):
        return True
    return origin == f"{_scheme(scope)}://{host}"


class WebSocketOriginValidator:
    """Refuses the handshake (HTTP 403) unless ``websocket_origin_allowed``."""

    def __init__(self, inner) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive, send) -> Any:
        if scope["type"] == "websocket" and not websocket_origin_allowed(scope):
            return await WebsocketDenier()(scope, receive, send)
        return await self.inner(scope, receive, send)


class NoRouteConsumer(AsyncWebsocketConsumer):
    """The last route: a path no other route matches is refused at the handshake (HTTP 403).
    Without it Channels' router raised, and the server answered 500 and logged a traceback for
    every such request, a log flood anyone could start; now the access log's line for the
    socket ("refused") is all."""

    async def connect(self) -> None:
        await self.close()
