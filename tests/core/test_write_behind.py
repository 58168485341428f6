"""Rows written behind (core.write_behind): the service API's audit rows, held a moment by the
web process and written together, and what is still held when the process stops."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async

from agents_app.models import ServiceRequest
from agents_app.services import service_request_record_async
from core import write_behind

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.timeout(60),
]


@pytest.fixture(autouse=True)
def postgres_only(requires_postgres):
    """Held rows are sent from the event loop's own connections, which exist on PostgreSQL
    only (elsewhere every row is written at once)."""


async def _audited(route: str) -> None:
    await service_request_record_async(
        app_name="support",
        service_account_id=None,
        key_prefix="abc",
        method="GET",
        route=route,
        status_code=200,
        detail="",
        end_user_id=None,
    )


async def _rows(route_prefix: str = "") -> int:
    return await ServiceRequest.objects.filter(route__startswith=route_prefix).acount()


async def _rows_within(seconds: float, *, expected: int) -> float:
    """Seconds until ``expected`` rows are there, polling; fails after ``seconds``."""
    started = time.monotonic()
    while await _rows() < expected:
        assert time.monotonic() - started < seconds, f"{await _rows()} rows, not {expected}"
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def test_rows_are_held_then_written_together(settings):
    settings.WRITE_BEHIND_SECONDS = 0.5
    for number in range(3):
        await _audited(f"route-{number}")

    assert await _rows() == 0
    await _rows_within(10, expected=3)
    routes = ServiceRequest.objects.order_by("id").values_list("route", flat=True)
    assert [route async for route in routes] == ["route-0", "route-1", "route-2"]


async def test_a_full_queue_is_written_without_waiting(settings):
    settings.WRITE_BEHIND_SECONDS = 60
    for number in range(write_behind.WRITE_BEHIND_MAX_ROWS):
        await _audited(f"route-{number}")

    await _rows_within(10, expected=write_behind.WRITE_BEHIND_MAX_ROWS)


async def test_a_flush_writes_what_is_held_at_once(settings):
    settings.WRITE_BEHIND_SECONDS = 60
    await _audited("a")
    await _audited("b")

    await write_behind.write_behind_flush()

    assert await _rows() == 2


async def test_what_is_held_when_the_process_exits_is_written(settings):
    settings.WRITE_BEHIND_SECONDS = 60
    await _audited("a")
    await _audited("b")

    await sync_to_async(write_behind.write_behind_at_exit)()

    assert await _rows() == 2
    await write_behind.write_behind_flush()
    assert await _rows() == 2, "nothing is written twice"


async def test_a_batch_that_fails_is_logged_with_the_rows_it_lost(settings, caplog):
    settings.WRITE_BEHIND_SECONDS = 60
    await _audited("kept")
    await write_behind.write_behind("INSERT INTO no_such_table (x) VALUES (%s) RETURNING x", [1])

    await write_behind.write_behind_flush()

    assert "2 rows written behind were lost" in caplog.text
    assert await _rows() == 0, "a batch is one transaction: all of it or none"


async def test_with_no_delay_each_row_is_written_at_once(settings):
    settings.WRITE_BEHIND_SECONDS = 0
    await _audited("now")

    assert await _rows() == 1
