"""Settings, export and deletion of all of a user's data.

The deletion test walks every model Django knows (third-party ones included) and proves that no
row still points at the user or holds a marker planted in their messages, state and memories.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import uuid
from datetime import timedelta

import pytest
from axes.models import AccessFailureLog
from django.apps import apps
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import connections, models
from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.test import AsyncClient, Client
from django.urls import reverse
from django.utils import timezone
from google.genai import types

from access_app.services import access_grant_create, access_token_create, audit_record
from agents_app.models import EndUser
from agents_app.services import app_ensure, service_account_create
from chatapp import services as chat_services
from memory_app import selectors as memory_selectors
from memory_app import services as memory_services
from memory_app.models import (
    GenerationJob,
    Memory,
    MemoryRevision,
    MemoryScope,
    MemorySettings,
    MemorySource,
)
from memory_app.services import jobs as memory_jobs
from sessions_app import services as session_services
from sessions_app.events import Event, EventActions, new_invocation_id
from sessions_app.models import AppState, SessionRecord
from sessions_app.uploads import uploads_check
from tests.factories import UserFactory, session_key
from tests.memory_app.support import (  # noqa: F401 (fixture)
    APP,
    lexical_only,
    memory_make,
    user_events,
)
from tests.sample_files import image_bytes

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_only")]

PASSWORD = "correct horse battery staple"
PNG = image_bytes("PNG")


@pytest.fixture(autouse=True)
def default_app(settings):
    settings.DEFAULT_APP_NAME = APP


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def _say(session, text: str, *, delta: dict | None = None) -> None:
    session_services.event_append(
        session=session,
        event=Event(
            invocation_id=new_invocation_id(),
            author="user",
            content=types.Content(role="user", parts=[types.Part(text=text)]),
            actions=EventActions(state_delta=delta or {}),
        ),
    )


def plant(user, marker: str) -> dict:
    """Everything a user leaves behind, each piece carrying ``marker``."""
    session = session_services.session_create(
        app_name=APP, user_id=str(user.pk), state={"note": marker, "user:motto": marker}
    )
    SessionRecord.objects.filter(session_id=session.id).update(title=f"chat about {marker}")
    _say(session, f"remember that my code word is {marker}", delta={"last": marker})
    _say(session, f"and the user-level word is {marker}", delta={"user:word": marker})
    event = user_events(session.id)[0]
    job = GenerationJob.objects.create(
        user=user, app_name=APP, session_id=session_key(session), trigger="explicit", error=marker
    )
    memory = memory_make(user=user, text=f"Code word is {marker}", sources=[event])
    MemorySource.objects.filter(memory=memory).update(excerpt=marker)
    MemoryRevision.objects.create(
        memory=memory, action="created", after={"text": marker}, reason=marker, actor_job=job
    )
    session_memory = memory_make(
        user=user,
        text=f"session fact {marker}",
        scope=MemoryScope.SESSION,
        session_id=session_key(session),
    )
    shared = memory_make(text=f"app fact from {marker}", scope=MemoryScope.APP, sources=[event])
    MemorySettings.objects.update_or_create(user=user, defaults={"create_enabled": False})
    staff = UserFactory(is_staff=True)
    LogEntry.objects.create(
        user=staff,
        content_type=ContentType.objects.get_for_model(Memory),
        object_id=str(memory.id),
        object_repr=f"Code word is {marker}",
        action_flag=CHANGE,
    )
    access_grant_create(
        owner=user, grantee=staff, scope="memories", expires_at=timezone.now() + timedelta(days=3)
    )
    planted_token = access_token_create(user=user, name=marker, scopes=["read"]).token
    # The doors an end user might plant the marker in shared app state through are shut
    # (issue 11): the walk below would find it in sessions_app.AppState otherwise.
    client = Client()
    client.force_login(user)
    planted_app_state = client.post(
        "/api/sessions/", {"state": {"app:motd": marker}}, content_type="application/json"
    )
    assert planted_app_state.status_code == 400
    appended = client.post(
        f"/api/sessions/{session.id}/events/",
        {"author": "assistant", "actions": {"state_delta": {"app:motd": marker}}},
        content_type="application/json",
    )
    assert appended.status_code == 400
    # A wrong password kept by the sign-in guard, under the account's name.
    Client().post("/accounts/login/", {"username": user.get_username(), "password": marker})
    audit_record(
        actor=staff,
        subject_user_pk=user.pk,
        action="view",
        object_type="memory_app.memory",
        object_id=memory.id,
        reason=f"support ticket about {marker}",
    )
    attached = session_services.attachments_store(
        app_name=APP,
        user_id=str(user.pk),
        session_id=session.id,
        uploads=uploads_check([(f"{marker}.txt", f"notes on {marker}".encode())]),
    )[0]
    kept = session_services.artifact_save(
        app_name=APP,
        user_id=str(user.pk),
        filename=f"user:{marker}.png",
        artifact=types.Part(inline_data=types.Blob(data=PNG, mime_type="image/png")),
    )
    # The memory keeps an image ("remember this logo") and was drawn from the attached file.
    Memory.objects.filter(pk=memory.pk).update(image=kept)
    MemorySource.objects.filter(memory=memory).update(artifact=attached)
    return {
        "session_id": session.id,
        "memory_ids": [str(memory.id), str(session_memory.id)],
        "shared_id": shared.id,
        "artifact_ids": [str(attached.pk), str(kept.pk)],
        "token": planted_token,
    }


def artifact_files_of(folder, user_pk: int) -> list:
    """The files the storage holds for the user: the deletion walk looks on disk too."""
    return sorted(path for path in (folder / str(user_pk)).rglob("*") if path.is_file())


def _text_columns(model) -> list[models.Field]:
    return [
        field
        for field in model._meta.concrete_fields
        if isinstance(field, models.CharField | models.TextField | models.JSONField)
    ]


def rows_holding(needle: str) -> dict[str, int]:
    """Rows of every model whose text or JSON columns contain ``needle``."""
    found = {}
    for model in apps.get_models():
        columns = _text_columns(model)
        if not columns:
            continue
        casts = {f"_text_{field.attname}": Cast(field.attname, TextField()) for field in columns}
        query = Q()
        for alias in casts:
            query |= Q(**{f"{alias}__contains": needle})
        count = model._default_manager.annotate(**casts).filter(query).count()
        if count:
            found[model._meta.label] = count
    return found


def rows_pointing_at(user_pk: int, *, allowed: set[str]) -> dict[str, int]:
    """Rows of every model with a foreign key (or one-to-one) to the user."""
    user_model = get_user_model()
    found = {}
    for model in apps.get_models():
        for field in model._meta.concrete_fields:
            if field.is_relation and field.related_model is user_model:
                label = f"{model._meta.label}.{field.name}"
                count = model._default_manager.filter(**{field.attname: user_pk}).count()
                if count and label not in allowed:
                    found[label] = count
        for field in model._meta.many_to_many:
            if field.related_model is user_model:
                through = field.remote_field.through
                column = field.m2m_reverse_field_name()
                count = through._default_manager.filter(**{f"{column}_id": user_pk}).count()
                if count:
                    found[f"{model._meta.label}.{field.name}"] = count
    return found


@pytest.mark.parametrize("delete_account", [False, True])
def test_no_row_anywhere_holds_the_users_content_after_deletion(
    user, other_user, delete_account, artifacts_dir, django_capture_on_commit_callbacks
):
    marker = f"zqx{uuid.uuid4().hex}"
    other_marker = f"zqy{uuid.uuid4().hex}"
    planted = plant(user, marker)
    plant(other_user, other_marker)
    memory_selectors.memory_search(app_name=APP, user_pk=user.pk, query="code word")
    assert rows_holding(marker)  # the walk does find what was planted
    assert {"access_app.AccessGrant.owner", "access_app.AuditLogEntry.subject_user"} <= set(
        rows_pointing_at(user.pk, allowed=set())
    )

    assert len(artifact_files_of(artifacts_dir, user.pk)) == 2

    with django_capture_on_commit_callbacks(execute=True):
        report = chat_services.user_data_delete(user=user, delete_account=delete_account)

    assert artifact_files_of(artifacts_dir, user.pk) == []
    assert len(artifact_files_of(artifacts_dir, other_user.pk)) == 2
    for identifier in planted["artifact_ids"]:
        assert rows_holding(identifier) == {}
    assert report.sessions == 1
    assert report.memories == 2
    assert report.shared_memories == 1
    assert rows_holding(marker) == {}
    for identifier in [planted["session_id"], *planted["memory_ids"]]:
        assert rows_holding(identifier) == {}
    kept_with_account = {"memory_app.MemorySettings.user", "access_app.AccountName.user"}
    assert rows_pointing_at(user.pk, allowed=kept_with_account) == {}
    assert get_user_model().objects.filter(pk=user.pk).exists() is not delete_account
    assert not AppState.objects.filter(value__icontains=marker).exists()
    signin_failures = AccessFailureLog.objects.filter(username=user.get_username())
    assert signin_failures.exists() is not delete_account
    if not delete_account:
        assert MemorySettings.objects.get(user=user).create_enabled is False
    # The other user's data is all there.
    assert set(rows_holding(other_marker)) >= {
        "sessions_app.SessionRecord",
        "sessions_app.EventRecord",
        "sessions_app.SessionState",
        "sessions_app.UserState",
        "sessions_app.ArtifactRecord",
        "memory_app.Memory",
        "memory_app.MemorySource",
        "memory_app.MemoryRevision",
        "memory_app.GenerationJob",
        "admin.LogEntry",
        "access_app.AuditLogEntry",
    }


def test_a_shared_memory_with_other_sources_is_kept_without_the_users(user, other_user):
    marker = f"zqx{uuid.uuid4().hex}"
    planted = plant(user, marker)
    theirs = plant(other_user, "other")
    shared = Memory.objects.get(pk=planted["shared_id"])
    MemorySource.objects.create(
        memory=shared, event=user_events(theirs["session_id"])[0], excerpt="other"
    )
    Memory.objects.filter(pk=shared.pk).update(text="An app-wide fact")

    chat_services.user_data_delete(user=user, delete_account=False)

    shared.refresh_from_db()
    assert [s.event.session.session_id for s in shared.sources.all()] == [theirs["session_id"]]
    assert shared.revisions.get().action == MemoryRevision.Action.SOURCES_CHANGED


def test_search_forgets_deleted_data_at_once(user):
    memory_make(user=user, text="Favourite colour is teal")
    assert memory_selectors.memory_search(app_name=APP, user_pk=user.pk, query="teal")

    chat_services.user_data_delete(user=user, delete_account=False)

    assert memory_selectors.memory_search(app_name=APP, user_pk=user.pk, query="teal") == []


def test_settings_page_turns_memory_off_and_on(signed_in, user):
    page = signed_in.get(reverse("settings")).content.decode()
    assert "Create memories from my chats" in page
    assert "Use memories in replies" in page
    assert "Reference past chats" in page

    signed_in.post(reverse("settings"), {"use_enabled": "on"})

    row = MemorySettings.objects.get(user=user)
    assert (row.create_enabled, row.use_enabled, row.past_chats_enabled) == (False, True, False)
    signed_in.post(
        reverse("settings"),
        {"create_enabled": "on", "use_enabled": "on", "past_chats_enabled": "on"},
    )
    row.refresh_from_db()
    assert (row.create_enabled, row.use_enabled, row.past_chats_enabled) == (True, True, True)


def test_delete_page_needs_the_password(signed_in, user):
    plant(user, "zqx-page")

    wrong = signed_in.post(reverse("data-delete"), {"password": "wrong"})

    assert wrong.status_code == 400
    assert "not your password" in wrong.content.decode()
    assert SessionRecord.objects.filter(user=user).exists()
    kept = signed_in.post(reverse("data-delete"), {"password": PASSWORD}, follow=True)
    assert "were deleted" in kept.content.decode()
    assert not SessionRecord.objects.filter(user=user).exists()
    assert signed_in.get(reverse("settings")).status_code == 200


def test_deleting_the_account_signs_out(signed_in, user):
    response = signed_in.post(
        reverse("data-delete"), {"password": PASSWORD, "delete_account": "on"}
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("login")
    assert not get_user_model().objects.filter(pk=user.pk).exists()
    assert signed_in.get(reverse("settings")).status_code == 302


def _export(client) -> tuple[dict, object]:
    response = client.get(reverse("data-export"))
    assert response.status_code == 200
    assert response.streaming
    body = b"".join(response.streaming_content)
    return json.loads(body), response


def test_export_has_every_session_event_state_memory_and_setting(signed_in, user, other_user):
    marker = f"zqx{uuid.uuid4().hex}"
    planted = plant(user, marker)
    plant(other_user, "other-user-secret")

    data, response = _export(signed_in)

    assert response["Content-Disposition"].startswith('attachment; filename="my-data-')
    assert response["Content-Type"].startswith("application/json")
    assert data["user"]["username"] == user.username
    assert data["memory_settings"] == {
        "create_enabled": False,
        "use_enabled": True,
        "past_chats_enabled": True,
    }
    assert data["user_state"] == {APP: {"user:motto": marker, "user:word": marker}}
    (session,) = data["sessions"]
    assert session["id"] == planted["session_id"]
    assert session["state"] == {"note": marker, "last": marker}
    assert [e["content"]["parts"][0]["text"] for e in session["events"]] == [
        f"remember that my code word is {marker}",
        f"and the user-level word is {marker}",
    ]
    memories = {m["id"]: m for m in data["memories"]}
    assert set(memories) == set(planted["memory_ids"])
    main = memories[planted["memory_ids"][0]]
    assert main["sources"][0]["excerpt"] == marker
    assert main["image_artifact_id"] == planted["artifact_ids"][1]
    assert main["sources"][0]["artifact_id"] == planted["artifact_ids"][0]
    assert main["revisions"][0]["after"] == {"text": marker}
    assert data["memory_jobs"][0]["error"] == marker
    assert [g["scope"] for g in data["access_grants"]] == ["memories"]
    (token,) = data["access_tokens"]
    assert token["name"] == marker and token["scopes"] == ["read"]
    assert planted["token"].partition(".")[2] not in json.dumps(data)
    (entry,) = data["staff_access_log"]
    assert entry["object_id"] == planted["memory_ids"][0]
    assert entry["reason"] == f"support ticket about {marker}"
    assert "other-user-secret" not in json.dumps(data)
    files = {each["filename"]: each for each in data["artifacts"]}
    assert set(files) == {f"{marker}.txt", f"user:{marker}.png"}
    assert base64.b64decode(files[f"{marker}.txt"]["data_base64"]) == f"notes on {marker}".encode()
    assert files[f"{marker}.txt"]["session_id"] == planted["session_id"]
    assert base64.b64decode(files[f"user:{marker}.png"]["data_base64"]) == PNG
    assert files[f"user:{marker}.png"]["session_id"] is None


def test_export_of_a_long_history_streams_in_many_pieces(signed_in, user):
    session = session_services.session_create(app_name=APP, user_id=str(user.pk))
    for number in range(400):
        _say(session, f"message {number} " + "x" * 400)

    response = signed_in.get(reverse("data-export"))
    pieces = list(response.streaming_content)

    assert len(pieces) > 2
    assert all(len(piece) < 200 * 1024 for piece in pieces)
    events = json.loads(b"".join(pieces))["sessions"][0]["events"]
    assert [e["sequence"] for e in events] == list(range(1, 401))


@pytest.mark.django_db(transaction=True)
async def test_export_streams_under_asgi(user):
    client = AsyncClient()
    await client.aforce_login(user)

    response = await client.get(reverse("data-export"))

    assert response.status_code == 200
    body = b"".join([piece async for piece in response.streaming_content])
    assert json.loads(body)["user"]["id"] == user.pk


def test_export_through_the_api(api_client, user):
    plant(user, "zqx-api")

    response = api_client.get(reverse("api-export"))

    assert response.status_code == 200
    assert json.loads(b"".join(response.streaming_content))["user"]["id"] == user.pk


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stage", ["after extraction", "while writing"])
def test_a_memory_job_running_during_deletion_leaves_nothing(requires_postgres, stage, monkeypatch):
    """The job holds no lock while it extracts and the user's lock while it writes: deletion
    lands either before its write (which then finds its job gone) or after (and removes it)."""
    user = UserFactory()
    monkeypatch.setattr(memory_jobs, "task_enqueue", lambda **kwargs: None)
    session = session_services.session_create(app_name=APP, user_id=str(user.pk))
    _say(session, "I live in Porto and I keep bees.")
    job = memory_services.memory_job_request(
        app_name=APP, user_pk=user.pk, session_id=session_key(session), trigger="session_end"
    )
    reached, release = threading.Event(), threading.Event()
    if stage == "after extraction":
        real = memory_jobs.facts_extract

        def paused(**kwargs):
            facts = real(**kwargs)
            reached.set()
            release.wait(10)
            return facts

        monkeypatch.setattr(memory_jobs, "facts_extract", paused)
    else:
        real = memory_jobs.memories_consolidate

        def paused(**kwargs):
            report = real(**kwargs)
            reached.set()
            time.sleep(0.5)
            return report

        monkeypatch.setattr(memory_jobs, "memories_consolidate", paused)
    outcome = {}

    def worker():
        try:
            outcome["status"] = memory_services.memory_job_run(job_id=str(job.id)).status
        except Exception as error:
            outcome["error"] = type(error).__name__
        finally:
            connections.close_all()

    thread = threading.Thread(target=worker)
    thread.start()
    assert reached.wait(20)
    chat_services.user_data_delete(user=user, delete_account=False)
    release.set()
    thread.join(20)

    assert not thread.is_alive()
    assert not Memory.objects.filter(user=user).exists()
    assert not MemorySource.objects.filter(event__session__user=user).exists()
    assert not GenerationJob.objects.filter(user=user).exists()
    if stage == "after extraction":
        assert outcome == {"error": "DoesNotExist"}
    else:
        assert outcome == {"status": GenerationJob.Status.SUCCEEDED}


def test_an_end_users_deletion_through_the_service_api_leaves_nothing(other_user):
    """An app's end user, written for by its service account, deleted by it: the same walk."""
    # Letters only: a long hex string reads as a secret to the memory safety check.
    marker = "zqe" + uuid.uuid4().hex.translate(str.maketrans("0123456789", "ghijklmnop"))
    app, _ = app_ensure(name="support")
    key = service_account_create(app=app, name="backend").key
    client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    base = "/api/v1/apps/support/users/alice/"

    def post(path, body):
        answer = client.post(base + path, json.dumps(body), content_type="application/json")
        assert answer.status_code in (201, 202), answer.content
        return answer

    post("sessions/", {"session_id": "s-end", "state": {"user:word": marker}})
    post(
        "sessions/s-end/events/",
        {"author": "user", "content": {"role": "user", "parts": [{"text": f"code {marker}"}]}},
    )
    post("memories/", {"text": f"Alice's favourite plant is the {marker}."})
    plant(other_user, f"zqy{uuid.uuid4().hex}")
    end_user_pk = EndUser.objects.get(external_id="alice").user_id
    assert rows_holding(marker)

    assert client.delete(base).status_code == 204

    assert rows_holding(marker) == {}
    assert rows_holding("s-end") == {}
    assert rows_pointing_at(end_user_pk, allowed=set()) == {}
    assert not get_user_model().objects.filter(pk=end_user_pk).exists()
