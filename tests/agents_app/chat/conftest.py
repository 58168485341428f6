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
            + "; ".join(f"{task.get_name()} {_where(task)}" for task in pending)
            + ". Every task of the loop: "
            + "; ".join(
                f"{task.get_name()} {_where(task)}"
                for task in asyncio.all_tasks()
                if task is not asyncio.current_task()
            ),
            stacklevel=2,
        )


def _where(task: asyncio.Task) -> str:
    """Where ``task`` waits: each coroutine it is in, outermost first, at the line it awaits,
    then what the innermost one awaits."""
    places, awaited = [], task.get_coro()
    while getattr(awaited, "cr_frame", None) is not None:
        frame = awaited.cr_frame
        places.append(f"{frame.f_code.co_qualname} ({frame.f_code.co_filename}:{frame.f_lineno})")
        awaited = awaited.cr_await
    return " > ".join([*places, repr(awaited)])


@pytest.fixture(autouse=True)
async def sockets_work_ended():
    yield
    await turns_ended()
