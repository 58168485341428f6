"""An agent on Gemini: which model an agent gets, and the runner's turns through the real
google-genai client against the local fake Gemini server."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from google.genai import types

from agents_app.runtime.agents import agent_from_settings
from agents_app.runtime.memory_hooks import NoMemoryProvider
from agents_app.runtime.models import model_for_agent
from agents_app.runtime.offline import OfflineModel
from agents_app.runtime.runner import Runner
from core.gemini import GeminiModel
from core.llm import RetryPolicy
from sessions_app import selectors, services
from tests.factories import UserFactory
from tests.fake_gemini import (
    FailMidStream,
    Reply,
    final_chunk,
    function_call_chunk,
    text_chunk,
)

MODEL = "gemini-2.5-flash"
FAST_RETRIES = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.001)


def user_says(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def test_model_for_agent_is_gemini_when_a_key_is_set(fake_gemini):
    model = model_for_agent(agent_from_settings("demo"))

    assert isinstance(model, GeminiModel)
    assert model.name == agent_from_settings("demo").model


def test_model_for_agent_is_offline_without_a_key(settings):
    settings.GEMINI_API_KEY = ""
    settings.GOOGLE_GENAI_USE_VERTEXAI = False

    model = model_for_agent(agent_from_settings("demo"))

    assert isinstance(model, OfflineModel)
    assert model.offline is True


def test_vertex_ai_settings_build_a_vertex_client(fake_gemini, settings):
    settings.GEMINI_API_KEY = ""
    settings.GOOGLE_GENAI_USE_VERTEXAI = True
    settings.GOOGLE_CLOUD_PROJECT = "demo-project"
    settings.GOOGLE_CLOUD_LOCATION = "europe-west4"

    model = model_for_agent(agent_from_settings("demo"))

    assert isinstance(model, GeminiModel)
    assert model.client.vertexai is True


@pytest.fixture
def owner(transactional_db):
    """Created on the main thread: an async fixture's database context would leak into teardown."""
    return UserFactory()


async def _session_for(user):
    return await sync_to_async(services.session_create)(app_name="demo", user_id=str(user.pk))


async def _stored(session):
    return await sync_to_async(selectors.session_get)(
        app_name=session.app_name, user_id=session.user_id, session_id=session.id
    )


def _runner(model: GeminiModel) -> Runner:
    return Runner(
        agent=agent_from_settings("demo"),
        model=model,
        memory=NoMemoryProvider(),
        retry_policy=FAST_RETRIES,
    )


@pytest.mark.django_db(transaction=True)
async def test_runner_sends_the_function_call_signature_back_on_the_next_step(
    gemini, fake_gemini, owner
):
    session = await _session_for(owner)
    signature = "c2lnbmF0dXJlLWJ5dGVz"
    fake_gemini.push(
        Reply(
            [
                function_call_chunk(
                    "set_state", {"key": "k", "value": 1}, thought_signature=signature
                )
            ]
        ),
        Reply([text_chunk("Done."), final_chunk()]),
    )
    async for _event in _runner(gemini).run_async(
        user_id=session.user_id, session_id=session.id, new_message=user_says("set k to 1")
    ):
        pass
    _, second = fake_gemini.requests
    call_part = second.body["contents"][-2]["parts"][-1]
    assert call_part["functionCall"]["name"] == "set_state"
    assert call_part["thoughtSignature"] == signature
    stored = await _stored(session)
    assert stored.events[1].content.parts[-1].thought_signature is not None


@pytest.mark.django_db(transaction=True)
async def test_runner_turn_with_a_tool_call_then_a_reply(gemini, fake_gemini, owner):
    session = await _session_for(owner)
    fake_gemini.push(
        Reply([function_call_chunk("set_state", {"key": "user:name", "value": "Ada"})]),
        Reply([text_chunk("Nice to meet you, "), text_chunk("Ada."), final_chunk()]),
    )

    events = [
        event
        async for event in _runner(gemini).run_async(
            user_id=session.user_id, session_id=session.id, new_message=user_says("I'm Ada.")
        )
    ]

    assert [event.text() for event in events if event.partial] == ["Nice to meet you, ", "Ada."]
    assert events[-1].text() == "Nice to meet you, Ada."
    assert events[-1].turn_complete is True
    stored = await _stored(session)
    assert stored.state["user:name"] == "Ada"
    assert [event.author for event in stored.events] == [
        "user",
        "assistant",
        "assistant",
        "assistant",
    ]
    assert stored.events[1].get_function_calls()[0].name == "set_state"
    assert stored.events[2].get_function_responses()[0].response["status"] == "ok"
    assert stored.events[3].text() == "Nice to meet you, Ada."
    first, second = fake_gemini.requests
    assert first.function_names() == ["set_state"]
    assert first.body["contents"][-1]["parts"] == [{"text": "I'm Ada."}]
    tool_result = second.body["contents"][-1]["parts"][0]["functionResponse"]
    assert (tool_result["name"], tool_result["response"]["status"]) == ("set_state", "ok")


@pytest.mark.django_db(transaction=True)
async def test_runner_keeps_the_message_and_stores_an_error_when_the_model_fails(
    gemini, fake_gemini, owner
):
    session = await _session_for(owner)
    runner = _runner(gemini)
    fake_gemini.push(FailMidStream([text_chunk("Let me ")]))

    events = [
        event
        async for event in runner.run_async(
            user_id=session.user_id, session_id=session.id, new_message=user_says("Tell me a joke")
        )
    ]

    assert events[-1].error_code == "model_unavailable"
    assert events[-1].turn_complete is True
    stored = await _stored(session)
    assert [event.text() for event in stored.events] == ["Tell me a joke", "Let me "]
    assert stored.events[1].error_code == "model_unavailable"
    assert stored.events[1].error_message

    fake_gemini.push(Reply([text_chunk("Why did the chicken cross the road?"), final_chunk()]))
    events = [
        event
        async for event in runner.run_async(
            user_id=session.user_id, session_id=session.id, new_message=user_says("Try again")
        )
    ]

    assert events[-1].error_code is None
    assert events[-1].text() == "Why did the chicken cross the road?"
    sent = [
        part.get("text") for c in fake_gemini.requests[-1].body["contents"] for part in c["parts"]
    ]
    assert sent[0] == "Tell me a joke"
    assert sent[-1] == "Try again"
    stored = await _stored(session)
    assert len(stored.events) == 4
