"""HTTP requests through the ASGI application: each request's sync code runs on one thread,
never beside another request's, and the threads are kept from one request to the next rather
than made anew for each."""

import asyncio
import threading

import pytest
from channels.testing import HttpCommunicator
from django.core.signals import request_started

from chatapp.asgi import application

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]


@pytest.fixture
def request_threads():
    """The thread each request's sync receiver of ``request_started`` ran on, in order."""
    seen: list[threading.Thread] = []

    def note(**kwargs):
        seen.append(threading.current_thread())

    request_started.connect(note)
    yield seen
    request_started.disconnect(note)


async def get(path: str) -> int:
    communicator = HttpCommunicator(application, "GET", path)
    response = await communicator.get_response(timeout=20)
    return response["status"]


async def test_one_request_after_another_reuses_its_thread(request_threads):
    for _ in range(3):
        assert await get("/healthz") == 200
    assert len(request_threads) == 3
    assert len(set(request_threads)) == 1
    assert threading.current_thread() not in request_threads


async def test_requests_at_the_same_time_each_have_a_thread_of_their_own(request_threads):
    entered = threading.Barrier(2, timeout=10)

    def wait_for_the_other(**kwargs):
        entered.wait()  # both requests' sync code must be running at once to pass

    request_started.connect(wait_for_the_other)
    try:
        statuses = await asyncio.gather(get("/healthz"), get("/healthz"))
    finally:
        request_started.disconnect(wait_for_the_other)
    assert statuses == [200, 200]
    assert len(set(request_threads)) == 2
