"""The client's HTTP against a server that misbehaves on cue: what is sent again and what is
not, how ids and queries are sent, and connections left open when a loop ends.

The server here is a real one on a socket (asyncio, on a thread of its own), answering each
request as its script says: the real server cannot be made to drop a connection or answer
503 at a chosen request.
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

import pytest

from agent_memory_client import AgentMemoryClient, ApiError, ServerError, TransportError

OK = (200, {}, b'{"sessions": [], "next_page_token": null}')
CREATED = (201, {}, b'{"event": {"id": "e1"}, "last_update_time": 1.0}')
DROP = "drop"


class ScriptedServer:
    """Answers request after request from ``script`` (a status, headers and body, or
    ``DROP`` to close the connection unanswered), then ``OK``; keeps what it was sent."""

    def __init__(self) -> None:
        self.script: list = []
        self.seen: list[tuple[str, str, bytes]] = []
        self.loop = asyncio.new_event_loop()
        started = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(started,), daemon=True)
        self.thread.start()
        started.wait(10)

    def _serve(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._answer, "127.0.0.1", 0)
        )
        self.base_url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        started.set()
        self.loop.run_forever()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                method, target, _ = head[0].split(" ", 2)
                length = next(
                    (
                        int(line.split(":", 1)[1])
                        for line in head
                        if line.lower().startswith("content-length:")
                    ),
                    0,
                )
                self.seen.append((method, target, await reader.readexactly(length)))
                action = self.script.pop(0) if self.script else OK
                if action == DROP:
                    return
                status, headers, body = action
                lines = [f"HTTP/1.1 {status} Scripted", "Content-Type: application/json"]
                lines += [f"{name}: {value}" for name, value in headers.items()]
                lines.append(f"Content-Length: {len(body)}")
                writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    async def _close(self) -> None:
        self.server.close()
        await self.server.wait_closed()


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
    assert target == "/api/v1/apps/my%20app/users/a%2Fb%25c%3Fd/sessions/?page_size=5"


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
