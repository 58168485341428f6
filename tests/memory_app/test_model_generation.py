"""Memory generation on an OpenAI-compatible server (issue 29): fact extraction and
consolidation through the real openai client against the fake server, with its JSON schema
answers, its invalid ids and malformed JSON; a job the server rate-limits; and the server's
embeddings for memory search, never compared with another model's."""

from __future__ import annotations

import json

import numpy as np
import pytest

from core.llm import ModelError
from memory_app import selectors
from memory_app.embedding import embedder_get, vector_from_bytes, vector_to_bytes
from memory_app.extraction import facts_extract
from memory_app.models import GenerationJob, Memory
from memory_app.tasks import memory_job_run
from memory_app.topics import MANAGED_TOPICS
from sessions_app.events import Event
from sessions_app.models import BackgroundModelCall
from tests.fake_openai import (
    HttpError,
    Reply,
    Stall,
    embedding_for,
    final_chunk,
    json_reply,
    text_delta,
    tool_answer_reply,
)
from tests.memory_app.support import (
    job_for,
    lexical_only,  # noqa: F401 (fixture)
    memory_make,
    session_make,
    turn_add,
    user_events,
)
from tests.memory_app.test_consolidation_model import said

APP = "chat"


def user_says(text: str) -> Event:
    return Event(author="user", content={"role": "user", "parts": [{"text": text}]})


def fact(event: Event, text: str, *, kind: str = "statement") -> dict:
    return {
        "text": text,
        "topic": "personal_info",
        "source_type": "explicit",
        "kind": kind,
        "confidence": 0.9,
        "importance": 0.5,
        "event_ids": [event.id],
        "excerpt": event.text(),
    }


@pytest.mark.usefixtures("lexical_only")
class TestExtraction:
    def test_facts_come_from_the_json_schema_answer(self, fake_openai, settings):
        settings.MEMORY_EXTRACTION_MODEL = "qwen2.5"
        event = user_says("Remember that I live in Porto")
        fake_openai.push(json_reply({"facts": [fact(event, "The user lives in Porto.")]}))

        [found] = facts_extract(app_name=APP, events=[event], topics=list(MANAGED_TOPICS))

        assert (found.text, found.event_ids) == ("The user lives in Porto.", [event.id])
        [request] = fake_openai.requests
        assert request.body["model"] == "qwen2.5"
        schema = request.body["response_format"]["json_schema"]["schema"]
        assert "facts" in schema["properties"]
        assert f"[{event.id}] user: Remember that I live in Porto" in request.user_text()

    def test_a_server_without_json_schema_answers_by_the_tool_call(self, fake_openai):
        event = user_says("Remember that I live in Porto")
        fake_openai.push(
            HttpError(400, "unknown field response_format"),
            tool_answer_reply("answer", {"facts": [fact(event, "The user lives in Porto.")]}),
        )

        [found] = facts_extract(app_name=APP, events=[event], topics=list(MANAGED_TOPICS))

        assert found.text == "The user lives in Porto."

    def test_a_fact_naming_only_events_it_was_not_shown_is_dropped(self, fake_openai):
        event = user_says("Remember that I live in Porto and have a cat")
        invented = {**fact(event, "The user lives in Lisbon."), "event_ids": ["evt-invented"]}
        mixed = {**fact(event, "The user has a cat."), "event_ids": ["evt-invented", event.id]}
        fake_openai.push(json_reply({"facts": [invented, mixed]}))

        [found] = facts_extract(app_name=APP, events=[event], topics=list(MANAGED_TOPICS))

        assert (found.text, found.event_ids) == ("The user has a cat.", [event.id])

    def test_malformed_json_is_an_error_the_job_retries_or_records(self, fake_openai):
        fake_openai.push(
            *(json_reply(text) for text in ('{"facts": [{"text": ', "no facts", "none", "no"))
        )

        with pytest.raises(ModelError) as raised:
            facts_extract(
                app_name=APP, events=[user_says("I live in Porto")], topics=list(MANAGED_TOPICS)
            )

        assert raised.value.code == "model_invalid_output"

    def test_an_answer_out_of_the_schema_names_the_model_not_gemini(self, fake_openai):
        event = user_says("Remember that I live in Porto")
        fake_openai.push(
            json_reply(
                {"facts": [{**fact(event, "The user lives in Porto."), "confidence": "high"}]}
            )
        )

        with pytest.raises(ModelError) as raised:
            facts_extract(app_name=APP, events=[event], topics=list(MANAGED_TOPICS))

        assert raised.value.code == "model_invalid_output"
        assert str(raised.value) == (
            "The model's extracted facts are invalid: confidence is not a number: 'high'"
        )


def operations(*entries) -> Reply:
    return json_reply({"operations": list(entries)})


@pytest.mark.usefixtures("lexical_only")
class TestConsolidation:
    def test_the_models_update_is_applied_with_its_reason(self, user, fake_openai):
        lisbon = memory_make(user=user, text="The user lives in Lisbon.")
        fake_openai.push(
            operations(
                {
                    "fact": 1,
                    "operation": "UPDATE",
                    "memory_id": str(lisbon.id),
                    "text": "The user lives in Porto.",
                    "reason": "You said you moved to Porto.",
                }
            )
        )

        said(user, "Actually I moved to Porto", fact_text="The user moved to Porto.")

        lisbon.refresh_from_db()
        assert lisbon.text == "The user lives in Porto."
        assert lisbon.revisions.get().reason == "You said you moved to Porto."
        [request] = fake_openai.requests
        assert f"id {lisbon.id}: The user lives in Lisbon." in request.user_text()

    @pytest.mark.parametrize(
        "answer",
        [
            operations({"fact": 1, "operation": "DELETE", "memory_id": "invented", "reason": "."}),
            json_reply('{"operations": [{"fact": 1,'),
        ],
        ids=["invalid id", "malformed JSON"],
    )
    def test_an_invalid_answer_leaves_the_fact_to_the_rules(self, user, fake_openai, answer):
        lisbon = memory_make(user=user, text="The user lives in Lisbon.")
        fake_openai.push(answer, answer)

        said(user, "I live in Porto now", fact_text="The user lives in Porto.")

        lisbon.refresh_from_db()
        assert lisbon.text == "The user lives in Porto."
        reason = lisbon.revisions.get().reason
        assert reason.startswith("You said on ") and reason.endswith(" that you live in Porto.")


@pytest.mark.usefixtures("lexical_only")
def test_a_job_the_server_rate_limits_is_retried_then_makes_its_memory(
    user, enqueued, fake_openai, settings
):
    settings.MEMORY_JOB_RETRY_BASE_SECONDS = 0
    session = session_make(user)
    turn_add(session, "Remember that I live in Porto.")
    [event] = user_events(session.id)
    told = Event(id=event.event_id, author="user", content=event.content)
    fake_openai.push(
        HttpError(429, "too many requests"),
        json_reply({"facts": [fact(told, "The user lives in Porto.")]}),
        operations({"fact": 1, "operation": "CREATE", "reason": "Something new."}),
    )
    job = job_for(user, session)

    assert memory_job_run.apply(kwargs={"job_id": str(job.id)}).get() == "succeeded"

    job.refresh_from_db()
    assert (job.status, job.attempts) == (GenerationJob.Status.SUCCEEDED, 2)
    memory = Memory.objects.get(user=user)
    assert memory.text == "The user lives in Porto."
    assert memory.revisions.get().reason == "Something new."
    limited, extracted, consolidated = fake_openai.requests
    assert limited.body == extracted.body
    assert "operations" in consolidated.body["response_format"]["json_schema"]["schema"]["required"]


@pytest.mark.usefixtures("lexical_only")
def test_a_jobs_model_calls_are_kept_for_its_app_with_the_tokens_the_server_reported(
    user, enqueued, fake_openai, settings
):
    """Issue 42, item 9: extraction and consolidation are model calls of the app too; each
    answered call is kept with the tokens of its ``usage``, a refused one is not a call."""
    settings.MEMORY_JOB_RETRY_BASE_SECONDS = 0
    session = session_make(user)
    turn_add(session, "Remember that I live in Porto.")
    [event] = user_events(session.id)
    told = Event(id=event.event_id, author="user", content=event.content)
    fake_openai.push(
        HttpError(429, "too many requests"),
        Reply(
            [
                text_delta(json.dumps({"facts": [fact(told, "The user lives in Porto.")]})),
                *final_chunk(prompt_tokens=412, output_tokens=37),
            ]
        ),
        operations({"fact": 1, "operation": "CREATE", "reason": "Something new."}),
    )

    assert memory_job_run.apply(kwargs={"job_id": str(job_for(user, session).id)}).get() == (
        "succeeded"
    )

    kept = BackgroundModelCall.objects.order_by("pk").values_list(
        "app_name", "purpose", "model", "prompt_tokens", "completion_tokens"
    )
    model = settings.MEMORY_EXTRACTION_MODEL
    assert list(kept) == [(APP, "memory", model, 412, 37), (APP, "memory", model, 10, 5)]


@pytest.mark.usefixtures("lexical_only")
def test_a_job_on_a_server_that_refuses_json_schema_with_a_500_makes_its_memory(
    user, enqueued, fake_openai
):
    """llama-cpp-python's server: every job died on its 500 for ``json_schema``."""
    fake_openai.json_schema_refused = True
    session = session_make(user)
    turn_add(session, "Remember that I live in Porto.")
    [event] = user_events(session.id)
    told = Event(id=event.event_id, author="user", content=event.content)
    fake_openai.push(
        json_reply({"facts": [fact(told, "The user lives in Porto.")]}),
        operations({"fact": 1, "operation": "CREATE", "reason": "Something new."}),
    )
    job = job_for(user, session)

    assert memory_job_run.apply(kwargs={"job_id": str(job.id)}).get() == "succeeded"

    assert Memory.objects.get(user=user).text == "The user lives in Porto."
    formats = [request.body["response_format"]["type"] for request in fake_openai.requests]
    assert formats == ["json_schema", "json_object", "json_object"]


@pytest.fixture
def fresh_embedder():
    embedder_get.cache_clear()
    yield
    embedder_get.cache_clear()


@pytest.mark.usefixtures("fresh_embedder")
class TestEmbeddings:
    def test_the_servers_embedding_model_gives_unit_vectors_under_its_name(
        self, fake_openai, settings
    ):
        settings.MEMORY_EMBEDDER = "openai"
        settings.MEMORY_OPENAI_EMBEDDING_MODEL = "nomic-embed-text"

        embedder = embedder_get()
        vectors = embedder.encode(["likes tea", "lives in Lyon"])

        assert embedder.name == "openai:nomic-embed-text"
        expected = np.asarray(embedding_for("likes tea"), dtype=np.float32)
        assert np.allclose(vectors[0], expected / np.linalg.norm(expected))
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
        assert fake_openai.requests[0].body["model"] == "nomic-embed-text"

    @pytest.mark.parametrize(
        ("model", "name"), [("nomic-embed-text", "openai:nomic-embed-text"), ("", "none")]
    )
    def test_auto_takes_the_servers_embeddings_only_when_a_model_is_named(
        self, fake_openai, settings, monkeypatch, model, name
    ):
        monkeypatch.setattr("memory_app.embedding.local_model_installed", lambda: False)
        settings.MEMORY_EMBEDDER = "auto"
        settings.MEMORY_OPENAI_EMBEDDING_MODEL = model

        assert embedder_get().name == name

    @pytest.mark.django_db
    def test_a_search_never_compares_vectors_of_another_embedding_model(
        self, user, fake_openai, settings
    ):
        settings.MEMORY_EMBEDDER = "openai"
        settings.MEMORY_OPENAI_EMBEDDING_MODEL = "nomic-embed-text"
        current, other = (
            memory_make(user=user, text="The user likes green tea."),
            memory_make(user=user, text="The user lives in Lyon."),
        )
        embedder = embedder_get()
        [vector] = embedder.encode([current.text])
        Memory.objects.filter(pk=current.pk).update(
            embedding=vector_to_bytes(vector), embedding_model="openai:nomic-embed-text"
        )
        # Another model's vector, planted to match the query exactly if it were compared.
        [planted] = embedder.encode(["green tea"])
        Memory.objects.filter(pk=other.pk).update(
            embedding=vector_to_bytes(planted), embedding_model="openai:mxbai-embed-large"
        )
        fake_openai.requests.clear()

        found = selectors.memory_search(app_name="chat", user_pk=user.pk, query="green tea")

        assert found[0].id == str(current.id)
        encoded = [text for r in fake_openai.requests for text in r.body["input"]]
        assert encoded == ["green tea"], "the other model's memory is not embedded at search"
        assert {r.body["model"] for r in fake_openai.requests} == {"nomic-embed-text"}
        other.refresh_from_db()
        assert np.array_equal(vector_from_bytes(other.embedding), planted)


@pytest.mark.django_db
@pytest.mark.parametrize("failure", [HttpError(503, "loading model"), "timeout"])
def test_a_search_whose_embeddings_fail_goes_on_by_words(user, fake_openai, settings, failure):
    settings.MEMORY_EMBEDDER = "openai"
    settings.MEMORY_OPENAI_EMBEDDING_MODEL = "nomic-embed-text"
    if failure == "timeout":
        settings.LLM_TIMEOUT_SECONDS = 0.2
        failure = Stall(seconds=5)
    memory_make(user=user, text="The user likes green tea.")
    memory_make(user=user, text="The user lives in Lyon.")
    fake_openai.push_embedding(failure, failure)

    found = selectors.memory_search(app_name="chat", user_pk=user.pk, query="green tea")

    assert [memory.text for memory in found][:1] == ["The user likes green tea."]
