"""Fixtures of the multi-process suite: one running stack shared by its tests.

The stack needs PostgreSQL and Redis binaries and is what CI's PostgreSQL + Redis pass is
for, so the suite runs there (``DATABASE_URL`` and ``REDIS_URL`` set) and is skipped, with
that reason, on the embedded pass.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.multiprocess.stack import Browser, Stack, running_stack


def _distributed_pass() -> bool:
    return bool(os.environ.get("REDIS_URL")) and os.environ.get("DATABASE_URL", "").startswith(
        ("postgres://", "postgresql://")
    )


def pytest_collection_modifyitems(config, items) -> None:
    if _distributed_pass():
        return
    skip = pytest.mark.skip(
        reason="multi-process suite: runs in CI's PostgreSQL + Redis pass "
        "(DATABASE_URL=postgres://... and REDIS_URL set)"
    )
    for item in items:
        if item.get_closest_marker("multiprocess"):
            item.add_marker(skip)


@pytest.fixture(scope="package")
def stack() -> Iterator[Stack]:
    """Started for this package's tests only, and stopped after them."""
    with running_stack() as running:
        yield running


@pytest.fixture
def healthy_stack(stack: Stack, request) -> Iterator[Stack]:
    """The stack with every server and process up (a fault test may have stopped one); the
    processes' logs are printed after each test, so a failure shows them."""
    if not stack.redis.answers():
        stack.redis.start()
    for process in stack.processes():
        if not process.alive():
            raise RuntimeError(f"{process.name} is not running:\n{process.log_tail()}")
    yield stack
    print(stack.logs())


@pytest.fixture
def browser(healthy_stack: Stack) -> Browser:
    """A new user, signed up (and so signed in) on process A."""
    return Browser(healthy_stack.web_a.base_url).sign_up()
