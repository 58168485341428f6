"""The service API called in this process: the ASGI application without a server or a socket.

``bench.remote_sessions`` runs it beside the remote side to split the remote time: what the
server's Python costs a request (Django's handler, middleware, DRF, the view, the store) and
what the HTTP server, the client's HTTP library and the switches between processes add.
Django must already be set up on the benchmark database with the daphne's settings (its
Redis as cache and broker, background work to Celery). The events and reads are the remote
side's: the same chat (``bench.workload``), as ADK's Event JSON, to a session of its own.
"""

from __future__ import annotations

import json
import time

from channels.testing import HttpCommunicator

from bench.ours_side import turn_event
from bench.workload import APP_NAME, chat_turns

END_USER = "bench-asgi"


class AsgiSide:
    """The benchmark's append and read through ``chatapp.asgi.application``; durations in
    seconds, from the request handed to the application to the last of its response sent,
    as a client would wait (the request's work after its response is done before the next
    request, untimed)."""

    def __init__(self, *, api_key: str) -> None:
        from chatapp.asgi import application

        self.application = application
        self.api_key = api_key
        self.session_path = ""
        self.turns = []

    async def request(
        self, method: str, path: str, *, body: bytes = b""
    ) -> tuple[int, bytes, float]:
        """One request (``path`` with its query): its status, its body and how long until the
        body was sent. The application's work after that is awaited, untimed."""
        headers = [
            (b"host", b"127.0.0.1"),
            (b"authorization", f"Bearer {self.api_key}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),  # Django reads no more than it says
        ]
        communicator = HttpCommunicator(self.application, method, path, body, headers)
        started = time.perf_counter()
        response = await communicator.get_response(timeout=30)
        took = time.perf_counter() - started
        await communicator.wait(timeout=30)
        return response["status"], response["body"], took

    async def setup(self, *, events: int) -> None:
        base = f"/api/v1/apps/{APP_NAME}/users/{END_USER}/sessions/"
        state = json.dumps({"state": {"user:display_name": "Bench user"}}).encode()
        status, body, _ = await self.request("POST", base, body=state)
        if status != 201:
            raise RuntimeError(f"creating the session answered {status}: {body[:300]!r}")
        self.session_path = f"{base}{json.loads(body)['id']}/"
        self.turns = chat_turns(events)

    async def append(self, *, start: int, stop: int) -> list[float]:
        samples = []
        for turn in self.turns[start:stop]:
            body = turn_event(turn).model_dump_json(exclude_none=True).encode()
            status, answer, took = await self.request(
                "POST", self.session_path + "events/", body=body
            )
            samples.append(took)
            if status != 201:
                raise RuntimeError(f"an append answered {status}: {answer[:300]!r}")
        return samples

    async def get_session(self, *, recent: int, repeat: int, expected: int) -> list[float]:
        samples = []
        query = f"num_recent_events={recent}"
        for _ in range(repeat):
            status, answer, took = await self.request("GET", f"{self.session_path}?{query}")
            samples.append(took)
            if status != 200 or len(json.loads(answer)["events"]) != expected:
                raise RuntimeError(f"a read answered {status}: {answer[:300]!r}")
        return samples

    async def http_floor(self, *, repeat: int) -> list[float]:
        """``/healthz`` in this process: Django's handler and the probe, no server."""
        return [(await self.request("GET", "/healthz"))[2] for _ in range(repeat)]
