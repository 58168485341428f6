"""Fixtures of the chat socket tests."""

from __future__ import annotations

import asyncio
import time

import pytest

from core import shutdown

WORK_WAIT_SECONDS = 20


async def turns_ended() -> None:
    """Wait until the work the sockets left behind is over: turns that went on without
    their socket, a turn's relay stopping (not an assertion: the test's event loop must not
    close under them, or a channel-layer receive would be left tied to it)."""
    deadline = time.monotonic() + WORK_WAIT_SECONDS
    while shutdown.work_count() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


@pytest.fixture(autouse=True)
async def sockets_work_ended():
    yield
    await turns_ended()
