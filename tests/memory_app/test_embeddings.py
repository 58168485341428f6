"""Embeddings made once (issue 40): memories and past user turns are embedded in the background
after they are stored, idempotently, with retries and a visible failure; searches embed their
query alone, warm or cold; a change of embedder re-embeds through ``manage.py memory_embed``.

The embedder is the OpenAI-compatible fake server's (``fake_openai``), whose requests are the
count of embedding calls.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memory_app import selectors, services
from memory_app.embedding import embedder_get, vector_from_bytes
from memory_app.models import EmbeddingFailure, Memory, TurnVector
from memory_app.selectors.turn_vectors import (
    turn_embedding_text,
    turn_vectors_read,
    turns_nearest,
)
from memory_app.tasks import embeddings_compute, embeddings_sweep
from sessions_app.models import EventRecord
from tests.factories import session_key
from tests.fake_gemini import embedding_for
from tests.fake_openai import HttpError
from tests.memory_app.support import memory_make, session_make, turn_add

MODEL = "nomic-embed-text"
NAME = f"openai:{MODEL}"


@pytest.fixture
def embedder(fake_openai, settings):
    """The fake server's embeddings as the process's embedder, no index left from another test,
    and tasks sent to the broker (recorded here, run by the test with ``run``)."""
    settings.MEMORY_EMBEDDER = "openai"
    settings.MEMORY_OPENAI_EMBEDDING_MODEL = MODEL
    settings.MEMORY_JOB_RETRY_BASE_SECONDS = 0
    embedder_get.cache_clear()
    yield fake_openai
    embedder_get.cache_clear()


@pytest.fixture
def sent(settings, monkeypatch):
    """The embedding tasks sent to the broker, as their keyword arguments."""
    settings.BACKGROUND_TASKS = "celery"
    calls = []
    monkeypatch.setattr(
        embeddings_compute, "apply_async", lambda *, kwargs, headers: calls.append(kwargs)
    )
    return calls


def embedded_texts(server) -> list[str]:
    """Every text the embedder was asked for, in order."""
    return [
        text for r in server.requests if r.path.endswith("/embeddings") for text in r.body["input"]
    ]


def unit(text: str) -> np.ndarray:
    vector = np.asarray(embedding_for(text), dtype=np.float32)
    return vector / np.linalg.norm(vector)


def run(**kwargs):
    return embeddings_compute.apply(kwargs=kwargs).get()


pytestmark = pytest.mark.django_db


def test_a_stored_memory_is_embedded_once_in_the_background_after_commit(
    user, embedder, sent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        memory = memory_make(user=user, text="The user grows tomatoes.")
        assert sent == [], "nothing is sent before the write commits"
    assert len(callbacks) >= 1
    assert sent == [{"memory_ids": [str(memory.pk)]}]
    assert embedded_texts(embedder) == [], "the write itself embeds nothing"

    assert run(**sent[0]) == {"memories": 1, "turns": 0}
    memory.refresh_from_db()
    assert memory.embedding_model == NAME
    assert np.allclose(vector_from_bytes(memory.embedding), unit("The user grows tomatoes."))

    assert run(**sent[0]) == {"memories": 0, "turns": 0}, "a redelivered task embeds nothing"
    assert embedded_texts(embedder) == ["The user grows tomatoes."]


def test_saving_an_embedded_memory_asks_for_nothing(
    user, embedder, sent, django_capture_on_commit_callbacks
):
    memory = memory_make(user=user, text="The user grows tomatoes.")
    run(memory_ids=[str(memory.pk)])
    memory.refresh_from_db()

    with django_capture_on_commit_callbacks(execute=True):
        memory.importance = 0.9
        memory.save()

    assert sent == []


def test_a_search_embeds_only_its_query_warm_and_in_a_process_that_never_served_the_user(
    user, embedder
):
    texts = ["The user grows tomatoes.", "The user lives in Lyon.", "The user plays chess."]
    memories = [memory_make(user=user, text=text) for text in texts]
    run(memory_ids=[str(m.pk) for m in memories])
    embedder.requests.clear()

    for _search in range(2):
        found = selectors.memory_search(app_name="chat", user_pk=user.pk, query="chess")
        assert found[0].text == "The user plays chess."
    found = selectors.memory_search(
        app_name="chat", user_pk=user.pk, query="The user lives in Lyon."
    )

    assert found[0].text == "The user lives in Lyon."
    assert embedded_texts(embedder) == ["chess", "chess", "The user lives in Lyon."]


def test_a_memory_not_embedded_yet_is_found_by_its_words_without_an_embedding_call(user, embedder):
    memory_make(user=user, text="The user grows tomatoes.")

    found = selectors.memory_search(app_name="chat", user_pk=user.pk, query="tomatoes")

    assert [m.text for m in found] == ["The user grows tomatoes."]
    assert embedded_texts(embedder) == [], "no stored vector: the query is not embedded either"


def test_a_correction_is_embedded_after_commit_not_in_the_request(
    user, embedder, sent, django_capture_on_commit_callbacks
):
    memory = memory_make(user=user, text="The user lives in Lyon.")
    run(memory_ids=[str(memory.pk)])
    embedder.requests.clear()

    with django_capture_on_commit_callbacks(execute=True):
        services.memory_correct(
            app_name="chat", user_pk=user.pk, memory_id=memory.pk, text="The user lives in Porto."
        )
    assert embedded_texts(embedder) == []
    run(**sent[-1])

    memory.refresh_from_db()
    assert (memory.text, memory.embedding_model) == ("The user lives in Porto.", NAME)
    assert np.allclose(vector_from_bytes(memory.embedding), unit("The user lives in Porto."))


def test_a_chats_user_turns_are_embedded_once_in_one_batch(user, embedder, settings):
    settings.MEMORY_EMBEDDING_BATCH_SIZE = 2
    session = session_make(user)
    for text in ("I grow tomatoes.", "My sister lives in Lyon.", "I play chess on Sundays."):
        turn_add(session, text)
    key = session_key(session)

    assert run(session_key=key) == {"memories": 0, "turns": 3}
    assert run(session_key=key) == {"memories": 0, "turns": 0}

    turns = EventRecord.objects.filter(session_id=key, author="user").order_by("sequence")
    stored = turn_vectors_read(event_ids=[t.pk for t in turns], embedder_name=NAME)
    assert len(stored) == 3
    assert not TurnVector.objects.filter(event__author="assistant").exists()
    first = turns[0]
    said_at = datetime.fromtimestamp(first.timestamp, tz=UTC)
    expected = turn_embedding_text(text="I grow tomatoes.", speaker="", said_at=said_at)
    assert np.allclose(stored[first.pk], unit(expected))
    batches = [r.body["input"] for r in embedder.requests if r.path.endswith("/embeddings")]
    assert [len(batch) for batch in batches] == [2, 1]
    assert turn_vectors_read(event_ids=[first.pk], embedder_name="openai:other") == {}


def test_a_temporary_chats_turns_are_never_embedded(user, embedder):
    session = session_make(user, temporary=True)
    turn_add(session, "I grow tomatoes.")

    assert run(session_key=session_key(session)) == {"memories": 0, "turns": 0}
    assert embedded_texts(embedder) == []


def test_a_deleted_chat_takes_its_turn_vectors_along(user, embedder):
    session = session_make(user)
    turn_add(session, "I grow tomatoes.")
    run(session_key=session_key(session))

    EventRecord.objects.filter(session_id=session_key(session)).delete()

    assert not TurnVector.objects.exists()


def test_a_transient_embedder_error_is_retried_with_backoff(user, embedder):
    memory = memory_make(user=user, text="The user grows tomatoes.")
    embedder.push_embedding(HttpError(503), HttpError(429))

    assert run(memory_ids=[str(memory.pk)]) == {"memories": 1, "turns": 0}

    assert len(embedded_texts(embedder)) == 3
    assert Memory.objects.get(pk=memory.pk).embedding_model == NAME
    assert not EmbeddingFailure.objects.exists()


def test_retries_run_out_into_a_visible_failure_and_the_memory_is_still_found(
    user, embedder, settings
):
    settings.MEMORY_TASK_MAX_RETRIES = 2
    memory = memory_make(user=user, text="The user grows tomatoes.")
    embedder.push_embedding(HttpError(503), HttpError(503), HttpError(503))

    assert run(memory_ids=[str(memory.pk)]) == "failed"

    failure = EmbeddingFailure.objects.get()
    assert (failure.embedder, failure.memory_ids, failure.attempts) == (
        NAME,
        [str(memory.pk)],
        3,
    )
    assert "503" in failure.error or "unavailable" in failure.error.lower()
    assert Memory.objects.get(pk=memory.pk).embedding is None
    found = selectors.memory_search(app_name="chat", user_pk=user.pk, query="tomatoes")
    assert [m.id for m in found] == [str(memory.pk)]


def test_an_error_that_will_not_pass_fails_at_once(user, embedder):
    session = session_make(user)
    turn_add(session, "I grow tomatoes.")
    embedder.push_embedding(HttpError(404, f"model '{MODEL}' not found"))

    assert run(session_key=session_key(session)) == "failed"

    failure = EmbeddingFailure.objects.get()
    assert (failure.session_key, failure.attempts) == (session_key(session), 1)
    assert not TurnVector.objects.exists()


def test_a_change_of_embedder_re_embeds_through_the_command(user, embedder, settings):
    memory = memory_make(user=user, text="The user grows tomatoes.")
    session = session_make(user)
    turn_add(session, "I play chess on Sundays.")
    run(memory_ids=[str(memory.pk)], session_key=session_key(session))
    settings.MEMORY_OPENAI_EMBEDDING_MODEL = "mxbai-embed-large"
    embedder_get.cache_clear()
    embedder.requests.clear()

    found = selectors.memory_search(app_name="chat", user_pk=user.pk, query="tomatoes")
    assert [m.id for m in found] == [str(memory.pk)]
    assert embedded_texts(embedder) == [], "the old model's vectors are not compared"

    out, err = io.StringIO(), io.StringIO()
    call_command("memory_embed", stdout=out, stderr=err)

    assert (
        "openai:mxbai-embed-large: 1 memories and 1 past turns without a vector" in out.getvalue()
    )
    assert "Embedded 1 memories and 1 past turns" in out.getvalue()
    assert "2/2" in err.getvalue(), "the progress bar reached the end"
    assert Memory.objects.get(pk=memory.pk).embedding_model == "openai:mxbai-embed-large"
    assert TurnVector.objects.get().embedding_model == "openai:mxbai-embed-large"
    assert {r.body["model"] for r in embedder.requests} == {"mxbai-embed-large"}

    embedder.requests.clear()
    out = io.StringIO()
    call_command("memory_embed", stdout=out, stderr=io.StringIO())
    assert "0 memories and 0 past turns without a vector" in out.getvalue()
    assert embedded_texts(embedder) == []


def test_the_command_says_when_there_is_no_embedder(settings):
    settings.MEMORY_EMBEDDER = "none"
    embedder_get.cache_clear()
    try:
        with pytest.raises(CommandError, match="No embedder is configured"):
            call_command("memory_embed", stdout=io.StringIO())
    finally:
        embedder_get.cache_clear()


def test_the_sweep_embeds_turns_stored_by_doors_that_ask_for_no_task(user, embedder):
    session = session_make(user)
    turn_add(session, "I grow tomatoes.")
    memory = memory_make(user=user, text="The user grows tomatoes.")

    assert embeddings_sweep.apply().get() == {"memories": 1, "turns": 1}
    assert embeddings_sweep.apply().get() == {"memories": 0, "turns": 0}
    assert Memory.objects.get(pk=memory.pk).embedding_model == NAME


def test_past_conversations_rank_by_stored_turn_vectors_embedding_only_the_query(user, embedder):
    session = session_make(user)
    turn_add(session, "I grow tomatoes on the balcony.")
    turn_add(session, "My sister moved to Lyon last spring.")

    def found(query):
        return [
            turn.excerpt
            for turn in selectors.past_conversations_search(
                app_name="chat", user_pk=user.pk, query=query
            )
        ]

    assert found("tomatoes") == ["I grow tomatoes on the balcony."]
    assert embedded_texts(embedder) == [], "no turn has a vector yet: nothing is embedded"

    run(session_key=session_key(session))
    embedder.requests.clear()
    for _search in range(2):
        assert found("tomatoes") == ["I grow tomatoes on the balcony."]

    assert embedded_texts(embedder) == ["tomatoes", "tomatoes"]


def test_without_pgvector_there_are_no_nearest_turns_to_ask_for(user, embedder):
    assert (
        turns_nearest(
            app_name="chat",
            user_pk=user.pk,
            query_vector=unit("tomatoes"),
            embedder_name=NAME,
            limit=5,
        )
        is None
    )
