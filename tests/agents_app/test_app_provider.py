"""An app's model provider, set in the staff console: it answers from the app's next turn, and
"Test connection" shows what the model answers or why it failed."""

from __future__ import annotations

import dataclasses
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
from agents_app.runtime.agents import agent_from_app
from agents_app.runtime.compaction import session_compact
from agents_app.services import app_ensure
from core import chat_completions
from core.model_usage import ModelCall
from memory_app.embedding import embedder_get
from sessions_app import selectors as session_selectors
from sessions_app import services
from sessions_app.models import BackgroundModelCall, EventRecord
from sessions_app.services.model_calls import background_calls_record
from tests.agents_app.test_admin import _app_form
from tests.chatapp.support import WAIT, chat_socket_open
from tests.factories import StaffFactory
from tests.fake_openai import (
    HttpError,
    Reply,
    final_chunk,
    text_delta,
    text_reply,
    tool_call_deltas,
)
from tests.memory_app.support import turn_add
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
    return (await _turn_context(communicator, text))["model"]


async def _turn_context(communicator: WebsocketClient, text: str) -> dict:
    """The context the chat shows for the reply to ``text``."""
    await communicator.send_json_to(
        {"type": "user_message", "text": text, "client_message_id": uuid.uuid4().hex}
    )
    while True:
        frame = await communicator.receive_json_from(timeout=WAIT)
        if frame["type"] == "turn_complete":
            return frame["context"]
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
    fake_openai.push(text_reply("Hello there!"), _tool_call("current_time"))

    assert _connection_test(app) == [
        "support: llama3.2 (OpenAI-compatible server) answered: Hello there!"
    ]
    assert fake_openai.requests[0].body["model"] == "llama3.2"
    probe = fake_openai.requests[1]
    assert (probe.tool_names(), probe.body["tool_choice"]) == (["current_time"], "auto")
    app.refresh_from_db()
    assert app.model_traits == {
        "model": "openai:llama3.2",
        "calls_tools": True,
        "streams_tool_choice": True,
    }


def _tool_call(name: str) -> Reply:
    return Reply([*tool_call_deltas(name, {}), *final_chunk(finish_reason="tool_calls")])


@pytest.fixture
def openai_embeddings(settings):
    """Memory's embeddings from the OpenAI-compatible server's ``nomic-embed-text``."""
    settings.MEMORY_EMBEDDER = "openai"
    settings.MEMORY_OPENAI_EMBEDDING_MODEL = "nomic-embed-text"
    embedder_get.cache_clear()
    yield
    embedder_get.cache_clear()


@pytest.mark.django_db
def test_test_connection_finds_refused_tools_and_per_token_embeddings_and_keeps_them(
    fake_openai, openai_embeddings
):
    """Issue 42: a server that refuses tools (Ollama's 400 for a model without them) and
    embeds per token (llama.cpp without pooling) is found out by Test connection, which says
    each once and keeps the finding on tools on the app."""
    fake_openai.tools_refused = True
    fake_openai.embeddings_per_token = True
    app, _ = app_ensure(name="support")
    App.objects.filter(pk=app.pk).update(provider="openai", model="llama3.2")
    fake_openai.push(text_reply("Hello there!"), text_reply("It is noon."))

    answered, tools, embeddings = _connection_test(app)

    assert answered == "support: llama3.2 (OpenAI-compatible server) answered: Hello there!"
    assert tools.startswith(
        "support: The server refused tools for this model: memory tools are off in its chats"
    )
    assert embeddings.startswith("support: The embedding server answers a vector per token")
    assert "--pooling mean" in embeddings
    app.refresh_from_db()
    assert app.model_traits == {"model": "openai:llama3.2", "calls_tools": False}
    [embedding] = [request for request in fake_openai.requests if "embeddings" in request.path]
    assert embedding.body["model"] == "nomic-embed-text"


@pytest.mark.django_db
def test_test_connection_finds_a_server_that_cannot_stream_a_tool_decision(fake_openai):
    """llama-cpp-python's ``chatml-function-calling`` answers a streamed request with tools
    200 and ends the stream empty: Test connection finds it and the app keeps it."""
    fake_openai.streams_tool_choice = False
    app, _ = app_ensure(name="support")
    App.objects.filter(pk=app.pk).update(provider="openai", model="llama3.2")
    fake_openai.push(
        text_reply("Hello there!"), _tool_call("current_time"), _tool_call("current_time")
    )

    answered, streaming = _connection_test(app)

    assert answered.endswith("answered: Hello there!")
    assert streaming.startswith("support: The server cannot stream a decision to call a tool")
    app.refresh_from_db()
    assert app.model_traits["streams_tool_choice"] is False
    assert [request.body.get("stream", False) for request in fake_openai.requests] == [
        True,
        True,
        False,
    ]


@pytest.mark.django_db
def test_the_tool_probe_tells_the_model_to_call_the_tool_it_called_before(fake_openai):
    """The probe's conversation holds the model's earlier call of the tool and its answer, then
    the request to call it again, so that a small model decides to call it and a server that
    cannot stream that decision shows it."""
    app, _ = app_ensure(name="support")
    App.objects.filter(pk=app.pk).update(provider="openai", model="llama3.2")
    fake_openai.push(text_reply("Hello there!"), _tool_call("current_time"))

    _connection_test(app)

    probe = fake_openai.requests[1]
    called, answered, asked = probe.messages[-3:]
    assert called["tool_calls"][0]["function"]["name"] == "current_time"
    assert (answered["role"], answered["tool_call_id"]) == ("tool", called["tool_calls"][0]["id"])
    assert asked == {"role": "user", "content": "And now? Call the current_time tool again."}
    assert probe.body["stream"] is True


@pytest.mark.django_db
def test_a_probe_the_model_answers_in_words_says_so_and_keeps_what_a_turn_found(fake_openai):
    """A model that answers in words when told to call a tool leaves open whether the server
    streams a tool decision: Test connection says so, and what a turn found stays."""
    app, _ = app_ensure(name="support")
    App.objects.filter(pk=app.pk).update(
        provider="openai",
        model="llama3.2",
        model_traits={
            "model": "openai:llama3.2",
            "calls_tools": True,
            "streams_tool_choice": False,
        },
    )
    fake_openai.push(text_reply("Hello there!"), text_reply("It is nine."))

    answered, unknown = _connection_test(app)

    assert answered.endswith("answered: Hello there!")
    assert unknown.startswith(
        "support: The model answered in words when told to call a tool, so whether the server "
        "can stream a decision to call one is not known yet"
    )
    app.refresh_from_db()
    assert app.model_traits == {
        "model": "openai:llama3.2",
        "calls_tools": True,
        "streams_tool_choice": False,
    }


@pytest.mark.django_db(transaction=True)
async def test_a_tool_decision_a_turn_could_not_stream_is_kept_and_the_next_turn_asks_unstreamed(
    user, fake_openai
):
    """Issue 42: the first turn whose reply calls a tool on a server that cannot stream that
    decision (llama-cpp-python's empty stream) keeps the finding on the app; the next turn, in
    a process that never saw it, asks without a stream from its first request."""
    fake_openai.streams_tool_choice = False
    app, _ = await database_sync_to_async(app_ensure)(name="chat")
    await database_sync_to_async(_provider_set)(app, "openai", "llama3.2")
    session = await database_sync_to_async(services.session_create)(
        app_name="chat", user_id=str(user.pk)
    )
    set_state = Reply(
        [
            *tool_call_deltas("set_state", {"key": "user:drink", "value": "green tea"}),
            *final_chunk(finish_reason="tool_calls"),
        ]
    )
    fake_openai.push(set_state, set_state, text_reply("Noted."), text_reply("Hello Ada."))
    for text in ("I like green tea", "Hello, I am Ada"):
        communicator = await chat_socket_open(user, session.id)
        try:
            await _turn_context(communicator, text)
        finally:
            await communicator.disconnect()
        chat_completions.TRAITS.clear()  # the next socket as in a process that never saw it
    await database_sync_to_async(connections.close_all)()
    await sync_to_async(connections.close_all)()
    await memory_provider._presence_hop(connections.close_all)()

    streamed = [request.body.get("stream", False) for request in fake_openai.requests]
    assert streamed == [True, False, False, False]
    assert all(request.tool_names() for request in fake_openai.requests[:2])
    assert fake_openai.requests[3].tool_names()
    await app.arefresh_from_db()
    assert app.model_traits["streams_tool_choice"] is False
    assert app.model_traits["calls_tools"] is True


@pytest.mark.django_db(transaction=True)
async def test_a_refusal_of_tools_on_a_turn_is_kept_for_the_app_and_the_chat_says_so(
    user, fake_openai
):
    """The first refusal of tools turns them off for the app in every process: the next turn
    of a process that never saw the refusal offers none, and the chat's context panel says
    memory tools are off."""
    fake_openai.tools_refused = True
    app, _ = await database_sync_to_async(app_ensure)(name="chat")
    await database_sync_to_async(_provider_set)(app, "openai", "llama3.2")
    session = await database_sync_to_async(services.session_create)(
        app_name="chat", user_id=str(user.pk)
    )
    fake_openai.push(text_reply("Hello Ada."), text_reply("Noted."))
    contexts = []
    for text in ("Hello, I am Ada", "I like green tea"):
        communicator = await chat_socket_open(user, session.id)
        try:
            contexts.append(await _turn_context(communicator, text))
        finally:
            await communicator.disconnect()
        chat_completions.TRAITS.clear()  # the next socket as in a process that never saw it
    await database_sync_to_async(connections.close_all)()
    await sync_to_async(connections.close_all)()
    await memory_provider._presence_hop(connections.close_all)()
    first, second = contexts

    assert first["tools_refused"] is True
    assert second["tools_refused"] is True
    refused, answered, next_turn = fake_openai.requests
    assert refused.tool_names() and not answered.tool_names()
    assert next_turn.tool_names() == []
    await app.arefresh_from_db()
    assert app.model_traits["calls_tools"] is False


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


@pytest.mark.django_db(transaction=True)
async def test_usage_a_server_does_not_report_is_said_so_beside_the_background_work(
    user, fake_openai
):
    """Issue 42, item 9: llama-cpp-python's streams carry no usage even when asked for: the
    turn's event keeps that its usage is unknown (not zero), a summary's call is kept as not
    reported, and the app's page says so beside the background work the server did count."""
    fake_openai.streams_usage = False
    app, _ = await database_sync_to_async(app_ensure)(name="chat")
    await database_sync_to_async(_provider_set)(app, "openai", "llama3.2")
    session = await database_sync_to_async(services.session_create)(
        app_name="chat", user_id=str(user.pk)
    )
    fake_openai.push(text_reply("Hello ", "Ada."))
    communicator = await chat_socket_open(user, session.id)
    try:
        await _reply(communicator, "Hello, I am Ada")
    finally:
        await communicator.disconnect()
        await database_sync_to_async(connections.close_all)()
        await sync_to_async(connections.close_all)()
        await memory_provider._presence_hop(connections.close_all)()
    reply = await EventRecord.objects.filter(
        session__session_id=session.id, turn_complete=True
    ).aget()
    fake_openai.push(text_reply("Ada said hello."))
    await database_sync_to_async(_summary_of)(user, session.id)
    await database_sync_to_async(background_calls_record)(
        app_name="chat",
        purpose="memory",
        calls=[ModelCall("llama3.2", 400, 30), ModelCall("llama3.2", 200, 10)],
    )

    assert reply.usage_metadata == {}
    summary = await BackgroundModelCall.objects.aget(purpose="summary")
    assert (summary.app_name, summary.prompt_tokens, summary.completion_tokens) == (
        "chat",
        None,
        None,
    )
    page = await database_sync_to_async(
        lambda: _staff().get(f"/admin/agents_app/app/{app.pk}/change/").content.decode()
    )()
    assert "Chat turns: 1 model call, tokens not reported by the server" in page
    assert (
        "Memory extraction and consolidation: 600 prompt + 40 completion tokens in 2 model calls"
        in page
    )
    assert "Conversation summaries: 1 model call, tokens not reported by the server" in page


def _summary_of(user, session_id: str) -> None:
    """A summary of the chat's turns but the last, through the app's model."""
    session = session_selectors.session_get(
        app_name="chat", user_id=str(user.pk), session_id=session_id
    )
    turn_add(session, "I like green tea.")
    agent = agent_from_app(App.objects.get(name="chat"))
    agent = dataclasses.replace(
        agent,
        compaction=dataclasses.replace(
            agent.compaction, keep_last_invocations=1, summarize_after_invocations=1
        ),
    )
    assert session_compact(
        app_name="chat", user_id=str(user.pk), session_id=session_id, agent=agent
    )
