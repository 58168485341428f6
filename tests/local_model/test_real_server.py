"""The app through a real OpenAI-compatible server: llama-cpp-python serving SmolLM2-135M
(``make test-local-model``). What a 135M model writes cannot be known, so these tests check
what the app does with it: the person's words reach the prompt, tools and structured output
take the roads this server honours, work is bounded, and a server killed mid-reply or mid-job
is told in words and recovered from."""

from __future__ import annotations

import dataclasses
import time

import httpx2
import numpy as np
import pytest
from asgiref.sync import sync_to_async

from agents_app.runtime.agents import agent_from_settings
from agents_app.runtime.compaction import session_compact
from agents_app.runtime.memory_hooks import NoMemoryProvider
from agents_app.runtime.runner import Runner
from core.background import background_submit, background_wait_idle
from core.chat_completions import server_traits
from core.llm import LlmRequest, ModelError
from core.openai_compatible import OpenAICompatibleModel
from memory_app import selectors as memory_selectors
from memory_app import tasks as memory_tasks
from memory_app.embedding import ProviderEmbedder
from memory_app.models import GenerationJob, Memory
from memory_app.services import memory_job_run
from sessions_app.models import BackgroundModelCall
from tests.agents_app.runtime.test_gemini import FAST_RETRIES, user_says
from tests.factories import UserFactory
from tests.local_model.conftest import CONTEXT_TOKENS, MODEL
from tests.memory_app.support import job_for, memory_make, session_make, turn_add

pytestmark = [pytest.mark.local_model, pytest.mark.xdist_group("local_model")]

LONG_MESSAGE = "Please remember this word list: " + "apple " * 2500


def _tokens(server, text: str) -> int:
    """How many tokens the server's own tokenizer makes of ``text``."""
    origin = server.url.removesuffix("/v1")
    answer = httpx2.post(
        f"{origin}/extras/tokenize/count", json={"input": text, "model": MODEL}, timeout=30
    )
    return answer.json()["count"]


async def _turn(runner: Runner, session, text: str) -> list:
    return [
        event
        async for event in runner.run_async(
            user_id=session.user_id, session_id=session.id, new_message=user_says(text)
        )
    ]


async def _runner_turn(text: str) -> list:
    owner = await sync_to_async(UserFactory)()
    session = await sync_to_async(session_make)(owner, app_name="demo")
    model = OpenAICompatibleModel(MODEL)
    runner = Runner(
        agent=agent_from_settings("demo"),
        model=model,
        memory=NoMemoryProvider(),
        retry_policy=FAST_RETRIES,
    )
    try:
        return await _turn(runner, session, text)
    finally:
        await model.aclose()


@pytest.mark.django_db(transaction=True)
async def test_a_turn_with_tools_ends_in_a_reply_or_a_tool_step_never_an_error(local_model):
    events = await _runner_turn("Hello! My name is Ada. Remember that I like green tea.")

    final = events[-1]
    assert final.turn_complete is True
    assert final.error_code is None, final.error_message
    assert final.text() or any(event.get_function_calls() for event in events)
    assert final.custom_metadata["context"]["model"] == MODEL


@pytest.mark.django_db(transaction=True)
async def test_the_prompt_holds_the_persons_words_as_the_server_counts_them(local_model, settings):
    """The server counts the message's words in the prompt (as a list of parts, its chatml
    format dropped them: 15 tokens), and its refusal of a prompt over its context comes back
    in words, once, not as an empty answer retried four times."""
    settings.OPENAI_CONTEXT_TOKENS = 100_000  # the app's own check off: the server's speaks

    events = await _runner_turn(LONG_MESSAGE)

    final = events[-1]
    assert final.error_code == "message_too_long"
    assert final.error_message.startswith("Your message is longer than this model can read")
    assert final.error_message.endswith(f" of {CONTEXT_TOKENS:,} tokens).")
    counted = int(final.error_message.split("(about ")[1].split(" of")[0].replace(",", ""))
    assert counted >= _tokens(local_model, LONG_MESSAGE)


async def test_a_message_over_the_context_is_refused_before_it_is_sent(local_model):
    model = OpenAICompatibleModel(MODEL)
    request = LlmRequest(model=MODEL, system_instruction="", contents=[user_says(LONG_MESSAGE)])

    with pytest.raises(ModelError) as raised:
        [chunk async for chunk in model.generate_stream(request)]
    await model.aclose()

    assert raised.value.code == "message_too_long"
    assert f" of {CONTEXT_TOKENS:,} tokens)." in str(raised.value)


SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "likes_tea": {"type": "boolean"}},
    "required": ["city", "likes_tea"],
}


async def test_structured_output_takes_the_servers_own_road_and_keeps_it(local_model):
    model = OpenAICompatibleModel(MODEL)
    server_traits(MODEL).structured_road = ""

    answer = await model.generate_json(
        system_instruction="Answer in JSON.",
        contents="I live in Lyon and I like tea.",
        response_schema=SCHEMA,
    )
    await model.aclose()

    assert set(answer) == {"city", "likes_tea"}
    assert isinstance(answer["city"], str) and isinstance(answer["likes_tea"], bool)
    assert server_traits(MODEL).structured_road == "json_object"


async def test_a_forced_tool_call_answers_with_the_tools_arguments(local_model):
    model = OpenAICompatibleModel(MODEL)
    server_traits(MODEL).structured_road = "tool_call"

    answer = await model.generate_json(
        system_instruction="Call the tool.",
        contents="I live in Lyon and I like tea.",
        response_schema=SCHEMA,
    )
    await model.aclose()
    server_traits(MODEL).structured_road = ""

    assert set(answer) == {"city", "likes_tea"}


@pytest.mark.django_db(transaction=True)
def test_a_memory_job_extracts_and_consolidates_through_the_server(local_model):
    user = UserFactory()
    session = session_make(user)
    turn_add(session, "Remember that my favourite tea is green tea.")
    turn_add(session, "I live in Lyon, in France.")
    job = job_for(user, session)

    finished = memory_job_run(job_id=str(job.id))

    assert finished.status == GenerationJob.Status.SUCCEEDED, finished.error
    assert finished.last_sequence is not None
    for memory in Memory.objects.filter(user=user):
        assert memory.text.strip()
        assert memory.embedding_model == f"openai:{MODEL}"
    # Its structured answers come unstreamed, with the server's usage: kept for the app.
    calls = BackgroundModelCall.objects.filter(app_name=job.app_name, purpose="memory")
    assert calls.exists()
    assert all(call.prompt_tokens > 0 for call in calls)


@pytest.mark.django_db(transaction=True)
def test_embeddings_are_one_pooled_vector_a_text_and_search_uses_them(local_model):
    embedder = ProviderEmbedder(provider="openai", model=MODEL)

    vectors = embedder.encode(["likes green tea", "lives in Lyon"])

    assert vectors.shape == (2, 576)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    user = UserFactory()
    memory_make(user=user, text="The user likes green tea.")
    memory_make(user=user, text="The user lives in Lyon.")
    found = memory_selectors.memory_search(app_name="chat", user_pk=user.pk, query="green tea")
    assert found[0].text == "The user likes green tea."


@pytest.mark.django_db(transaction=True)
def test_a_compaction_summary_is_bounded_by_its_setting(local_model, settings):
    user = UserFactory()
    session = session_make(user, app_name="demo")
    for text in ("I plan a trip to Lyon.", "I like green tea.", "My sister is Eve.", "Bye."):
        turn_add(session, text, reply="Tell me more about it, I would love to hear it all.")
    demo = agent_from_settings("demo")
    agent = dataclasses.replace(
        demo,
        compaction=dataclasses.replace(
            demo.compaction, keep_last_invocations=1, summarize_after_invocations=1
        ),
    )

    event = session_compact(
        app_name="demo", user_id=str(user.pk), session_id=session.id, agent=agent
    )

    summary = event.actions.compaction.compacted_content.parts[0].text
    assert summary
    assert _tokens(local_model, summary) <= settings.LLM_MAX_SUMMARY_TOKENS + 1
    # The summary is streamed, and this server's streams carry no usage even when asked for:
    # its call is kept as not reported, not as zero tokens.
    call = BackgroundModelCall.objects.get(app_name="demo", purpose="summary")
    assert (call.prompt_tokens, call.completion_tokens) == (None, None)


async def test_a_server_killed_mid_reply_keeps_the_text_and_says_so(local_model, settings):
    settings.LLM_MAX_REPLY_TOKENS = 400
    model = OpenAICompatibleModel(MODEL)
    request = LlmRequest(
        model=MODEL,
        system_instruction="You are a storyteller.",
        contents=[user_says("Tell me a very long story about a dragon and a knight.")],
    )
    received = []

    with pytest.raises(ModelError) as raised:
        async for chunk in model.generate_stream(request):
            received.append(chunk.text)
            if len(received) == 3:
                local_model.kill()
    await model.aclose()

    assert "".join(received).strip()
    assert raised.value.code == "model_unavailable"
    assert raised.value.transient is True
    assert local_model.url in str(raised.value)

    local_model.start()
    model = OpenAICompatibleModel(MODEL)
    request.contents = [user_says("Say hello.")]
    again = [chunk async for chunk in model.generate_stream(request)]
    await model.aclose()
    assert "".join(chunk.text for chunk in again).strip()


@pytest.mark.django_db(transaction=True)
def test_a_job_outlasts_the_server_down_and_runs_when_it_is_back(
    local_model, settings, monkeypatch
):
    settings.MEMORY_JOB_RETRY_BASE_SECONDS = 2.0
    monkeypatch.setattr(memory_tasks.random, "uniform", lambda low, high: high)
    user = UserFactory()
    session = session_make(user)
    turn_add(session, "Remember that my cat is called Tom.")
    # Not enqueued on commit: this test sends the one task itself, once the server is down.
    job = job_for(user, session, enqueue=False)
    local_model.kill()

    background_submit(
        task=memory_tasks.memory_job_run, kwargs={"job_id": str(job.id)}, log_context={}
    )
    for _ in range(200):
        job.refresh_from_db()
        if job.error:
            break
        time.sleep(0.05)
    assert job.status == GenerationJob.Status.QUEUED
    assert "model server" in job.error
    local_model.start()
    background_wait_idle(timeout=600)

    job.refresh_from_db()
    assert job.status == GenerationJob.Status.SUCCEEDED, job.error
    assert job.attempts >= 2


def test_the_model_list_does_not_say_the_context_so_the_setting_holds(local_model):
    listed = httpx2.get(f"{local_model.url}/models", timeout=10).json()

    assert [entry["id"] for entry in listed["data"]] == [MODEL]
    assert not {"max_model_len", "context_length", "max_context_length"} & set(listed["data"][0])


@pytest.mark.django_db(transaction=True)
def test_test_connection_answers_and_finds_the_per_token_embeddings(local_model):
    """The console's Test connection through this server: it answers, accepts tools but cannot
    stream a decision to call one, and its embeddings come a vector per token (no pooling),
    which it warns of."""
    from agents_app.runtime.models import model_connection_test

    agent = dataclasses.replace(agent_from_settings("demo"), provider="openai", model=MODEL)

    report = model_connection_test(agent=agent, embedding_model=MODEL)

    assert report.findings is not None
    assert report.findings.calls_tools is True
    # Told to call the tool it called before, the model decides to, and its chat format
    # (chatml-function-calling) cannot stream that decision.
    assert report.findings.streams_tool_choice is False
    assert report.findings.embeddings_per_token is True
    assert not report.findings.embedding_error
    assert any("--pooling mean" in warning for warning in report.findings.warnings())
