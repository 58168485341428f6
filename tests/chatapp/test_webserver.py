"""``python -m chatapp.webserver`` (daphne as the project runs it) against a real chat socket:
a frame of any size is answered with ``frame_too_large`` and the socket stays usable; only a
message past the server's hard limit closes the socket, with 1009 and a reason, unread."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import struct
import tempfile
import uuid
from base64 import b64encode
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from agents_app.chat.protocol import max_frame_chars
from chatapp.webserver import WEBSOCKET_DISCARD_MAX_BYTES
from core.sizes import size_words
from tests.migrated_templates import sqlite_migrated
from tests.multiprocess.stack import Browser, Daphne, embedded_environment

# One worker runs the module, so its server starts once.
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("webserver")]

MB = 1000 * 1000


@pytest.fixture(scope="module")
def web() -> Iterator[Daphne]:
    """The embedded default (``make run``) on a database of its own."""
    folder = Path(tempfile.mkdtemp(prefix="chat-webserver-"))
    env = embedded_environment(database_url=f"sqlite:///{folder / 'db.sqlite3'}")
    sqlite_migrated(folder / "db.sqlite3", env=env)
    server = Daphne("web-frames", env, folder).start().wait_ready()
    try:
        yield server
    finally:
        print(server.log_tail())
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def signed_in(web: Daphne) -> tuple[Browser, str]:
    browser = Browser(web.base_url).sign_up()
    return browser, browser.session_create()


def _user_message(text: str) -> str:
    return json.dumps({"type": "user_message", "text": text, "client_message_id": uuid.uuid4().hex})


@pytest.mark.parametrize("size", [1 * MB, 10 * MB, 64 * MB], ids=["1MB", "10MB", "64MB"])
def test_a_frame_of_any_size_gets_frame_too_large_and_the_socket_stays_usable(signed_in, size):
    browser, session_id = signed_in

    sent = _user_message("x" * size)

    async def scenario() -> tuple[dict, list[dict]]:
        chat = await browser.socket(session_id)
        try:
            await chat.connection.send(sent)
            refused = await chat.wait_for(lambda frame: frame["type"] == "error", timeout=120)
            return refused, await chat.turn("Hello after the long one")
        finally:
            await chat.close()

    refused, turn = asyncio.run(scenario())

    assert refused["code"] == "frame_too_large"
    expected = f"its frame is {size_words(len(sent))}; at most {max_frame_chars():,} characters"
    assert expected in refused["message"]
    assert turn[0]["type"] == "turn_started"
    assert turn[-1]["type"] == "turn_complete" and not turn[-1]["interrupted"]


def test_a_message_in_many_frames_is_refused_like_one_frame(signed_in):
    """A 10 MB message sent as fragments of 1 MB each: the length that counts is the message's."""
    browser, session_id = signed_in
    text = _user_message("y" * 10 * MB)
    fragments = [text[start : start + MB] for start in range(0, len(text), MB)]

    async def scenario() -> tuple[dict, dict]:
        chat = await browser.socket(session_id)
        try:
            await chat.connection.send(iter(fragments))
            refused = await chat.wait_for(lambda frame: frame["type"] == "error", timeout=120)
            await chat.send({"type": "ping"})
            return refused, await chat.wait_for(lambda frame: frame["type"] == "pong")
        finally:
            await chat.close()

    refused, pong = asyncio.run(scenario())

    assert refused["code"] == "frame_too_large"
    assert pong == {"type": "pong"}


def test_a_frame_within_the_limit_still_runs_its_turn(signed_in):
    browser, session_id = signed_in

    async def scenario() -> list[dict]:
        chat = await browser.socket(session_id)
        try:
            return await chat.turn("é" * 8000)
        finally:
            await chat.close()

    turn = asyncio.run(scenario())

    assert turn[-1]["type"] == "turn_complete" and not turn[-1]["interrupted"]


def test_a_frame_past_the_hard_limit_is_closed_with_1009_and_a_reason_unread(web, signed_in):
    """A frame announcing more than the hard limit is refused at its header: the server sends
    its close frame before the client has sent more than a few bytes of the payload."""
    browser, session_id = signed_in
    announced = 4 * WEBSOCKET_DISCARD_MAX_BYTES
    with socket.create_connection(("127.0.0.1", web.port), timeout=30) as raw:
        _handshake(raw, web, browser, session_id)
        mask = os.urandom(4)
        raw.sendall(struct.pack("!BBQ", 0x81, 0x80 | 127, announced) + mask + b"x" * 4096)
        code, reason = _close_frame(raw)

    assert code == 1009
    assert str(WEBSOCKET_DISCARD_MAX_BYTES) in reason


def _handshake(raw: socket.socket, web: Daphne, browser: Browser, session_id: str) -> None:
    key = b64encode(os.urandom(16)).decode()
    raw.sendall(
        (
            f"GET /ws/chat/{session_id}/ HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{web.port}\r\n"
            "Upgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
            f"Origin: {web.base_url}\r\n"
            f"Cookie: sessionid={browser.cookie('sessionid')}\r\n\r\n"
        ).encode()
    )
    response = b""
    while b"\r\n\r\n" not in response:
        response += raw.recv(4096)
    assert response.startswith(b"HTTP/1.1 101"), response


def _close_frame(raw: socket.socket) -> tuple[int, str]:
    """The code and reason of the first close frame the server sends (server frames are not
    masked; the frames before it, if any, are skipped)."""
    buffer = b""

    def read(count: int) -> bytes:
        nonlocal buffer
        while len(buffer) < count:
            chunk = raw.recv(65536)
            assert chunk, "the connection ended without a close frame"
            buffer += chunk
        taken, buffer = buffer[:count], buffer[count:]
        return taken

    while True:
        first, second = read(2)
        length = second & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", read(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", read(8))
        payload = read(length)
        if first & 0x0F == 0x8:
            (code,) = struct.unpack("!H", payload[:2])
            return code, payload[2:].decode()


def _raw_answer(web: Daphne, request: bytes) -> bytes:
    """What the server answers to ``request`` sent as it is, up to the end of its connection."""
    answer = b""
    with socket.create_connection(("127.0.0.1", web.port), timeout=30) as raw:
        raw.sendall(request)
        while chunk := raw.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    ("request_lines", "status"),
    [
        ([f"GET /api/sessions/?q={'a' * 20_000} HTTP/1.1"], b"414"),
        (["GET /accounts/login/ HTTP/1.1", f"X-Padding: {'a' * 20_000}"], b"431"),
    ],
    ids=["request-line", "header"],
)
def test_a_line_longer_than_the_server_reads_is_answered_not_dropped(web, request_lines, status):
    host = f"Host: 127.0.0.1:{web.port}"
    request = "\r\n".join([request_lines[0], host, *request_lines[1:], "", ""]).encode()

    answer = _raw_answer(web, request)

    assert answer.startswith(b"HTTP/1.1 " + status), answer[:200]
    assert b"too long" in answer


def test_a_long_query_string_under_the_limit_is_served(web):
    request = f"GET /accounts/login/?next={'a' * 8000} HTTP/1.1\r\nHost: 127.0.0.1:{web.port}\r\n"
    answer = _raw_answer(web, (request + "Connection: close\r\n\r\n").encode())

    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


def _head_and_answer(web: Daphne, head: str, body: bytes = b"", timeout: float = 10) -> bytes:
    """The answer to ``head`` (and ``body``) while the client sends nothing more."""
    answer = b""
    with socket.create_connection(("127.0.0.1", web.port), timeout=timeout) as raw:
        raw.sendall(head.encode() + body)
        with contextlib.suppress(ConnectionResetError):
            while chunk := raw.recv(65536):
                answer += chunk
    return answer


def test_a_body_over_the_cap_is_answered_413_before_it_is_sent(web):
    """A 100 MB body was read and spooled in full before any view refused it."""
    head = (
        f"POST /api/sessions/ HTTP/1.1\r\nHost: 127.0.0.1:{web.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {100 * MB}\r\n\r\n"
    )

    answer = _head_and_answer(web, head, b'{"app_name": ')

    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_chunked_body_over_the_cap_is_cut_off_with_413(web):
    """Past REQUEST_BODY_MAX_BYTES (the server's default: room for an event append of
    MAX_EVENT_BYTES), however the body is sent."""
    chunk = b"x" * MB
    head = (
        f"POST /api/sessions/ HTTP/1.1\r\nHost: 127.0.0.1:{web.port}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    count = settings.REQUEST_BODY_MAX_BYTES // MB + 2
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(count))

    answer = _head_and_answer(web, head, body)

    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


SECURITY_HEADERS = (
    b"x-request-id",
    b"x-content-type-options",
    b"x-frame-options",
    b"referrer-policy",
    b"cross-origin-opener-policy",
    b"content-security-policy",
)


def _header_names(answer: bytes) -> set[bytes]:
    head = answer.partition(b"\r\n\r\n")[0].split(b"\r\n")[1:]
    return {line.partition(b":")[0].strip().lower() for line in head}


def test_mcp_refuses_an_event_stream_and_answers_with_the_sites_headers(web):
    """``GET /mcp/`` held a stream open for ever with any token; /mcp/ answers lacked the
    security headers and the request id every other door sends."""
    host = f"Host: 127.0.0.1:{web.port}\r\nConnection: close\r\n"
    stream = _head_and_answer(web, f"GET /mcp/ HTTP/1.1\r\n{host}Accept: text/event-stream\r\n\r\n")
    unsigned = _head_and_answer(
        web,
        f"POST /mcp/ HTTP/1.1\r\n{host}X-Request-ID: probe-43\r\n"
        "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n",
        b"{}",
    )
    api = _head_and_answer(web, f"GET /api/sessions/ HTTP/1.1\r\n{host}\r\n")

    assert stream.startswith(b"HTTP/1.1 405"), stream[:200]
    assert unsigned.startswith(b"HTTP/1.1 401"), unsigned[:200]
    for answer in (stream, unsigned, api):
        assert set(SECURITY_HEADERS) <= _header_names(answer), answer[:600]
    assert b"x-request-id: probe-43" in unsigned.lower()
