"""ASGI entry point: HTTP through Django, WebSockets through Channels routing."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
django_asgi_application = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from agents_app.mcp_server import MemoryMCPApplication, mcp_path_is  # noqa: E402
from chatapp.middleware import (  # noqa: E402
    WebSocketDatabaseUnavailableMiddleware,
    WebSocketLogContextMiddleware,
)
from chatapp.periodic import periodic_start  # noqa: E402
from chatapp.process import process_tune_gc  # noqa: E402
from chatapp.routing import websocket_urlpatterns  # noqa: E402
from chatapp.shutdown import graceful_shutdown_install  # noqa: E402
from chatapp.websocket import NoRouteConsumer, WebSocketOriginValidator  # noqa: E402

mcp_application = MemoryMCPApplication()


async def http_application(scope, receive, send):
    """``/mcp/`` to the MCP server, everything else to Django."""
    if mcp_path_is(scope["path"]):
        return await mcp_application(scope, receive, send)
    return await django_asgi_application(scope, receive, send)


application = ProtocolTypeRouter(
    {
        "http": http_application,
        "websocket": WebSocketOriginValidator(
            WebSocketDatabaseUnavailableMiddleware(
                AuthMiddlewareStack(
                    WebSocketLogContextMiddleware(
                        URLRouter([*websocket_urlpatterns, re_path(r"", NoRouteConsumer.as_asgi())])
                    )
                )
            )
        ),
    }
)

periodic_start()
graceful_shutdown_install()
process_tune_gc()
