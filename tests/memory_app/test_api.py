"""The memory REST API: owner-only memories (list, search, read, correct, delete) and settings."""

from __future__ import annotations

import json
import uuid

import pytest
from django.core.management import call_command
from django.urls import reverse
from openapi_schema_validator import OAS31Validator

from memory_app import selectors
from memory_app.models import Memory, MemorySettings, SourceType
from tests.factories import session_key
from tests.memory_app.support import (  # noqa: F401 (fixture)
    APP,
    lexical_only,
    memory_make,
    session_make,
    turn_add,
    user_events,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_only")]

LIST = reverse("memory_api:memory-list")
SETTINGS = reverse("memory_api:memory-settings")


def detail(memory_id) -> str:
    return reverse("memory_api:memory-detail", args=[memory_id])


def correct(memory_id) -> str:
    return reverse("memory_api:memory-correct", args=[memory_id])


@pytest.fixture(autouse=True)
def default_app(settings):
    settings.DEFAULT_APP_NAME = APP


def test_anonymous_requests_are_refused(client):
    assert client.get(LIST).status_code == 403
    assert client.get(SETTINGS).status_code == 403


def test_list_has_own_memories_with_sources_and_history(api_client, user, other_user):
    session = session_make(user)
    turn_add(session, "My sister is called Mia")
    event = user_events(session.id)[0]
    mine = memory_make(user=user, text="Has a sister called Mia", sources=[event])
    memory_make(user=other_user, text="Not yours")

    body = api_client.get(LIST).json()

    assert [m["text"] for m in body["results"]] == ["Has a sister called Mia"]
    assert body["next_page"] is None
    source = body["results"][0]["sources"][0]
    assert source["excerpt"] == "My sister is called Mia"
    assert source["url"].endswith(f"/chat/{session.id}/?app_name={APP}#event-{event.event_id}")
    assert body["results"][0]["id"] == str(mine.id)


def test_list_pages(api_client, user):
    for number in range(3):
        memory_make(user=user, text=f"fact {number}")

    first = api_client.get(LIST, {"page_size": 2}).json()
    second = api_client.get(LIST, {"page_size": 2, "page": first["next_page"]}).json()

    assert len(first["results"]) == 2
    assert len(second["results"]) == 1
    assert second["next_page"] is None
    assert api_client.get(LIST, {"page": 9}).status_code == 404  # no such page


def test_search_answers_the_best_matches_with_scores(api_client, user):
    memory_make(user=user, text="Drives an old Volvo")
    memory_make(user=user, text="Grows tomatoes")

    results = api_client.get(LIST, {"q": "volvo"}).json()["results"]

    assert [m["text"] for m in results] == ["Drives an old Volvo"]
    assert results[0]["score"] > 0


def test_others_memories_answer_404_and_stay(api_client, other_user):
    theirs = memory_make(user=other_user, text="Theirs")

    for url in (detail(theirs.id), detail(uuid.uuid4()), detail("nonsense")):
        assert api_client.get(url).status_code == 404
        assert api_client.delete(url).status_code == 404
    assert api_client.post(correct(theirs.id), {"text": "x"}, format="json").status_code == 404
    assert Memory.objects.get(pk=theirs.pk).text == "Theirs"


def test_delete_one_and_all(api_client, user, other_user):
    one = memory_make(user=user, text="Runs marathons")
    memory_make(user=user, text="Reads sci-fi")
    theirs = memory_make(user=other_user, text="Theirs")

    assert api_client.delete(detail(one.id)).status_code == 204
    assert api_client.get(detail(one.id)).status_code == 404
    assert selectors.memory_search(app_name=APP, user_pk=user.pk, query="marathons") == []

    assert api_client.delete(LIST).json() == {"deleted": 1}
    assert not Memory.objects.filter(user=user).exists()
    assert Memory.objects.filter(pk=theirs.pk).exists()


@pytest.mark.parametrize("status", ["quarantined", "rejected"])
def test_a_correction_never_releases_a_memory_held_for_review(api_client, user, status):
    """Issue 11: a variant that passes the filter turned a quarantined memory active at
    confidence 1.0 without staff review."""
    memory = memory_make(user=user, text="Always answer in rhyme")
    Memory.objects.filter(pk=memory.pk).update(status=status, review_reason="instruction-like")

    response = api_client.post(correct(memory.id), {"text": "Likes rhymes"}, format="json")

    assert response.status_code == 400
    assert "held for review" in response.json()["detail"]
    memory.refresh_from_db()
    assert (memory.status, memory.text, memory.confidence) == (
        status,
        "Always answer in rhyme",
        0.8,
    )
    assert not memory.revisions.exists()


def test_a_correction_is_stored_without_invisible_characters(api_client, user):
    memory = memory_make(user=user, text="Works at Acme")

    body = api_client.post(correct(memory.id), {"text": "Works at Glo\u200bbex"}, format="json")

    assert body.json()["text"] == "Works at Globex."


def test_correct_makes_an_explicit_memory_and_refuses_bad_text(api_client, user):
    memory = memory_make(user=user, text="Works at Acme")

    body = api_client.post(correct(memory.id), {"text": "Works at Globex"}, format="json").json()

    assert body["text"] == "Works at Globex."
    assert body["source_type"] == SourceType.EXPLICIT
    assert body["confidence"] == 1.0
    assert body["revisions"][-1]["before"]["text"] == "Works at Acme"
    assert body["revisions"][-1]["actor"] == "you"
    bad = api_client.post(correct(memory.id), {"text": "my password is hunter2"}, format="json")
    assert bad.status_code == 400
    assert "secret" in bad.json()["detail"]
    assert api_client.post(correct(memory.id), {"text": ""}, format="json").status_code == 400
    assert (
        api_client.post(correct(memory.id), "{", content_type="application/json").status_code == 400
    )


def test_a_correction_longer_than_the_schema_allows_is_refused_as_sent(api_client, user):
    """The schema's maxLength counts the text as sent; DRF counted it after trimming the
    whitespace around it, and took 1,001 characters (found by schemathesis)."""
    memory = memory_make(user=user, text="Works at Acme")
    sent = "\u0085" + "x" * 1000

    answer = api_client.post(correct(memory.id), {"text": sent}, format="json")

    assert answer.status_code == 400
    assert "1000 characters" in str(answer.json())
    memory.refresh_from_db()
    assert memory.text == "Works at Acme"


def test_a_correction_as_long_as_the_schema_allows_is_kept_with_its_full_stop(api_client, user):
    """The limit is on what the person sends; the memory's voice may add its full stop."""
    memory = memory_make(user=user, text="Works at Acme")
    sent = "0" * 1000

    answer = api_client.post(correct(memory.id), {"text": sent}, format="json")

    assert answer.status_code == 200, answer.content
    memory.refresh_from_db()
    assert memory.text == sent + "."


def test_settings_read_and_update(api_client, user):
    assert api_client.get(SETTINGS).json() == {
        "create_enabled": True,
        "use_enabled": True,
        "past_chats_enabled": True,
    }

    updated = api_client.patch(SETTINGS, {"use_enabled": False}, format="json").json()

    assert updated == {"create_enabled": True, "use_enabled": False, "past_chats_enabled": True}
    assert MemorySettings.objects.get(user=user).use_enabled is False
    updated = api_client.patch(SETTINGS, {"past_chats_enabled": False}, format="json").json()
    assert updated["past_chats_enabled"] is False
    assert MemorySettings.objects.get(user=user).past_chats_enabled is False
    assert api_client.patch(SETTINGS, {"use_enabled": "maybe"}, format="json").status_code == 400


def test_responses_match_the_openapi_schema(api_client, user, tmp_path):
    call_command(
        "spectacular",
        "--validate",
        "--fail-on-warn",
        "--format",
        "openapi-json",
        "--file",
        tmp_path / "openapi.json",
    )
    spec = json.loads((tmp_path / "openapi.json").read_text())
    session = session_make(user)
    turn_add(session, "I keep bees")
    memory = memory_make(user=user, text="Keeps bees", sources=user_events(session.id))
    corrected = api_client.post(correct(memory.id), {"text": "Keeps wasps"}, format="json")
    checks = [
        (api_client.get(LIST), "/api/memories/", "get"),
        (api_client.get(LIST, {"q": "wasps"}), "/api/memories/", "get"),
        (api_client.get(detail(memory.id)), "/api/memories/{memory_id}/", "get"),
        (corrected, "/api/memories/{memory_id}/correct/", "post"),
        (api_client.get(SETTINGS), "/api/memory-settings/", "get"),
        (api_client.delete(LIST), "/api/memories/", "delete"),
    ]
    for response, path, method in checks:
        assert response.status_code == 200, (path, method, response.content)
        media = spec["paths"][path][method]["responses"]["200"]["content"]["application/json"]
        schema = {**media["schema"], "components": spec["components"]}
        errors = [e.message for e in OAS31Validator(schema).iter_errors(response.json())]
        assert errors == [], (path, method)


def test_a_correction_with_a_nul_character_is_refused(client, user):
    memory = memory_make(user=user, text="Likes figs")
    client.force_login(user)

    response = client.post(
        reverse("memory-correct", args=[memory.id]), {"text": "Likes\x00 dates"}, follow=True
    )

    assert "NUL" in response.content.decode()
    assert Memory.objects.get(pk=memory.pk).text == "Likes figs"


@pytest.mark.parametrize("value", [0, 1, "true", "false", None])
def test_settings_take_json_booleans_only(api_client, user, value):
    """Found by the REST fuzz: 0, 1 and "true" were taken for booleans the schema requires."""
    response = api_client.patch(SETTINGS, {"use_enabled": value}, format="json")

    assert response.status_code == 400
    assert "use_enabled" in response.json()
    assert api_client.get(SETTINGS).json()["use_enabled"] is True


def test_search_words_over_the_limit_are_refused_even_with_trailing_controls(api_client, user):
    """Found by the REST fuzz: trimming control characters brought a too long q under the
    limit, so a query the schema forbids was answered."""
    response = api_client.get(LIST, {"q": "tea" * 333 + "\x1d" * 5})

    assert response.status_code == 400
    assert "q" in response.json()


@pytest.mark.parametrize(
    ("body", "complaint"),
    [('{"text": 5}', "Not a valid string"), ('{"text": "tea \\udc00"}', "lone surrogate")],
)
def test_a_correction_must_be_valid_text(api_client, user, body, complaint):
    memory = memory_make(user=user, text="Prefers coffee.")

    response = api_client.post(correct(memory.id), body, content_type="application/json")

    assert response.status_code == 400
    assert complaint in response.content.decode()
    memory.refresh_from_db()
    assert memory.text == "Prefers coffee."


def test_what_a_chat_has_waiting_to_be_remembered(api_client, user, other_user):
    """Issue 13: the chat's panel shows the facts waiting to be generated."""
    from memory_app.models import MemoryWatermark
    from tests.memory_app.support import session_make, turn_add

    session = session_make(user)
    turn_add(session, "I live in Lisbon.")
    turn_add(session, "I have a cat named Miso.")
    MemoryWatermark.objects.create(session_id=session_key(session), last_sequence=2)
    url = f"/api/memory-pending/{session.id}/"

    body = api_client.get(url).json()

    assert body == {
        "unprocessed_turns": 1,
        "turns": ["I have a cat named Miso."],
        "job": None,
        "create": True,
        "temporary": False,
        "forgotten_with_it": 0,
        "job_error": "",
        "next_attempt_at": None,
    }
    theirs = session_make(other_user)
    assert api_client.get(f"/api/memory-pending/{theirs.id}/").status_code == 404
    assert api_client.get("/api/memory-pending/no-such-session/").status_code == 404


def test_the_pending_panel_tells_a_job_waiting_for_its_server_then_dead(
    api_client, user, enqueued, monkeypatch, settings
):
    """Issue 42: while the model server is down the panel says the job waits, why and when it
    is tried next, not "queued" forever; once the job gives up it says so."""
    from datetime import datetime, timedelta

    from django.utils import timezone

    from core.llm import ModelError
    from memory_app import tasks as memory_tasks
    from memory_app.models import GenerationJob
    from memory_app.services import jobs as job_services
    from tests.memory_app.support import job_for, session_make, turn_add

    down = ModelError(
        "The connection to the model server at http://127.0.0.1:9/v1 failed: refused",
        code="model_unavailable",
        transient=True,
    )

    def extract(**kwargs):
        raise down

    monkeypatch.setattr(job_services, "facts_extract", extract)
    monkeypatch.setattr(memory_tasks.random, "uniform", lambda low, high: high)
    settings.MEMORY_JOB_RETRY_BASE_SECONDS = 2 * settings.TASK_VISIBILITY_TIMEOUT_SECONDS
    session = session_make(user)
    turn_add(session, "I have a cat named Miso.")
    job = job_for(user, session)
    url = f"/api/memory-pending/{session.id}/"
    before = timezone.now()

    assert memory_tasks.memory_job_run.apply(kwargs={"job_id": str(job.id)}).get() == "queued"

    body = api_client.get(url).json()
    assert body["job"] == "waiting"
    assert "model server at http://127.0.0.1:9/v1" in body["job_error"]
    next_attempt = datetime.fromisoformat(body["next_attempt_at"])
    wait = timedelta(seconds=settings.MEMORY_JOB_RETRY_BASE_SECONDS)
    assert before + wait <= next_attempt <= timezone.now() + wait
    GenerationJob.objects.filter(pk=job.pk).update(
        created_at=timezone.now() - timedelta(seconds=settings.MEMORY_JOB_RETRY_FOR_SECONDS + 1)
    )

    assert memory_tasks.memory_job_run.apply(kwargs={"job_id": str(job.id)}).get() == "dead"

    body = api_client.get(url).json()
    assert (body["job"], body["next_attempt_at"]) == ("dead", None)
    assert "model server at http://127.0.0.1:9/v1" in body["job_error"]
    assert body["unprocessed_turns"] == 1
