"""The WebSocket door of the ASGI application checks the Origin before anything else: a page
of another site cannot open a chat socket with the user's cookie (cross-site WebSocket
hijacking). Allowed origins are the ALLOWED_HOSTS; a handshake without an Origin is refused
too (browsers always send one; other clients must say where they come from)."""

import pytest
from channels.testing import WebsocketCommunicator
from django.test import Client

from chatapp.asgi import application
from sessions_app import services

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

WAIT = 20  # seconds the handshake may take before the test gives up (not an assertion)


@pytest.fixture
def chat_socket(user):
    """Open a chat socket of the signed-in user with a given Origin header (or none).

    The validator takes ALLOWED_HOSTS when the application is built, so these tests use
    the hosts the suite runs with (the defaults: localhost, 127.0.0.1, [::1], testserver).
    """
    session = services.session_create(app_name="chat", user_id=str(user.pk))
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}".encode()

    async def connect(origin: bytes | None) -> bool:
        headers = [(b"cookie", cookie)] + ([(b"origin", origin)] if origin is not None else [])
        communicator = WebsocketCommunicator(
            application, f"/ws/chat/{session.id}/", headers=headers
        )
        connected, _ = await communicator.connect(timeout=WAIT)
        await communicator.disconnect()
        return connected

    return connect


@pytest.mark.parametrize(
    "origin",
    [
        b"http://testserver",
        b"http://127.0.0.1:8000",
        b"https://localhost:8443",
        b"http://[::1]:8000",
    ],
)
async def test_an_allowed_origin_opens_the_socket(settings, chat_socket, origin):
    assert {"testserver", "localhost", "127.0.0.1", "[::1]"} <= set(settings.ALLOWED_HOSTS)
    assert await chat_socket(origin) is True


@pytest.mark.parametrize(
    "origin",
    [
        b"https://evil.example",
        b"http://localhost.evil.example",
        b"http://evil-localhost",
        b"http://127.0.0.2:8000",
        b"http://testserver@evil.example",
        b"null",
        b"",
        b"file://",
    ],
)
async def test_a_foreign_or_opaque_origin_is_refused(chat_socket, origin):
    assert await chat_socket(origin) is False


async def test_a_handshake_without_origin_is_refused(chat_socket):
    assert await chat_socket(None) is False
