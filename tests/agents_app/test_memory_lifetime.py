"""Each app chooses whether its memories follow their sources (the default: a deleted session
takes the memories drawn only from it) or outlive their sessions (an ADK app that cleans up
sessions after adding them to memory keeps what was learned)."""

import json

import pytest
from django.test import Client
from django.utils import timezone

from agents_app.models import App, MemoryLifetime
from agents_app.services import app_ensure, app_memory_lifetime_set, service_account_create
from memory_app import services
from memory_app.models import Memory, MemoryRederivation, MemoryRevision
from memory_app.selectors.generation import session_memories_drawn_only
from memory_app.services import rederivation
from sessions_app import services as session_services
from tests.factories import session_key
from tests.memory_app.support import (
    lexical_only,  # noqa: F401 (fixture)
    memory_make,
    offline,  # noqa: F401 (fixture)
    session_make,
    turn_add,
    user_events,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_only", "offline")]
APP = "support"


@pytest.fixture
def app():
    return app_ensure(name=APP)[0]


def api(app, scopes=None):
    key = service_account_create(app=app, name=f"sa{app.service_accounts.count()}", scopes=scopes)
    return Client(HTTP_AUTHORIZATION=f"Bearer {key.key}")


def lifetime_url():
    return f"/api/v1/apps/{APP}/memory-lifetime/"


def put(client, body):
    return client.put(lifetime_url(), json.dumps(body), content_type="application/json")


def delete(user, session):
    assert session_services.session_delete(
        app_name=APP, user_id=str(user.pk), session_id=session.id
    )


def test_memories_follow_their_sources_by_default(app, user):
    chat = session_make(user, app_name=APP)
    turn_add(chat, "I have a cat called Miso")
    memory = memory_make(
        user=user, app_name=APP, text="The user has a cat called Miso", sources=user_events(chat.id)
    )
    assert app.memory_lifetime == MemoryLifetime.FOLLOW_SOURCES
    assert session_memories_drawn_only(user_pk=user.pk, session_id=session_key(chat)) == 1

    delete(user, chat)

    assert not Memory.objects.filter(pk=memory.pk).exists()


def test_an_app_whose_memories_outlive_their_sessions_keeps_them_and_says_why(app, user):
    app_memory_lifetime_set(app=app, lifetime=MemoryLifetime.OUTLIVE_SESSIONS)
    chat, other = session_make(user, app_name=APP), session_make(user, app_name=APP)
    turn_add(chat, "I have a cat called Miso")
    turn_add(other, "I live in Lisbon")
    only = memory_make(
        user=user, app_name=APP, text="The user has a cat called Miso", sources=user_events(chat.id)
    )
    shared = memory_make(
        user=user,
        app_name=APP,
        text="The user lives in Lisbon",
        sources=user_events(chat.id) + user_events(other.id),
    )
    session_scope = memory_make(
        user=user,
        app_name=APP,
        text="For this chat the user is vegetarian",
        scope="session",
        session_id=session_key(chat),
    )
    assert session_memories_drawn_only(user_pk=user.pk, session_id=session_key(chat)) == 1

    delete(user, chat)

    only.refresh_from_db()
    shared.refresh_from_db()
    assert only.text == "The user has a cat called Miso"
    assert not only.sources.exists()
    reason = MemoryRevision.objects.filter(memory=only).latest("created_at").reason
    assert reason.startswith("Its session was deleted")
    assert shared.text == "The user lives in Lisbon"
    assert not MemoryRederivation.objects.exists(), "nothing to derive again"
    assert not Memory.objects.filter(pk=session_scope.pk).exists(), "kept for that chat only"


def test_an_app_switching_lifetime_mid_derivation_leaves_the_memory_whole(app, user, monkeypatch):
    first, second = session_make(user, app_name=APP), session_make(user, app_name=APP)
    turn_add(first, "I live in Lisbon.")
    turn_add(second, "I moved to Porto.")
    for chat in (first, second):
        job = services.memory_job_request(
            app_name=APP,
            user_pk=user.pk,
            session_id=session_key(chat),
            trigger="explicit",
            enqueue=False,
        )
        services.memory_job_run(job_id=str(job.id))
    [memory] = Memory.objects.filter(user=user, app_name=APP)
    delete(user, second)
    extract = rederivation.facts_extract

    def switching(**kwargs):
        App.objects.filter(name=APP).update(memory_lifetime=MemoryLifetime.OUTLIVE_SESSIONS)
        return extract(**kwargs)

    monkeypatch.setattr(rederivation, "facts_extract", switching)
    assert services.memory_rederive(memory_id=str(memory.pk)) == "updated"

    memory.refresh_from_db()
    assert memory.text == "The user lives in Lisbon."
    # Now outliving: deleting the last chat keeps the memory, and a late request for it
    # (a redelivered task) neither deletes nor changes it.
    delete(user, first)
    memory.refresh_from_db()
    assert not memory.sources.exists()
    MemoryRederivation.objects.create(memory=memory, cause="late", requested_at=timezone.now())
    assert services.memory_rederive(memory_id=str(memory.pk)) == "unchanged"
    assert Memory.objects.filter(pk=memory.pk, text="The user lives in Lisbon.").exists()


def test_the_api_reads_and_sets_the_lifetime(app):
    client = api(app)

    assert client.get(lifetime_url()).json() == {"memory_lifetime": "follow_sources"}
    answer = put(client, {"memory_lifetime": "outlive_sessions"})
    assert answer.status_code == 200, answer.content
    assert App.objects.get(name=APP).memory_lifetime == "outlive_sessions"
    assert put(client, {"memory_lifetime": "forever"}).status_code == 400
    assert put(client, {}).status_code == 400
    assert App.objects.get(name=APP).memory_lifetime == "outlive_sessions"
    reader = api(app, scopes=["memory:read"])
    assert put(reader, {"memory_lifetime": "follow_sources"}).status_code == 403
    other, _ = app_ensure(name="elsewhere")
    outsider = api(other)
    assert put(outsider, {"memory_lifetime": "follow_sources"}).status_code == 404
    assert App.objects.get(name=APP).memory_lifetime == "outlive_sessions"
