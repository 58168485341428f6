"""ASGI entry point: HTTP through Django, WebSockets through Channels routing."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
django.setup(set_prefix=False)  # as django.core.asgi.get_asgi_application does

from chatapp.asgi_handler import KeptThreadASGIHandler  # noqa: E402

django_asgi_application = KeptThreadASGIHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from chatapp.middleware import (  # noqa: E402
    WebSocketDatabaseUnavailableMiddleware,
    WebSocketLogContextMiddleware,
)
from chatapp.periodic import periodic_start  # noqa: E402
from chatapp.process import process_tune_gc  # noqa: E402
from chatapp.routing import websocket_urlpatterns  # noqa: E402
from chatapp.shutdown import graceful_shutdown_install  # noqa: E402
from chatapp.websocket import NoRouteConsumer, WebSocketOriginValidator  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_application,
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
