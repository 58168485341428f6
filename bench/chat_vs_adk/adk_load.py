"""ADK's side of one round of ``bench.chat_vs_adk``: N open HTTP/1.1 connections to its API
server, then M ``/run_sse`` turns started at the same moment on M of them.

The client is h11 on asyncio streams, one keep-alive connection a user, the counterpart of
``bench.ws_load``'s sockets, and its figures go into the same ``Results``. A turn must answer
200, stream at least one partial event, the partial texts making up the final reply, and end
its stream with no error event; anything else counts as an error.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import h11

from bench.chat_vs_adk.adk_server import APP_NAME
from bench.ws_load import (
    WAIT_SECONDS,
    Results,
    connection_timed,
    server_cpu_seconds,
    server_settle,
    turns_gather,
)

CONNECT_BATCH = 100


class HttpConnection:
    """One keep-alive HTTP/1.1 connection to 127.0.0.1:``port``."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.protocol = h11.Connection(our_role=h11.CLIENT)

    @classmethod
    async def open(cls, port: int) -> HttpConnection:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port), WAIT_SECONDS
        )
        return cls(reader, writer)

    async def stream(self, method: str, target: str, body: bytes) -> AsyncIterator[bytes]:
        """Send a request with a JSON ``body``; yield its response body as it arrives. An
        answer other than 200, or the server closing the connection, raises."""
        headers = [
            ("host", "127.0.0.1"),
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
        ]
        for event in (
            h11.Request(method=method, target=target, headers=headers),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.writer.write(self.protocol.send(event))
        while True:
            event = self.protocol.next_event()
            if event is h11.NEED_DATA:
                self.protocol.receive_data(
                    await asyncio.wait_for(self.reader.read(65536), WAIT_SECONDS)
                )
            elif isinstance(event, h11.Response):
                if event.status_code != 200:
                    raise RuntimeError(f"{target} answered {event.status_code}")
            elif isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self.protocol.start_next_cycle()
                return
            elif isinstance(event, h11.ConnectionClosed):
                raise RuntimeError(f"the server closed the connection during {target}")

    def close(self) -> None:
        self.writer.close()


def sse_events(buffer: bytearray) -> list[dict]:
    """The complete server-sent events at the start of ``buffer`` (taken out of it)."""
    events = []
    while (end := buffer.find(b"\n\n")) >= 0:
        block = bytes(buffer[:end])
        del buffer[: end + 2]
        events.extend(
            json.loads(line[len(b"data: ") :])
            for line in block.split(b"\n")
            if line.startswith(b"data: ")
        )
    return events


def event_text(event: dict) -> str:
    parts = (event.get("content") or {}).get("parts") or []
    return "".join(part.get("text") or "" for part in parts)


async def turn_run(
    connection: HttpConnection, n: int, session: tuple[str, str], text: str, results: Results
) -> None:
    """One ``/run_sse`` turn; checks its stream as a chat page would."""
    user_id, session_id = session
    body = json.dumps(
        {
            "app_name": APP_NAME,
            "user_id": user_id,
            "session_id": session_id,
            "new_message": {"role": "user", "parts": [{"text": text}]},
            "streaming": True,
        }
    ).encode()
    started = time.perf_counter()
    deltas: list[str] = []
    final_text = None
    buffer = bytearray()
    async for data in connection.stream("POST", "/run_sse", body):
        buffer += data
        for event in sse_events(buffer):
            if "error" in event:
                results.errors.append(f"turn {n}: error event: {event['error']}")
            elif event.get("partial"):
                if not deltas:
                    results.first_delta.append(time.perf_counter() - started)
                deltas.append(event_text(event))
            elif event.get("author") != "user" and event.get("content"):
                final_text = event_text(event)
    results.turn.append(time.perf_counter() - started)
    results.chunks.append(len(deltas))
    if not deltas or "".join(deltas) != final_text:
        results.errors.append(f"turn {n}: the partial events do not make up the reply")


async def load_run(
    *,
    port: int,
    sessions: list[tuple[str, str]],
    turns: int,
    message: str,
    settle: float,
    results: Results,
    server,
) -> tuple[dict[str, float], dict[str, float]]:
    """Open a connection a session, run ``turns`` turns at once, close them; the wall time and
    the server's processor time of each phase (seconds), as ``bench.ws_load.load_run``."""
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    cpu_before = server_cpu_seconds(server)
    started = time.perf_counter()
    connections: list[HttpConnection | None] = []
    for first in range(0, len(sessions), CONNECT_BATCH):
        batch = min(CONNECT_BATCH, len(sessions) - first)
        connections += await asyncio.gather(
            *(connection_timed(HttpConnection.open(port), results) for _ in range(batch))
        )
    wall["connect_all"] = time.perf_counter() - started
    await server_settle(server, settle)
    cpu_settled = server_cpu_seconds(server)
    cpu["connect_all"] = cpu_settled - cpu_before
    open_connections = [(n, c) for n, c in enumerate(connections) if c is not None]
    print(f"turns: starting {turns} /run_sse at once on {len(open_connections)} connections")
    started = time.perf_counter()
    await turns_gather(
        [
            turn_run(connection, n, sessions[n], message.format(n=n), results)
            for n, connection in open_connections[:turns]
        ],
        results,
    )
    wall["turns_all"] = time.perf_counter() - started
    cpu["turns_all"] = server_cpu_seconds(server) - cpu_settled
    print(f"turns: {len(results.turn)}/{turns} complete, {len(results.errors)} errors")
    for _, connection in open_connections:
        connection.close()
    return wall, cpu
