"""A chat turn over the real ASGI application, for the operations tests."""

import uuid

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connections
from django.test import Client

from chatapp.asgi import application
from sessions_app import services
from tests.websocket_client import WebsocketClient

WAIT = 20  # seconds a frame may take before the test gives up (not an assertion)


async def chat_socket_open(user, session_id: str) -> WebsocketClient:
    """A chat socket of ``session_id``, connected as the signed-in ``user`` from the site's
    own origin."""
    client = Client()
    await sync_to_async(client.force_login)(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    socket = WebsocketClient(
        application,
        f"/ws/chat/{session_id}/",
        headers=[
            (b"origin", b"http://testserver"),
            (b"host", b"testserver"),
            (b"cookie", cookie.encode()),
        ],
    )
    connected, _ = await socket.connect(timeout=WAIT)
    assert connected
    return socket


async def turn(user, *, text: str = "Hello there") -> list[dict]:
    """One turn over the real ASGI application; the frames up to turn_complete."""
    session = await database_sync_to_async(services.session_create)(
        app_name="chat", user_id=str(user.pk)
    )
    socket = await chat_socket_open(user, session.id)
    await socket.send_json_to(
        {"type": "user_message", "text": text, "client_message_id": uuid.uuid4().hex}
    )
    frames = []
    while not frames or frames[-1]["type"] != "turn_complete":
        frames.append(await socket.receive_json_from(timeout=WAIT))
    await socket.disconnect()
    await database_sync_to_async(connections.close_all)()
    return frames
