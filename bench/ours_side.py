"""Our SessionService, driven by ``bench.sessions`` one step at a time, in its process.

Django must already be set up on the benchmark database. ``OursSide`` has the
same operations as ``bench.adk_side.AdkSide``. The timed calls go through the
ADK-shaped async API, as an agent calls it; the concurrency case calls the
sync functions from threads, as several web workers would.
"""

from __future__ import annotations

import threading
import time

from asgiref.sync import sync_to_async
from django.db import connection
from google.genai import types

from bench.workload import APP_NAME, Turn, chat_turns, list_session_state, writer_delta
from sessions_app import selectors, services
from sessions_app.events import Event, EventActions
from sessions_app.models import EventRecord
from sessions_app.services import SessionService
from sessions_app.types import GetSessionConfig, Session


def _event(*, invocation_id: str, author: str, role: str, text: str, delta: dict) -> Event:
    return Event(
        invocation_id=invocation_id,
        author=author,
        content=types.Content(role=role, parts=[types.Part(text=text)]),
        actions=EventActions(state_delta=delta),
    )


def turn_event(turn: Turn) -> Event:
    """The workload's turn as a new event (a fresh id; its own copy of the delta)."""
    return _event(
        invocation_id=turn.invocation_id,
        author=turn.author,
        role=turn.role,
        text=turn.text,
        delta=dict(turn.state_delta),
    )


def _analyze() -> None:
    """Refresh the planner statistics of the whole database, as after any bulk load."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


class OursSide:
    """The benchmark's operations on our SessionService; durations in seconds."""

    def __init__(self, *, page_size: int) -> None:
        self.service = SessionService()
        self.page_size = page_size
        self.session: Session | None = None
        self.turns = []
        self.events_user = self.list_user = ""

    async def setup(self, *, events_user: str, list_user: str, events: int) -> dict:
        """Open the connection and create the session the events go to."""
        self.events_user, self.list_user = events_user, list_user
        await self.service.get_session(app_name=APP_NAME, user_id=events_user, session_id="none")
        self.session = await self.service.create_session(
            app_name=APP_NAME, user_id=events_user, state={"user:display_name": "Bench user"}
        )
        self.turns = chat_turns(events)
        return {}

    async def append(self, *, start: int, stop: int) -> list[float]:
        samples = []
        for turn in self.turns[start:stop]:
            event = turn_event(turn)
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
        await sync_to_async(_analyze)()

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
        """Every page of the listing user's sessions, one list_sessions call per page."""
        pages = []
        seen = 0
        token = None
        while True:
            started = time.perf_counter()
            response = await self.service.list_sessions(
                app_name=APP_NAME,
                user_id=self.list_user,
                page_size=self.page_size,
                page_token=token,
            )
            pages.append(time.perf_counter() - started)
            seen += len(response.sessions)
            token = response.next_page_token
            if not token:
                break
        if seen != expected:
            raise RuntimeError(f"listed {seen} sessions, expected {expected}")
        return {"total": sum(pages), "pages": pages}

    def concurrency(self, *, user_id: str, writers: int, per_writer: int) -> dict:
        """``writers`` threads append ``per_writer`` events each to one new session; checks it.

        Each thread holds its own copy of the session, loaded before any
        writes, as separate workers would. Returns counts, the wall time, and
        whether the sequence numbers are contiguous, each writer's events are
        in its own order, and every writer's state keys hold its last value.
        """
        session = services.session_create(app_name=APP_NAME, user_id=user_id)
        config = GetSessionConfig(num_recent_events=0)
        copies = [
            selectors.session_get(
                app_name=APP_NAME, user_id=user_id, session_id=session.id, config=config
            )
            for _ in range(writers)
        ]
        barrier = threading.Barrier(writers + 1)
        errors: list[str] = []

        def writer(number: int) -> None:
            barrier.wait()
            try:
                for index in range(per_writer):
                    event = _event(
                        invocation_id=f"e-writer-{number}",
                        author=f"writer_{number}",
                        role="model",
                        text=f"writer {number} event {index}",
                        delta=writer_delta(writer=number, index=index),
                    )
                    services.event_append(session=copies[number], event=event)
            except Exception as error:  # reported with the figures, not lost in a thread
                errors.append(f"writer {number}: {error!r}")
            finally:
                connection.close()

        threads = [threading.Thread(target=writer, args=(number,)) for number in range(writers)]
        for thread in threads:
            thread.start()
        barrier.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started

        rows = list(
            EventRecord.objects.filter(session__session_id=session.id)
            .order_by("sequence")
            .values_list("sequence", "author", "actions")
        )
        order_by_writer: dict[str, list[int]] = {}
        for _, author, actions in rows:
            order_by_writer.setdefault(author, []).append(actions["state_delta"][author])
        state = selectors.session_get(
            app_name=APP_NAME, user_id=user_id, session_id=session.id
        ).state
        last = per_writer - 1
        return {
            "attempted": writers * per_writer,
            "stored": len(rows),
            "errors": errors,
            "contiguous": [row[0] for row in rows] == list(range(1, len(rows) + 1)),
            "each_writer_in_order": len(order_by_writer) == writers
            and all(values == list(range(per_writer)) for values in order_by_writer.values()),
            "state_keys_kept": "temp:step" not in state
            and all(
                state.get(f"writer_{number}") == last and state.get(f"user:writer_{number}") == last
                for number in range(writers)
            ),
            "seconds": elapsed,
        }
