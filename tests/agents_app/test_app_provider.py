"""An app's model provider, set in the staff console: it answers from the app's next turn, and
"Test connection" shows what the model answers or why it failed."""

from __future__ import annotations

import socket
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connections
from django.test import Client

from agents_app import memory_provider
from agents_app.models import App
from agents_app.services import app_ensure
from sessions_app import services
from sessions_app.models import EventRecord
from tests.agents_app.test_admin import _app_form
from tests.chatapp.support import WAIT, chat_socket_open
from tests.factories import StaffFactory
from tests.fake_openai import HttpError, Reply, final_chunk, text_delta, text_reply
from tests.websocket_client import WebsocketClient


def _staff() -> Client:
    client = Client()
    client.force_login(StaffFactory(is_superuser=True))
    return client


def _provider_set(app: App, provider: str, model: str) -> None:
    answer = _staff().post(
        f"/admin/agents_app/app/{app.pk}/change/", _app_form(app, provider=provider, model=model)
    )
    assert answer.status_code == 302, answer.context["adminform"].form.errors


async def _reply(communicator: WebsocketClient, text: str) -> str:
    await communicator.send_json_to(
        {"type": "user_message", "text": text, "client_message_id": uuid.uuid4().hex}
    )
    while True:
        frame = await communicator.receive_json_from(timeout=WAIT)
        if frame["type"] == "turn_complete":
            return frame["context"]["model"]
        assert frame["type"] != "error", frame


@pytest.mark.django_db(transaction=True)
async def test_switching_an_apps_provider_in_the_console_answers_from_its_next_turn(
    user, fake_openai
):
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.001
    app, _ = await database_sync_to_async(app_ensure)(name="chat")
    await database_sync_to_async(_provider_set)(app, "offline", "")
    session = await database_sync_to_async(services.session_create)(
        app_name="chat", user_id=str(user.pk)
    )
    communicator = await chat_socket_open(user, session.id)
    try:
        assert await _reply(communicator, "Hello") == "offline"
        assert fake_openai.requests == []

        await database_sync_to_async(_provider_set)(app, "openai", "llama3.2")
        fake_openai.push(text_reply("Hello ", "from llama."))

        assert await _reply(communicator, "Hello again") == "llama3.2"
        [request] = fake_openai.requests
        assert request.body["model"] == "llama3.2"
        assert request.user_text() == "Hello again"
    finally:
        await communicator.disconnect()
        await database_sync_to_async(connections.close_all)()
        await sync_to_async(connections.close_all)()
        await memory_provider._presence_hop(connections.close_all)()


def _connection_test(app: App) -> list[str]:
    answer = _staff().post(
        "/admin/agents_app/app/",
        {"action": "connection_test", "_selected_action": [app.pk]},
        follow=True,
    )
    return [str(message) for message in answer.context["messages"]]


@pytest.mark.django_db
def test_test_connection_shows_the_models_answer(fake_openai):
    app, _ = app_ensure(name="support")
    App.objects.filter(pk=app.pk).update(provider="openai", model="llama3.2")
    fake_openai.push(text_reply("Hello there!"))

    assert _connection_test(app) == [
        "support: llama3.2 (OpenAI-compatible server) answered: Hello there!"
    ]
    assert fake_openai.requests[0].body["model"] == "llama3.2"


@pytest.mark.django_db
def test_test_connection_shows_the_error_of_a_refusing_or_absent_server(fake_openai, settings):
    app, _ = app_ensure(name="support")
    App.objects.filter(pk=app.pk).update(provider="openai", model="llama3.3")
    fake_openai.push(HttpError(404, "model 'llama3.3' not found, try pulling it first"))

    [message] = _connection_test(app)
    assert message.startswith("support: llama3.3 (OpenAI-compatible server) failed:")
    assert "model 'llama3.3' not found" in message

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.OPENAI_BASE_URL = f"http://127.0.0.1:{port}/v1"
    [message] = _connection_test(app)
    assert f"The connection to the model server at http://127.0.0.1:{port}/v1 failed" in message


@pytest.mark.django_db
def test_an_apps_page_has_the_test_connection_button(fake_openai):
    app, _ = app_ensure(name="support")

    page = _staff().get(f"/admin/agents_app/app/{app.pk}/change/").content.decode()

    assert '<input type="hidden" name="action" value="connection_test">' in page
    assert f'<input type="hidden" name="_selected_action" value="{app.pk}">' in page
    assert ">Test connection</button>" in page


@pytest.mark.django_db(transaction=True)
async def test_a_turns_usage_as_the_server_counts_it_is_on_its_event_and_the_apps_page(
    user, fake_openai
):
    """Issue 42, item 9: the tokens the server reports for the reply (asked for with
    ``stream_options.include_usage``) are kept on the turn's event and summed per app."""
    app, _ = await database_sync_to_async(app_ensure)(name="chat")
    await database_sync_to_async(_provider_set)(app, "openai", "llama3.2")
    session = await database_sync_to_async(services.session_create)(
        app_name="chat", user_id=str(user.pk)
    )
    fake_openai.push(
        Reply([text_delta("Hello "), text_delta("Ada."), *final_chunk(prompt_tokens=321)])
    )
    communicator = await chat_socket_open(user, session.id)
    try:
        assert await _reply(communicator, "Hello, I am Ada") == "llama3.2"
    finally:
        await communicator.disconnect()
        await database_sync_to_async(connections.close_all)()
        await sync_to_async(connections.close_all)()
        await memory_provider._presence_hop(connections.close_all)()

    [request] = fake_openai.requests
    assert request.body["stream_options"] == {"include_usage": True}
    reply = await EventRecord.objects.filter(
        session__session_id=session.id, turn_complete=True
    ).aget()
    assert reply.usage_metadata == {
        "prompt_token_count": 321,
        "candidates_token_count": 5,
        "total_token_count": 326,
    }
    page = await database_sync_to_async(
        lambda: _staff().get(f"/admin/agents_app/app/{app.pk}/change/").content.decode()
    )()
    assert "321 prompt + 5 completion tokens in 1 model call" in page
    listing = await database_sync_to_async(
        lambda: _staff().get("/admin/agents_app/app/").content.decode()
    )()
    assert "321 prompt + 5 completion tokens in 1 model call" in listing
