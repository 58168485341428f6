"""An agent on an OpenAI-compatible server: which model an agent gets, and the runner's turns
through the real openai client against the local fake OpenAI-compatible server."""

from __future__ import annotations

import dataclasses

import pytest

from agents_app.runtime.agents import agent_from_settings
from agents_app.runtime.memory_hooks import NoMemoryProvider
from agents_app.runtime.models import model_for_agent
from agents_app.runtime.offline import OfflineModel
from agents_app.runtime.runner import Runner
from core.openai_compatible import OpenAICompatibleModel
from tests.agents_app.runtime.test_gemini import (
    FAST_RETRIES,
    _runner,
    _session_for,
    _stored,
    user_says,
)
from tests.factories import UserFactory
from tests.fake_openai import (
    FailMidStream,
    HttpError,
    Reply,
    final_chunk,
    text_delta,
    text_reply,
    tool_call_deltas,
)


@pytest.fixture
def owner(transactional_db):
    return UserFactory()


def test_model_for_agent_is_the_servers_model_with_llm_provider_openai(fake_openai, settings):
    settings.LLM_MODEL = "llama3.2"

    model = model_for_agent(agent_from_settings("demo"))

    assert isinstance(model, OpenAICompatibleModel)
    assert (model.name, model.offline) == ("llama3.2", False)


def test_model_for_agent_is_offline_without_a_server(settings):
    settings.LLM_PROVIDER = "openai"
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""

    assert isinstance(model_for_agent(agent_from_settings("demo")), OfflineModel)


async def _turn(runner: Runner, session, text: str) -> list:
    return [
        event
        async for event in runner.run_async(
            user_id=session.user_id, session_id=session.id, new_message=user_says(text)
        )
    ]


@pytest.mark.django_db(transaction=True)
async def test_runner_turn_with_a_tool_call_then_a_reply(openai_model, fake_openai, owner):
    session = await _session_for(owner)
    fake_openai.push(
        Reply(
            [
                *tool_call_deltas("set_state", {"key": "user:name", "value": "Ada"}),
                *final_chunk(finish_reason="tool_calls"),
            ]
        ),
        text_reply("Nice to meet you, ", "Ada."),
    )

    events = await _turn(_runner(openai_model), session, "I'm Ada.")

    assert [event.text() for event in events if event.partial] == ["Nice to meet you, ", "Ada."]
    assert events[-1].turn_complete is True
    stored = await _stored(session)
    assert stored.state["user:name"] == "Ada"
    assert stored.events[3].text() == "Nice to meet you, Ada."
    first, second = fake_openai.requests
    assert first.tool_names() == ["set_state"]
    call, result = second.messages[-2:]
    assert call["tool_calls"][0]["function"]["name"] == "set_state"
    assert result["role"] == "tool"
    assert result["tool_call_id"] == call["tool_calls"][0]["id"]
    assert '"status": "ok"' in result["content"]


@pytest.mark.django_db(transaction=True)
async def test_runner_keeps_the_message_and_stores_an_error_when_the_stream_breaks(
    openai_model, fake_openai, owner
):
    session = await _session_for(owner)
    runner = _runner(openai_model)
    fake_openai.push(FailMidStream([text_delta("Let me ")]))

    events = await _turn(runner, session, "Tell me a joke")

    assert events[-1].error_code == "model_unavailable"
    assert "connection to the model server" in events[-1].error_message
    assert events[-1].turn_complete is True
    stored = await _stored(session)
    assert [event.text() for event in stored.events] == ["Tell me a joke", "Let me "]
    assert stored.events[1].error_code == "model_unavailable"
    assert stored.events[1].error_message == events[-1].error_message

    fake_openai.push(text_reply("Why did the chicken cross the road?"))
    events = await _turn(runner, session, "Try again")

    assert events[-1].text() == "Why did the chicken cross the road?"
    sent = [message["content"] for message in fake_openai.requests[-1].messages[1:]]
    assert sent[0] == "Tell me a joke"
    assert sent[-1] == "Try again"


@pytest.mark.django_db(transaction=True)
async def test_an_app_without_tools_asks_a_model_without_tool_calls_for_none(
    openai_model, fake_openai, owner
):
    """What the docs offer for a model that lacks tool calls: the app's tools and memory tools
    turned off in the console, the request names no tools, which such a server accepts."""
    session = await _session_for(owner)
    agent = dataclasses.replace(agent_from_settings("demo"), tools=(), memory_tools=False)
    runner = Runner(
        agent=agent, model=openai_model, memory=NoMemoryProvider(), retry_policy=FAST_RETRIES
    )
    fake_openai.push(text_reply("Hello."))

    events = await _turn(runner, session, "Hi")

    assert events[-1].text() == "Hello."
    [request] = fake_openai.requests
    assert "tools" not in request.body


@pytest.mark.django_db(transaction=True)
async def test_a_server_that_refuses_tools_still_answers_and_the_context_panel_says_so(
    openai_model, fake_openai, owner
):
    session = await _session_for(owner)
    fake_openai.push(
        HttpError(500, "Tool calling is not supported by this chat format"),
        text_reply("Hello, Ada."),
    )

    events = await _turn(_runner(openai_model), session, "My name is Ada")

    assert events[-1].text() == "Hello, Ada."
    assert events[-1].custom_metadata["context"]["tools_refused"] is True
    refused, answered = fake_openai.requests
    assert refused.tool_names() and "tools" not in answered.body
