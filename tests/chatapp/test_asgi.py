"""The WebSocket door of the ASGI application checks the Origin before anything else: a page
of another site cannot open a chat socket with the user's cookie (cross-site WebSocket
hijacking). The Origin must be the site's own, as the handshake's scheme and Host give it
(scheme, host and port; the host one of ALLOWED_HOSTS), or one of CSRF_TRUSTED_ORIGINS; a
handshake without an Origin is refused too (browsers always send one; other clients must say
where they come from). A path no route answers is refused without an error."""

import logging

import pytest
from django.test import Client

from chatapp.asgi import application
from sessions_app import services
from tests.websocket_client import WebsocketClient

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

WAIT = 20  # seconds the handshake may take before the test gives up (not an assertion)


@pytest.fixture
def cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


@pytest.fixture
def chat_socket(user, cookie):
    """Open a chat socket of the signed-in user: (Origin, Host[, scheme]) -> connected?"""
    session = services.session_create(app_name="chat", user_id=str(user.pk))

    async def connect(
        origin: bytes | None, host: bytes = b"testserver", *, scheme: str = "ws", extra=()
    ) -> bool:
        headers = [(b"cookie", cookie), (b"host", host), *extra]
        if origin is not None:
            headers.append((b"origin", origin))
        communicator = WebsocketClient(application, f"/ws/chat/{session.id}/", headers=headers)
        communicator.scope["scheme"] = scheme
        connected, _ = await communicator.connect(timeout=WAIT)
        await communicator.disconnect()
        return connected

    return connect


@pytest.mark.parametrize(
    ("origin", "host", "scheme"),
    [
        (b"http://testserver", b"testserver", "ws"),
        (b"http://127.0.0.1:8000", b"127.0.0.1:8000", "ws"),
        (b"https://localhost:8443", b"localhost:8443", "wss"),
        (b"http://[::1]:8000", b"[::1]:8000", "ws"),
        (b"HTTP://LocalHost:8000", b"localhost:8000", "ws"),
    ],
)
async def test_the_sites_own_origin_opens_the_socket(chat_socket, origin, host, scheme):
    assert await chat_socket(origin, host, scheme=scheme) is True


@pytest.mark.parametrize(
    ("origin", "host"),
    [
        (b"http://localhost:9999", b"localhost:8000"),
        (b"http://localhost", b"localhost:8000"),
        (b"http://localhost:8000", b"localhost"),
        (b"https://testserver", b"testserver"),
        (b"http://127.0.0.1:8000", b"localhost:8000"),
        (b"https://evil.example", b"testserver"),
        (b"http://localhost.evil.example", b"testserver"),
        (b"http://testserver@evil.example", b"testserver"),
        (b"http://evil.example", b"evil.example"),
        (b"null", b"testserver"),
        (b"", b"testserver"),
        (b"file://", b"testserver"),
    ],
)
async def test_another_origin_port_scheme_or_host_is_refused(chat_socket, origin, host):
    assert await chat_socket(origin, host) is False


async def test_a_handshake_without_origin_is_refused(chat_socket):
    assert await chat_socket(None) is False


async def test_two_origins_are_refused(chat_socket):
    second = ((b"origin", b"https://evil.example"),)
    assert await chat_socket(b"http://testserver", extra=second) is False


async def test_behind_a_tls_proxy_the_forwarded_scheme_counts(chat_socket, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    forwarded = ((b"x-forwarded-proto", b"https"),)

    assert await chat_socket(b"https://testserver", extra=forwarded) is True
    assert await chat_socket(b"http://testserver", extra=forwarded) is False
    assert await chat_socket(b"https://testserver") is False


async def test_a_trusted_origin_opens_the_socket(chat_socket, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://app.example.com"]

    assert await chat_socket(b"https://app.example.com") is True
    assert await chat_socket(b"https://app.example.com:8443") is False


@pytest.mark.parametrize("path", ["/ws/nothing/", "/ws/chat/", "/ws/chat/a/b/", "/elsewhere/"])
async def test_a_path_no_route_answers_is_refused_without_an_error(cookie, caplog, path):
    communicator = WebsocketClient(
        application,
        path,
        headers=[(b"cookie", cookie), (b"host", b"testserver"), (b"origin", b"http://testserver")],
    )

    with caplog.at_level(logging.INFO):
        connected, _ = await communicator.connect(timeout=WAIT)
    await communicator.disconnect()

    assert connected is False
    assert [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info] == []
