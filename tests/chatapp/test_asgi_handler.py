"""HTTP requests through the ASGI application: each request's sync code runs on one thread,
never beside another request's, the threads are kept from one request to the next rather
than made anew for each, and work a view keeps for after its response runs once it is sent.
A request whose code is all async needs no thread, not even for the request signals, and a
database connection opened on a request's thread is still closed there."""

import asyncio
import hashlib
import inspect
import threading
from collections import deque

import pytest
from asgiref.sync import sync_to_async
from channels.testing import HttpCommunicator
from django.core.handlers.asgi import ASGIHandler
from django.core.signals import request_finished, request_started
from django.db.backends.base.base import BaseDatabaseWrapper

from agents_app.models import ServiceRequest
from agents_app.services import app_ensure, service_account_create
from chatapp import asgi_handler
from chatapp.asgi import application, django_asgi_application
from chatapp.asgi_handler import RequestExecutor
from tests.chatapp import request_cycle_urls as request_cycle_urls_module

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(60)]

# Django 5.2's ASGIHandler.handle, which KeptThreadASGIHandler.handle restates.
DJANGO_HANDLE_SHA256 = "98faeb5bef800331e6a8002fbc96b30e4122a23438ae45a047190a531ea11323"


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
    """The status of a GET of ``path``, once the application has finished with the request."""
    communicator = HttpCommunicator(application, "GET", path, headers=[(b"host", b"testserver")])
    response = await communicator.get_response(timeout=20)
    await communicator.wait(timeout=20)
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


@pytest.fixture
def recording_executors(monkeypatch):
    """Every request's executor from now on is new and notes the work it was given."""
    executors: list[RequestExecutor] = []

    class RecordingExecutor(RequestExecutor):
        def __init__(self) -> None:
            super().__init__()
            self.work = 0
            executors.append(self)

        def submit(self, fn, /, *args, **kwargs):
            self.work += 1
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(django_asgi_application, "_idle_executors", deque())
    monkeypatch.setattr(asgi_handler, "RequestExecutor", RecordingExecutor)
    return executors


@pytest.fixture
def closing_receiver_threads(monkeypatch):
    """The thread of each call of a receiver counted among the closing-only ones, connected
    to both request signals."""
    seen: list[tuple[str, threading.Thread]] = []

    def note(signal, **kwargs):
        seen.append((signal, threading.current_thread()))

    def started(**kwargs):
        note("started")

    def finished(**kwargs):
        note("finished")

    monkeypatch.setattr(
        asgi_handler,
        "CLOSING_ONLY_RECEIVERS",
        asgi_handler.CLOSING_ONLY_RECEIVERS | {started, finished},
    )
    request_started.connect(started)
    request_finished.connect(finished)
    yield seen
    request_started.disconnect(started)
    request_finished.disconnect(finished)


@pytest.fixture
def closed_connections(monkeypatch):
    """Each database connection closed at a request's edge (Django's ``close_old_connections``),
    with the thread it was closed on."""
    closed: list[tuple[BaseDatabaseWrapper, threading.Thread]] = []
    close = BaseDatabaseWrapper.close_if_unusable_or_obsolete

    def noted_close(self):
        closed.append((self, threading.current_thread()))
        close(self)

    monkeypatch.setattr(BaseDatabaseWrapper, "close_if_unusable_or_obsolete", noted_close)
    return closed


@pytest.fixture
def request_cycle_urls(settings):
    settings.ROOT_URLCONF = "tests.chatapp.request_cycle_urls"
    request_cycle_urls_module.connections_used.clear()
    return request_cycle_urls_module


async def test_a_request_whose_code_is_all_async_sends_its_signals_without_a_thread(
    recording_executors, closing_receiver_threads
):
    assert await get("/healthz") == 200

    assert [executor.work for executor in recording_executors] == [0]
    assert closing_receiver_threads == [
        ("started", threading.current_thread()),
        ("finished", threading.current_thread()),
    ]


async def test_a_connection_a_view_opened_on_its_thread_is_closed_there_when_it_ends(
    request_cycle_urls, recording_executors, closed_connections
):
    assert await get("/counted/") == 200

    [used] = request_cycle_urls.connections_used
    [(closed, thread)] = closed_connections
    assert closed is used
    assert thread is not threading.current_thread()
    assert thread.name.startswith("django-request")


async def test_a_connection_opened_after_the_response_is_closed_as_the_next_request_starts(
    request_cycle_urls, recording_executors, closed_connections, closing_receiver_threads
):
    assert await get("/counted-after-the-response/") == 200
    [used] = request_cycle_urls.connections_used
    assert closed_connections == []

    assert await get("/healthz") == 200

    [(closed, thread)] = closed_connections
    assert closed is used
    assert thread is not threading.current_thread()
    assert [signal for signal, _ in closing_receiver_threads] == [
        "started",
        "finished",
        "started",
        "finished",
    ]
    # The second request's start went to the thread, its end (nothing left open) did not.
    assert closing_receiver_threads[2][1] is thread
    assert closing_receiver_threads[3][1] is threading.current_thread()


def test_the_request_cycle_follows_djangos_own():
    """``KeptThreadASGIHandler.handle`` restates Django's ``ASGIHandler.handle`` but for how
    it sends the request signals: when Django's changes (an upgrade), read it again, carry
    the change over, and record its new digest here."""
    source = inspect.getsource(ASGIHandler.handle)
    assert hashlib.sha256(source.encode()).hexdigest() == DJANGO_HANDLE_SHA256, source
