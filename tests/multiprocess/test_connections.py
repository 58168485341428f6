"""The database connections of every process stay within docs/deploy.md's budget under load.

Two web processes, a worker and beat take sequences and bursts of REST requests and chat turns
(some of which start memory jobs) while a thread counts, every 50 ms, the connections each
process holds in ``pg_stat_activity``. Before the connection pool, a web process kept one
connection per request thread it had used (77 after 200 requests in a row).
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.conf import settings

from core.async_database import CONNECTIONS_PER_LOOP
from tests.multiprocess.stack import (
    Daphne,
    Stack,
    async_wait_until,
    database_connections_by_process,
    frames_of,
)

pytestmark = pytest.mark.multiprocess

SAMPLE_INTERVAL_SECONDS = 0.05


def budget(stack: Stack) -> dict[str, int]:
    """docs/deploy.md, "PostgreSQL": a web process holds at most its pool and its event loop's
    async connections; a worker one connection per child (the stack's workers have one); beat
    one."""
    web = settings.DATABASE_POOL_MAX_SIZE + CONNECTIONS_PER_LOOP
    return {
        process.name: web if isinstance(process, Daphne) else 1 for process in stack.processes()
    }


class ConnectionSampler(threading.Thread):
    """Counts each process's connections until stopped, keeping each one's highest count."""

    def __init__(self, stack: Stack) -> None:
        super().__init__(daemon=True)
        self.stack = stack
        self.highest: dict[str, int] = {}
        self.samples = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            for name, count in database_connections_by_process(self.stack).items():
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
    print(f"most connections seen per process over {sampler.samples} samples: {highest}")
    assert sampler.samples > 20
    assert highest[stack.web_a.name] >= 1 and highest[stack.web_b.name] >= 1, (
        "the web processes' connections are seen (else the count proves nothing)"
    )
    allowed = budget(stack)
    highest.pop("other", None)  # the test's own connections
    over = {name: count for name, count in highest.items() if count > allowed[name]}
    assert over == {}, f"over the budget {allowed}: {over}"
