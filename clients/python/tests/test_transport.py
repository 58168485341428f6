"""The client's HTTP against a server that misbehaves on cue: what is sent again and what is
not, how ids and queries are sent, and connections left open when a loop ends.

The server here is a real one on a socket (the standard library's, on threads of its own),
answering each request as its script says: the real server cannot be made to drop a
connection or answer 503 at a chosen request.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent_memory_client import (
    AgentMemoryClient,
    ApiError,
    RequestTimeoutError,
    ServerError,
    TransportError,
)

OK = (200, {}, b'{"sessions": [], "next_page_token": null}')
CREATED = (201, {}, b'{"event": {"id": "e1"}, "last_update_time": 1.0}')
DROP = "drop"
SLOW = "slow"


class ScriptedServer(ThreadingHTTPServer):
    """Answers request after request from ``script`` (a status, headers and body, or
    ``DROP`` to close the connection unanswered), then ``OK``; keeps what it was sent."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ScriptedAnswer)
        self.script: list = []
        self.seen: list[tuple[str, str, bytes]] = []
        self.base_url = f"http://127.0.0.1:{self.server_address[1]}"
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _ScriptedAnswer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # connections kept alive, as the client keeps them
    server: ScriptedServer

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self.server.seen.append((self.command, self.path, self.rfile.read(length)))
        action = self.server.script.pop(0) if self.server.script else OK
        if action == DROP:
            self.close_connection = True
            return
        if action == SLOW:  # longer than the client waits
            time.sleep(0.5)
            action = OK
        status, headers, body = action
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args) -> None:
        """Quiet: the tests read ``seen``."""


@pytest.fixture
def scripted() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    yield server
    server.stop()


def client_of(server: ScriptedServer, **options) -> AgentMemoryClient:
    return AgentMemoryClient(base_url=server.base_url, api_key="key", **options)


EVENT = {"author": "user", "content": {"role": "user", "parts": [{"text": "hi"}]}}


async def test_a_write_refused_with_503_is_sent_again_until_it_is_taken(scripted):
    scripted.script = [(503, {"Retry-After": "0"}, b'{"detail": "busy"}'), CREATED]
    async with client_of(scripted) as client:
        stored = await client.append_event(app_name="a", user_id="u", session_id="s", event=EVENT)

    assert stored["event"]["id"] == "e1"
    assert [(method, body) for method, _, body in scripted.seen] == [
        ("POST", json.dumps(EVENT, separators=(",", ":")).encode())
    ] * 2


async def test_a_write_whose_connection_broke_is_not_sent_twice(scripted):
    scripted.script = [DROP, CREATED]
    async with client_of(scripted) as client:
        with pytest.raises(TransportError, match="POST"):
            await client.append_event(app_name="a", user_id="u", session_id="s", event=EVENT)

    assert len(scripted.seen) == 1


async def test_a_read_whose_connection_broke_is_sent_again(scripted):
    scripted.script = [DROP, OK]
    async with client_of(scripted) as client:
        page = await client.list_sessions(app_name="a", user_id="u")

    assert page["sessions"] == []
    assert len(scripted.seen) == 2


async def test_retries_end_with_the_servers_error(scripted):
    scripted.script = [(503, {"Retry-After": "0"}, b'{"detail": "down for upgrade"}')] * 3
    async with client_of(scripted, retries=2) as client:
        with pytest.raises(ServerError, match="down for upgrade"):
            await client.list_sessions(app_name="a", user_id="u")

    assert len(scripted.seen) == 3


async def test_a_429_is_sent_again_after_the_wait_it_names(scripted):
    scripted.script = [(429, {"Retry-After": "0.3"}, b'{"detail": "slow down"}'), OK]
    async with client_of(scripted) as client:
        started = time.monotonic()
        await client.list_sessions(app_name="a", user_id="u")

    assert time.monotonic() - started >= 0.3
    assert len(scripted.seen) == 2


async def test_ids_stay_one_path_segment_and_queries_are_sent_as_given(scripted):
    async with client_of(scripted) as client:
        await client.list_sessions(app_name="my app", user_id="a/b%c?d", page_size=5)

    [(_, target, _)] = scripted.seen
    # Twice encoded: the server's web server decodes the path once before routing it.
    assert target == "/api/v1/apps/my%2520app/users/a%252Fb%2525c%253Fd/sessions/?page_size=5"


async def test_a_redirect_is_not_followed_and_says_where_to(scripted):
    moved = (301, {"Location": "https://memory.example.com/api/v1/apps/a/"}, b"")
    scripted.script = [moved]
    async with client_of(scripted) as client:
        with pytest.raises(ApiError) as refused:
            await client.append_event(app_name="a", user_id="u", session_id="s", event=EVENT)

    assert refused.value.status == 301
    assert "redirected to https://memory.example.com/api/v1/apps/a/" in str(refused.value)
    assert len(scripted.seen) == 1


async def test_the_environments_proxy_is_used(scripted, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", scripted.base_url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    async with AgentMemoryClient(base_url="http://memory.example.invalid", api_key="k") as client:
        await client.list_sessions(app_name="a", user_id="u")

    [(_, target, _)] = scripted.seen
    assert target == "http://memory.example.invalid/api/v1/apps/a/users/u/sessions/"


async def test_no_proxy_names_the_hosts_reached_directly(scripted, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    async with client_of(scripted) as client:
        await client.list_sessions(app_name="a", user_id="u")

    [(_, target, _)] = scripted.seen
    assert target == "/api/v1/apps/a/users/u/sessions/"


def test_a_client_left_open_when_its_loops_end_leaves_nothing_open(scripted, caplog, monkeypatch):
    client = client_of(scripted)
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    loops = []

    async def use() -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        await client.list_sessions(app_name="a", user_id="u")

    # What earlier tests left for the collector would warn here too: collected first, so that
    # what is caught below is this client's.
    gc.collect()
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.ERROR):
        warnings.simplefilter("always")
        asyncio.run(use())
        asyncio.run(use())
        gc.collect()

    assert len(scripted.seen) == 2
    assert [str(warning.message) for warning in caught if "nclosed" in str(warning.message)] == []
    assert "nclosed" not in caplog.text
    assert [repr(failure.exc_value) for failure in unraisable] == []
    assert [loop() for loop in loops] == [None, None]  # nothing of a finished loop is kept


async def test_no_answer_within_the_timeout_raises_asyncio_timeout_error(scripted):
    scripted.script = [SLOW, SLOW, SLOW]
    async with client_of(scripted, timeout=0.2, retries=1) as client:
        with pytest.raises(asyncio.TimeoutError) as timed_out:
            await client.list_sessions(app_name="a", user_id="u")
        with pytest.raises(TimeoutError):
            await client.append_event(app_name="a", user_id="u", session_id="s", event=EVENT)

    assert isinstance(timed_out.value, RequestTimeoutError)
    assert isinstance(timed_out.value, TransportError)
    assert "no answer within 0.2 s" in str(timed_out.value)
    assert [method for method, _, _ in scripted.seen] == ["GET", "GET", "POST"]
