"""The user's controls as they act on chats: opting out at each stage, temporary chats, and
deletions and settings reaching retrieval and open chat pages at once. Turns go through the
real chat WebSocket with the offline model."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings as django_settings
from django.db import connections
from django.test import Client
from django.urls import reverse

from agents_app.memory_provider import DjangoMemoryProvider
from agents_app.services import app_ensure
from chatapp.asgi import application
from chatapp.services import user_data_delete
from core.background import background_wait_idle
from memory_app import selectors, services
from memory_app.models import GenerationJob, Memory
from memory_app.services import jobs
from sessions_app import selectors as session_selectors
from sessions_app import services as session_services
from tests.factories import UserFactory, session_key
from tests.memory_app.support import (  # noqa: F401 (fixture)
    APP,
    lexical_only,
    memory_make,
    session_make,
    turn_add,
)
from tests.websocket_client import WebsocketClient

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("lexical_only", "background_finished"),
    pytest.mark.timeout(90),
]

WAIT = 20


@pytest.fixture(autouse=True)
def chat_settings(settings):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.001
    settings.DEFAULT_APP_NAME = APP
    settings.BACKGROUND_TASKS = "inprocess"
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
    }


@pytest.fixture(autouse=True)
async def close_thread_connections(transactional_db):
    yield
    await sync_to_async(background_wait_idle)()
    await database_sync_to_async(connections.close_all)()
    await sync_to_async(connections.close_all)()


@pytest.fixture
def owner(transactional_db):
    # A transactional test before this one may have flushed the app the migrations seed.
    app_ensure(name=APP)
    return UserFactory()


def _login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


async def _socket(user, session_id: str) -> WebsocketClient:
    client = await sync_to_async(_login)(user)
    name = django_settings.SESSION_COOKIE_NAME
    cookie = f"{name}={client.cookies[name].value}".encode()
    socket = WebsocketClient(
        application,
        f"/ws/chat/{session_id}/",
        headers=[(b"origin", b"http://testserver"), (b"host", b"testserver"), (b"cookie", cookie)],
    )
    connected, _ = await socket.connect(timeout=WAIT)
    assert connected
    return socket


async def _turn(socket: WebsocketClient, text: str) -> dict:
    """Send a message; the turn_complete frame (notices met on the way are skipped)."""
    await socket.send_json_to(
        {"type": "user_message", "text": text, "client_message_id": uuid.uuid4().hex}
    )
    while True:
        frame = await socket.receive_json_from(timeout=WAIT)
        if frame["type"] == "turn_complete":
            return frame
        assert frame["type"] != "error", frame


async def _notice(socket: WebsocketClient) -> dict:
    while True:
        frame = await socket.receive_json_from(timeout=WAIT)
        if frame["type"] == "notice":
            return frame["notice"]


async def test_a_temporary_chat_neither_reads_nor_writes_memory(owner):
    await sync_to_async(memory_make)(user=owner, text="Has a cat called Tom")
    client = await sync_to_async(_login)(owner)
    created = await sync_to_async(client.post)(
        reverse("sessions_api:session-list"),
        {"temporary": True},
        content_type="application/json",
    )
    session_id = created.json()["id"]
    socket = await _socket(owner, session_id)

    remembered = await _turn(socket, "remember that my dog is called Rex")
    recalled = await _turn(socket, "what do you remember about my cat?")
    await sync_to_async(background_wait_idle)()

    assert remembered["context"]["memory_enabled"] is False
    assert recalled["context"]["memory_enabled"] is False
    assert recalled["context"]["memories"] == []
    assert not await GenerationJob.objects.filter(user=owner).aexists()
    assert await Memory.objects.filter(user=owner).acount() == 1
    await socket.disconnect()


async def test_remembering_works_in_a_normal_chat_and_stops_when_creation_is_off(owner):
    session = await sync_to_async(session_make)(owner)
    socket = await _socket(owner, session.id)

    await _turn(socket, "remember that my dog is called Rex")
    await sync_to_async(background_wait_idle)()
    assert [m.text async for m in Memory.objects.filter(user=owner)] != []

    client = await sync_to_async(_login)(owner)
    await sync_to_async(client.post)(reverse("settings"), {"use_enabled": "on"})
    notice = await _notice(socket)
    assert notice["kind"] == "memory_settings"
    assert notice["create_enabled"] is False
    before = await Memory.objects.filter(user=owner).acount()
    jobs_before = await GenerationJob.objects.filter(user=owner).acount()

    await _turn(socket, "remember that my horse is called Star")
    await sync_to_async(background_wait_idle)()

    assert await Memory.objects.filter(user=owner).acount() == before
    assert await GenerationJob.objects.filter(user=owner).acount() == jobs_before
    await socket.disconnect()


async def test_replies_ignore_memories_once_use_is_off(owner):
    await sync_to_async(memory_make)(user=owner, text="Has a cat called Tom")
    session = await sync_to_async(session_make)(owner)
    socket = await _socket(owner, session.id)
    used = await _turn(socket, "what do you remember about my cat?")
    assert [m["text"] for m in used["context"]["memories"]] == ["Has a cat called Tom"]

    await sync_to_async(services.memory_settings_update)(user_pk=owner.pk, use_enabled=False)
    await _notice(socket)
    ignored = await _turn(socket, "what do you remember about my cat?")

    assert ignored["context"]["memory_enabled"] is False
    assert ignored["context"]["memories"] == []
    await socket.disconnect()


def test_a_job_queued_before_opting_out_on_the_settings_page_skips(owner, monkeypatch):
    monkeypatch.setattr(jobs, "task_enqueue", lambda **kwargs: None)
    session = session_make(owner)
    turn_add(session, "I live in Porto.")
    job = services.memory_job_request(
        app_name=APP, user_pk=owner.pk, session_id=session_key(session), trigger="session_end"
    )
    _login(owner).post(reverse("settings"), {"use_enabled": "on"})

    finished = services.memory_job_run(job_id=str(job.id))

    assert finished.status == GenerationJob.Status.SKIPPED
    assert "off" in finished.error
    assert not Memory.objects.filter(user=owner).exists()


async def test_a_deleted_memory_is_gone_from_search_preload_and_open_chats(owner):
    memory = await sync_to_async(memory_make)(user=owner, text="Allergic to hazelnuts")
    session = await sync_to_async(session_make)(owner)
    provider = DjangoMemoryProvider()
    loaded = await sync_to_async(session_selectors.session_get)(
        app_name=APP, user_id=str(owner.pk), session_id=session.id
    )
    assert [s.id for s in await provider.preload(session=loaded, query="hazelnuts", limit=5)] == [
        str(memory.id)
    ]
    socket = await _socket(owner, session.id)

    client = await sync_to_async(_login)(owner)
    await sync_to_async(client.post)(reverse("memory-delete", args=[memory.id]))

    notice = await _notice(socket)
    assert notice["kind"] == "memory_deleted"
    assert notice["memory_ids"] == [str(memory.id)]
    assert (
        await sync_to_async(selectors.memory_search)(
            app_name=APP, user_pk=owner.pk, query="hazelnuts"
        )
        == []
    )
    assert await provider.preload(session=loaded, query="hazelnuts", limit=5) == []
    reply = await _turn(socket, "what do you remember about hazelnuts?")
    assert reply["context"]["memories"] == []
    await socket.disconnect()


async def test_deleting_all_data_tells_open_chats(owner):
    session = await sync_to_async(session_services.session_create)(
        app_name=APP, user_id=str(owner.pk)
    )
    socket = await _socket(owner, session.id)

    await sync_to_async(user_data_delete)(user=owner, delete_account=False)

    notice = await _notice(socket)
    assert notice["kind"] == "data_deleted"
    await socket.disconnect()
