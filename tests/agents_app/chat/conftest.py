"""Fixtures of the chat socket tests."""

from __future__ import annotations

import asyncio
import time
import warnings

import pytest

from core import shutdown

WORK_WAIT_SECONDS = 20


async def turns_ended() -> None:
    """Wait until the work the sockets left behind is over: turns that went on without
    their socket, a turn's relay stopping (not an assertion: the test's event loop must not
    close under them, or a channel-layer receive would be left tied to it)."""
    deadline = time.monotonic() + WORK_WAIT_SECONDS
    while shutdown.work_pending() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    if pending := shutdown.work_pending():
        # Not a failure of the test that waited: some earlier one left work that never ends,
        # and every later wait costs the whole deadline. Named, so that it can be found.
        warnings.warn(
            f"work still running after {WORK_WAIT_SECONDS} s: "
            + "; ".join(f"{task.get_name()} {task.get_coro()!r}" for task in pending),
            stacklevel=2,
        )


@pytest.fixture(autouse=True)
async def sockets_work_ended():
    yield
    await turns_ended()
