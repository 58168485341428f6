"""HTTP requests through the ASGI application: each request's sync code runs on one thread,
never beside another request's, the threads are kept from one request to the next rather
than made anew for each, and work a view keeps for after its response runs once it is sent."""

import asyncio
import threading

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.core.signals import request_started

from agents_app.models import ServiceRequest
from agents_app.services import app_ensure, service_account_create
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


def _service_key() -> str:
    app, _ = app_ensure(name="support")
    return service_account_create(app=app, name="audited").key


async def test_a_service_requests_audit_row_is_written_once_its_response_is_sent():
    key = await sync_to_async(_service_key)()
    path = "/api/v1/apps/support/users/alice/sessions/nowhere/"
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {key}".encode())],
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    received = False
    answered = asyncio.Event()
    statuses, rows_once_answered = [], []

    async def receive():
        nonlocal received
        if not received:
            received = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
        elif not message.get("more_body"):
            rows_once_answered.append(await ServiceRequest.objects.acount())
            answered.set()

    await application(scope, receive, send)

    assert statuses == [404]
    assert rows_once_answered == [0]
    row = await ServiceRequest.objects.aget()
    assert (row.route, row.status_code) == (
        "api/v1/apps/<str:app_name>/users/<str:user_id>/sessions/<str:session_id>/",
        404,
    )
