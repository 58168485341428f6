"""The database connections of every process stay within docs/deploy.md's budget under load.

Two web processes, a worker and beat take sequences and bursts of REST requests and chat turns
(some of which start memory jobs) while a thread counts, every 50 ms, the connections each
process holds in ``pg_stat_activity``. Before the connection pool, a web process kept one
connection per request thread it had used (77 after 200 requests in a row).
"""

from __future__ import annotations

import asyncio
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings

from core.async_database import APPLICATION_NAME, CONNECTIONS_PER_LOOP
from tests.multiprocess.stack import (
    AppProcess,
    Daphne,
    Stack,
    async_wait_until,
    database_connections_by_process,
    database_connections_by_process_and_application,
    frames_of,
)

pytestmark = pytest.mark.multiprocess

SAMPLE_INTERVAL_SECONDS = 0.05
# A process that only listens on the given port of a loopback address the database is not on.
PORT_HOLDER = """
import socket, sys, time
listener = socket.socket()
listener.bind(("127.0.0.2", int(sys.argv[1])))
listener.listen()
print("listening", flush=True)
time.sleep(600)
"""


def budget(stack: Stack) -> dict[str, int]:
    """docs/deploy.md, "PostgreSQL": a web process holds at most its pool and its event loop's
    async connections; a worker one connection per child (the stack's workers have one); beat
    one."""
    web = settings.DATABASE_POOL_MAX_SIZE + CONNECTIONS_PER_LOOP
    return {
        process.name: web if isinstance(process, Daphne) else 1 for process in stack.processes()
    }


class ConnectionSampler(threading.Thread):
    """Counts each process's connections until stopped, keeping each one's highest count, in
    all and by the application name they gave (a web process's pool and its async ones)."""

    def __init__(self, stack: Stack) -> None:
        super().__init__(daemon=True)
        self.stack = stack
        self.highest: dict[str, int] = {}
        self.highest_by_application: dict[tuple[str, str], int] = {}
        self.samples = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            counts = database_connections_by_process_and_application(self.stack)
            totals: dict[str, int] = {}
            for (name, application), count in counts.items():
                totals[name] = totals.get(name, 0) + count
                key = (name, application)
                self.highest_by_application[key] = max(
                    self.highest_by_application.get(key, 0), count
                )
            for name, count in totals.items():
                self.highest[name] = max(self.highest.get(name, 0), count)
            self.samples += 1
            self.stopping.wait(SAMPLE_INTERVAL_SECONDS)

    def stop(self) -> dict[str, int]:
        self.stopping.set()
        self.join(timeout=30)
        return self.highest


def _requests(browser, base_urls: list[str], count: int, concurrency: int) -> list[int]:
    """``count`` GETs of the session list, spread over ``base_urls``; their status codes."""

    def one(number: int) -> int:
        base_url = base_urls[number % len(base_urls)]
        status, _, _ = browser.api("GET", "/api/sessions/", base_url=base_url)
        return status

    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, range(count)))


async def _turns(socket, number: int) -> list[dict]:
    """Two turns in a row on one socket, the first asking for a memory; the frames of both."""
    remembered = await socket.turn(f"Don't forget that my lucky number is {number}.")
    return remembered + await socket.turn("And what else?")


async def test_connections_stay_within_the_budget_under_requests_and_turns(healthy_stack, browser):
    stack = healthy_stack
    web = [stack.web_a.base_url, stack.web_b.base_url]
    sampler = ConnectionSampler(stack)
    sampler.start()
    try:
        sequence = await asyncio.to_thread(_requests, browser, web, 200, 1)
        burst = await asyncio.to_thread(_requests, browser, web, 400, 32)

        sockets = []
        for number in range(6):
            session_id = await asyncio.to_thread(browser.session_create)
            sockets.append(await browser.socket(session_id, base_url=web[number % 2]))
        during_turns = asyncio.gather(
            *(_turns(socket, number) for number, socket in enumerate(sockets))
        )
        burst_during_turns = await asyncio.to_thread(_requests, browser, web, 200, 16)
        answered = await during_turns
        for socket in sockets:
            await socket.close()
        user_pk = await asyncio.to_thread(browser.user_pk, stack.postgres)
        await async_wait_until(
            lambda: (
                stack.postgres.rows(
                    "SELECT count(*) FROM memory_app_generationjob "
                    "WHERE user_id = %s AND status = 'succeeded'",
                    user_pk,
                )[0][0]
                >= 6
            ),
            timeout=90,
            what="the worker to finish the six memory jobs",
        )
    finally:
        highest = sampler.stop()

    assert set(sequence) == set(burst) == set(burst_during_turns) == {200}
    assert [len(frames_of(frames, "turn_complete")) for frames in answered] == [2] * 6
    by_application = sampler.highest_by_application
    print(
        f"most connections seen per process over {sampler.samples} samples: {highest}; "
        f"by application name: {by_application}"
    )
    assert sampler.samples > 20
    assert highest[stack.web_a.name] >= 1 and highest[stack.web_b.name] >= 1, (
        "the web processes' connections are seen (else the count proves nothing)"
    )
    allowed = budget(stack)
    highest.pop("other", None)  # the test's own connections
    over = {name: count for name, count in highest.items() if count > allowed[name]}
    assert over == {}, f"over the budget {allowed}: {over} (by application name: {by_application})"
    for web in (stack.web_a.name, stack.web_b.name):
        assert by_application.get((web, ""), 0) <= settings.DATABASE_POOL_MAX_SIZE
        assert by_application.get((web, APPLICATION_NAME), 0) <= CONNECTIONS_PER_LOOP


def test_a_connection_counts_for_no_process_that_only_shares_its_port_number(stack):
    """Linux gives connections to different servers the same local port number, so a process
    of the stack can hold a socket (to Redis, say) numbered as another client's connection to
    the database: counted by the number alone, that connection was the process's too, and the
    budget test once read a web process's twelve connections as thirteen."""
    with stack.postgres.connect() as other:
        [(port,)] = other.execute(
            "SELECT client_port FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        ).fetchall()
        holder = AppProcess(
            "port-holder", [sys.executable, "-c", PORT_HOLDER, str(port)], stack.env, stack.folder
        ).start()
        try:
            holder.wait_for_log("listening")
            counts = database_connections_by_process(
                Stack(stack.folder, stack.postgres, stack.redis, stack.env, extra=[holder])
            )
        finally:
            holder.stop()

    assert counts["port-holder"] == 0
    assert counts["other"] >= 1
