"""An ADK session service, driven by ``bench.sessions`` or ``bench.remote_sessions`` one step
at a time.

Runs in google-adk's own virtual environment (``bench.adk_venv``: google-adk 2.13
needs google-genai < 3) as ``python -m bench.adk_side --db-url postgresql+asyncpg://...``
(ADK's DatabaseSessionService) or ``--remote-url URL --api-key KEY`` (the client's
RemoteSessionService on our server). Reads one JSON command a line on stdin
(``{"op": ..., "args": {...}}``), runs it on a single event loop (so the engine and
its pool, or the HTTP connections, live across commands) and answers each with one
JSON line on stdout. ``AdkSide`` has the same operations as
``bench.ours_side.OursSide``, so a benchmark can alternate the sides in small steps
and all run under the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import sys
import time
from importlib.metadata import version
from pathlib import Path

from agent_memory_client.adk import RemoteSessionService
from agent_memory_client.adk.sessions import StoredSession
from agent_memory_client.client import session_path
from google.adk.errors import StaleSessionError
from google.adk.events import Event, EventActions
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.database_session_service import DatabaseSessionService
from google.genai import types
from sqlalchemy import text

from bench.workload import APP_NAME, Turn, chat_turns, list_session_state, writer_delta


def _event(*, invocation_id: str, author: str, role: str, text_: str, delta: dict) -> Event:
    return Event(
        invocation_id=invocation_id,
        author=author,
        content=types.Content(role=role, parts=[types.Part(text=text_)]),
        actions=EventActions(state_delta=delta),
    )


def _turn_event(turn: Turn) -> Event:
    """The workload's turn as a new ADK event (a fresh id; its own copy of the delta)."""
    return _event(
        invocation_id=turn.invocation_id,
        author=turn.author,
        role=turn.role,
        text_=turn.text,
        delta=dict(turn.state_delta),
    )


class AdkSide:
    """The benchmark's operations on an ADK session service; durations in seconds."""

    def __init__(self, service: BaseSessionService) -> None:
        self.service = service
        self.session = None
        self.turns = []
        self.events_user = self.list_user = ""

    async def setup(self, *, events_user: str, list_user: str, events: int) -> dict:
        """Create the tables (ADK's database), warm the connections up and create the session
        the events go to."""
        if isinstance(self.service, DatabaseSessionService):
            await self.service.prepare_tables()
        self.events_user, self.list_user = events_user, list_user
        await self.service.get_session(app_name=APP_NAME, user_id=events_user, session_id="none")
        self.session = await self.service.create_session(
            app_name=APP_NAME, user_id=events_user, state={"user:display_name": "Bench user"}
        )
        self.turns = chat_turns(events)
        packages = ("google-adk", "google-genai", "sqlalchemy", "agent-memory-client", "aiohttp")
        return {name: version(name) for name in packages}

    async def append(self, *, start: int, stop: int) -> list[float]:
        samples = []
        for turn in self.turns[start:stop]:
            event = _turn_event(turn)
            started = time.perf_counter()
            await self.service.append_event(self.session, event)
            samples.append(time.perf_counter() - started)
        return samples

    async def create_sessions(self, *, start: int, stop: int) -> list[float]:
        samples = []
        for index in range(start, stop):
            state = list_session_state(index)
            started = time.perf_counter()
            await self.service.create_session(
                app_name=APP_NAME, user_id=self.list_user, state=state
            )
            samples.append(time.perf_counter() - started)
        return samples

    async def analyze(self) -> None:
        if isinstance(self.service, DatabaseSessionService):
            async with self.service.db_engine.begin() as connection:
                await connection.execute(text("ANALYZE"))

    async def get_session(self, *, recent: int | None, repeat: int, expected: int) -> list[float]:
        """``repeat`` timed reads of the events session; each must hold ``expected`` events."""
        config = GetSessionConfig(num_recent_events=recent) if recent is not None else None
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            session = await self.service.get_session(
                app_name=APP_NAME,
                user_id=self.events_user,
                session_id=self.session.id,
                config=config,
            )
            samples.append(time.perf_counter() - started)
            if len(session.events) != expected:
                raise RuntimeError(f"got {len(session.events)} events, expected {expected}")
            # Freeing a read session (and the collection that can set off) is the work of
            # whoever held it, not of the next read: it happens here, outside the timing.
            del session
        return samples

    async def list_all(self, *, expected: int) -> dict:
        """One list_sessions of the listing user (ADK returns every session at once)."""
        started = time.perf_counter()
        response = await self.service.list_sessions(app_name=APP_NAME, user_id=self.list_user)
        elapsed = time.perf_counter() - started
        if len(response.sessions) != expected:
            raise RuntimeError(f"listed {len(response.sessions)} sessions, expected {expected}")
        return {"total": elapsed, "pages": [elapsed]}

    async def concurrency(self, *, user_id: str, writers: int, per_writer: int) -> dict:
        """``writers`` tasks append ``per_writer`` events each to one new session, no retries.

        Each writer holds its own copy of the session, loaded before any
        writes, as separate workers would; ADK refuses appends from a copy
        that another writer has made stale.
        """
        session = await self.service.create_session(app_name=APP_NAME, user_id=user_id)
        config = GetSessionConfig(num_recent_events=0)
        copies = [
            await self.service.get_session(
                app_name=APP_NAME, user_id=user_id, session_id=session.id, config=config
            )
            for _ in range(writers)
        ]
        counts = {"stored": 0, "stale": 0}

        async def writer(number: int) -> None:
            for index in range(per_writer):
                event = _event(
                    invocation_id=f"e-writer-{number}",
                    author=f"writer_{number}",
                    role="model",
                    text_=f"writer {number} event {index}",
                    delta=writer_delta(writer=number, index=index),
                )
                try:
                    await self.service.append_event(copies[number], event)
                    counts["stored"] += 1
                except StaleSessionError:
                    counts["stale"] += 1

        started = time.perf_counter()
        await asyncio.gather(*(writer(number) for number in range(writers)))
        elapsed = time.perf_counter() - started
        stored = await self.service.get_session(
            app_name=APP_NAME, user_id=user_id, session_id=session.id
        )
        return {
            "attempted": writers * per_writer,
            "stored": counts["stored"],
            "stale_errors": counts["stale"],
            "events_in_session": len(stored.events),
            "seconds": elapsed,
        }

    async def close(self) -> None:
        await self.service.close()


class RemoteClientSide(AdkSide):
    """``AdkSide`` on RemoteSessionService, with the measures that say where its time goes."""

    async def http_floor(self, *, repeat: int) -> list[float]:
        """``repeat`` requests of the server's cheapest route (``/healthz``) on the service's
        own connections: HTTP, daphne and Django's request handling, no API, no database."""
        samples = []
        for _ in range(repeat):
            started = time.perf_counter()
            await self.service.client.request("GET", "/healthz")
            samples.append(time.perf_counter() - started)
        return samples

    async def client_costs(self, *, repeat: int, recent: int) -> dict[str, list[float]]:
        """The client's own share of an append and of a read of ``recent`` events: encoding
        the event, decoding the append's answer, decoding the session (into ADK's objects),
        each timed ``repeat`` times on answers the server gave."""
        event = _turn_event(self.turns[0])
        scratch = await self.service.create_session(app_name=APP_NAME, user_id=self.list_user)
        path = session_path(APP_NAME, self.list_user, scratch.id) + "events/"
        appended = await self.service.client.request(
            "POST", path, content=event.model_dump_json(exclude_none=True).encode()
        )
        read = await self.service.client.request(
            "GET",
            session_path(APP_NAME, self.events_user, self.session.id),
            params={"num_recent_events": recent},
        )
        costs: dict[str, list[float]] = {"encode_event": [], "decode_append": [], "decode_read": []}
        for _ in range(repeat):
            started = time.perf_counter()
            event.model_dump_json(exclude_none=True).encode()
            encoded = time.perf_counter()
            json.loads(appended.content)
            decoded_append = time.perf_counter()
            StoredSession.model_validate_json(read.content).to_session()
            decoded_read = time.perf_counter()
            costs["encode_event"].append(encoded - started)
            costs["decode_append"].append(decoded_append - encoded)
            costs["decode_read"].append(decoded_read - decoded_append)
        return costs


async def _serve(side: AdkSide) -> None:
    loop = asyncio.get_running_loop()
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        command = json.loads(line)
        result = await getattr(side, command["op"])(**command.get("args", {}))
        sys.stdout.write(json.dumps({"result": result}) + "\n")
        sys.stdout.flush()
        if command["op"] == "close":
            return


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db-url", help="ADK's DatabaseSessionService on this URL (asyncpg)")
    parser.add_argument("--remote-url", help="RemoteSessionService on the server at this URL")
    parser.add_argument("--api-key", help="the server's API key (with --remote-url)")
    args = parser.parse_args(argv)
    if args.remote_url:
        side = RemoteClientSide(
            RemoteSessionService(base_url=args.remote_url, api_key=args.api_key)
        )
    else:
        side = AdkSide(DatabaseSessionService(db_url=args.db_url))
    server_gc_tuning()
    asyncio.run(_serve(side))


def server_gc_tuning() -> None:
    """The product's start-up GC tuning (chatapp/process.py), so both sides run alike.

    Loaded from its file: importing the ``chatapp`` package would need Celery,
    which this environment does not have.
    """
    path = Path(__file__).resolve().parent.parent / "chatapp" / "process.py"
    spec = importlib.util.spec_from_file_location("product_process", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.process_tune_gc()


if __name__ == "__main__":
    main()
