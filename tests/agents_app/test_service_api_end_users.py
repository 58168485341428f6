"""End users of the service-account API are keyed by (app, external id): no id of one app
takes, reserves or reaches an end user of another, whatever their names (issue 27)."""

from __future__ import annotations

import io
import json
from importlib import import_module
from urllib.parse import quote

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import call_command

from access_app.models import AuditAction, AuditLogEntry
from agents_app.models import EndUser
from agents_app.services import app_ensure, end_user_username
from memory_app.models import Memory
from sessions_app.models import SessionRecord
from sessions_app.services import session_create
from tests.agents_app.test_service_api import Api, key_for, said

pytestmark = pytest.mark.django_db

LONG = "a" * 120


def _api_of_new_app(name: str) -> Api:
    out = io.StringIO()
    call_command("app_key_create", "--app", name, stdout=out, stderr=io.StringIO())
    return Api(out.getvalue().strip().splitlines()[-1], name)


def _session_ids(api: Api, user_id: str) -> list[str]:
    answer = api.get(f"users/{user_id}/sessions/")
    assert answer.status_code == 200, answer.content
    return [session["id"] for session in answer.json()["sessions"]]


def _exported_session_ids(api: Api, user_id: str) -> list[str]:
    exported = api.get(f"users/{user_id}/export/")
    assert exported.status_code == 200, exported.content
    document = json.loads(b"".join(exported.streaming_content))
    return [session["id"] for session in document["sessions"]]


def test_ids_that_join_to_one_name_are_two_end_users_of_two_apps():
    colx, colx_y = _api_of_new_app("colx"), _api_of_new_app("colx:y")

    first = colx.post("users/y:z/sessions/", {"session_id": "of-colx"})
    second = colx_y.post("users/z/sessions/", {"session_id": "of-colx-y"})

    assert first.status_code == 201, first.content
    assert second.status_code == 201, second.content
    assert colx_y.post("users/z/sessions/", {}).status_code == 201
    assert _session_ids(colx, "y:z") == ["of-colx"]
    assert "of-colx" not in _session_ids(colx_y, "z")
    one = EndUser.objects.get(app__name="colx", external_id="y:z")
    other = EndUser.objects.get(app__name="colx:y", external_id="z")
    assert one.user_id != other.user_id


def test_apps_with_long_names_alike_keep_their_end_users_apart():
    first = Api(key_for(LONG + "-one"), LONG + "-one")
    second = Api(key_for(LONG + "-two"), LONG + "-two")
    user_id = "u" * 128

    assert first.post(f"users/{user_id}/sessions/", {"session_id": "s1"}).status_code == 201
    assert second.post(f"users/{user_id}/sessions/", {"session_id": "s2"}).status_code == 201

    assert _session_ids(first, user_id) == ["s1"]
    assert _session_ids(second, user_id) == ["s2"]
    accounts = EndUser.objects.filter(external_id=user_id).values_list("user__username", flat=True)
    assert len(set(accounts)) == 2
    assert all(len(name) <= 150 for name in accounts)


@pytest.mark.parametrize("user_id", ["a", "colx:y:z", "x@example.org", ":-._@", "9" * 128])
def test_any_id_the_schema_allows_works_in_every_app_at_once(user_id):
    support, billing = Api(key_for("support"), "support"), Api(key_for("billing"), "billing")

    for api in (support, billing):
        created = api.post(f"users/{user_id}/sessions/", {})
        assert created.status_code == 201, created.content
        session_id = created.json()["id"]
        appended = api.post(f"users/{user_id}/sessions/{session_id}/events/", said("hi"))
        assert appended.status_code == 201, appended.content

    assert EndUser.objects.filter(external_id=user_id).count() == 2


def test_export_and_delete_all_of_one_end_user_leave_the_other_apps_alike_id():
    colx, colx_y = _api_of_new_app("colx"), _api_of_new_app("colx:y")
    colx.post("users/y:z/sessions/", {"session_id": "kept"})
    colx.post("users/y:z/memories/", {"text": "Likes green tea."})
    colx_y.post("users/z/sessions/", {"session_id": "gone"})
    colx_y.post("users/z/memories/", {"text": "Plays the cello."})

    assert _exported_session_ids(colx_y, "z") == ["gone"]
    assert colx_y.delete("users/z/").status_code == 204

    assert list(SessionRecord.objects.values_list("session_id", flat=True)) == ["kept"]
    assert list(Memory.objects.values_list("user", flat=True)) == [
        EndUser.objects.get(app__name="colx").user_id
    ]
    assert colx_y.get("users/z/export/").status_code == 404
    assert _exported_session_ids(colx, "y:z") == ["kept"]


def test_the_migration_renames_the_accounts_it_made_and_keeps_every_end_user_and_their_data():
    migration = import_module("agents_app.migrations.0004_end_user_usernames_collision_free")
    support, _ = app_ensure(name="support")
    long_app, _ = app_ensure(name=LONG)
    accounts = get_user_model().objects
    made = accounts.create_user(username="support:alice", password=None)
    long_made = accounts.create_user(username=migration._former_username(LONG, "x" * 60))
    linked = accounts.create_user(username="bob", password="secret-42-horse")
    EndUser.objects.create(app=support, external_id="alice", user=made)
    EndUser.objects.create(app=support, external_id="bob", user=linked)
    EndUser.objects.create(app=long_app, external_id="x" * 60, user=long_made)
    session_create(app_name="support", user_id=str(made.pk), session_id="s-alice")

    migration.end_user_accounts_rename(apps, None)

    for account in (made, long_made, linked):
        account.refresh_from_db()
    assert made.username == end_user_username(app=support, external_id="alice")
    assert long_made.username == end_user_username(app=long_app, external_id="x" * 60)
    assert made.username.startswith("support:alice~")
    assert len(long_made.username) == 150
    assert linked.username == "bob" and linked.check_password("secret-42-horse")
    assert EndUser.objects.count() == 3
    api = Api(key_for("support"), "support")
    assert _session_ids(api, "alice") == ["s-alice"]
    assert api.post("users/carol/sessions/", {}).status_code == 201


@pytest.fixture
def api() -> Api:
    return Api(key_for("support"), "support")


def _segment(value: str) -> str:
    """An id as a path segment, percent-encoded twice as the clients send it."""
    return quote(quote(value, safe=""), safe="")


LOOK_ALIKE_USER_IDS = [
    "Ada Lovelace",
    "ada lovelace",
    "Ada Lovelace ",
    "org/123",
    "org%2F123",
    "caf\u00e9",  # é composed (NFC)
    "cafe\u0301",  # é decomposed (NFD)
    "\u00e9" * 128,
]


def test_look_alike_user_ids_are_each_their_own_end_user_stored_as_given(api):
    for user_id in LOOK_ALIKE_USER_IDS:
        created = api.post(f"users/{_segment(user_id)}/sessions/", {"session_id": "chat 1"})
        assert created.status_code == 201, (user_id, created.content)
        assert created.json()["user_id"] == user_id
        said_it = api.post(
            f"users/{_segment(user_id)}/sessions/{_segment('chat 1')}/events/", said(user_id)
        )
        assert said_it.status_code == 201, said_it.content

    for user_id in LOOK_ALIKE_USER_IDS:
        session = api.get(f"users/{_segment(user_id)}/sessions/{_segment('chat 1')}/").json()
        assert session["user_id"] == user_id
        assert [event["content"]["parts"][0]["text"] for event in session["events"]] == [user_id]
    stored = set(EndUser.objects.values_list("external_id", flat=True))
    assert stored == set(LOOK_ALIKE_USER_IDS)


LOOK_ALIKE_SESSION_IDS = [
    "chat 1",
    "Chat 1",
    "chat 1 ",
    " chat 1",
    "chat\n1",
    "a/b",
    "a%2Fb",
    "100%",
    "caf\u00e9",
    "cafe\u0301",
    "\u4f1a\u8bdd",
    "s" * 128,
]


def test_look_alike_session_ids_are_each_their_own_session_stored_as_given(api):
    user = _segment("org/123")
    for session_id in LOOK_ALIKE_SESSION_IDS:
        created = api.post(f"users/{user}/sessions/", {"session_id": session_id})
        assert created.status_code == 201, (session_id, created.content)
        assert created.json()["id"] == session_id
        appended = api.post(
            f"users/{user}/sessions/{_segment(session_id)}/events/", said(session_id)
        )
        assert appended.status_code == 201, appended.content

    for session_id in LOOK_ALIKE_SESSION_IDS:
        session = api.get(f"users/{user}/sessions/{_segment(session_id)}/").json()
        assert session["id"] == session_id
        assert [event["content"]["parts"][0]["text"] for event in session["events"]] == [session_id]
    assert sorted(_session_ids(api, user)) == sorted(LOOK_ALIKE_SESSION_IDS)
    assert api.delete(f"users/{user}/sessions/{_segment('a/b')}/").status_code == 204
    assert api.get(f"users/{user}/sessions/{_segment('a%2Fb')}/").status_code == 200


def test_a_read_of_an_id_no_store_holds_answers_as_unknown(api):
    too_long = _segment("s" * 129)
    assert api.get(f"users/{too_long}/sessions/").json() == {
        "sessions": [],
        "next_page_token": None,
    }
    assert api.get(f"users/someone/sessions/{too_long}/").status_code == 404
    for segment in ("%2500", "%25ff"):  # a NUL character, which no database holds; not UTF-8
        assert api.get(f"users/{segment}/sessions/").status_code == 404
        assert api.get(f"users/someone/sessions/{segment}/").status_code == 404


def test_an_id_longer_than_128_characters_is_refused_on_create(api):
    too_long = api.post("users/someone/sessions/", {"session_id": "s" * 129})
    assert too_long.status_code == 400
    assert "1-128 characters" in str(too_long.json())
    assert api.post(f"users/{_segment('u' * 129)}/sessions/", {}).status_code == 404
    assert not SessionRecord.objects.exists()


def test_a_key_exports_a_linked_account_only_into_its_access_log_and_never_deletes_it(user):
    """A staff-linked browser account was exported unaudited and deleted by a key."""
    api = _api_of_new_app("helpdesk")
    EndUser.objects.create(
        app=apps.get_model("agents_app", "App").objects.get(name="helpdesk"),
        external_id="linked",
        user=user,
    )
    api.post("users/made/sessions/", {"session_id": "theirs"})
    made = EndUser.objects.get(external_id="made").user

    assert _exported_session_ids(api, "linked") == []
    own = session_create(app_name="chat", user_id=str(user.pk), session_id="in-the-browser")
    refused = api.delete("users/linked/")
    deleted = api.delete("users/made/")

    assert refused.status_code == 403
    assert "only the end users it made" in refused.json()["detail"]
    account = get_user_model().objects.get(pk=user.pk)
    assert account.is_active and account.check_password("correct horse battery staple")
    assert EndUser.objects.filter(user=user, external_id="linked").exists()
    assert SessionRecord.objects.filter(user=user, session_id=own.id).exists()
    assert not get_user_model().objects.filter(pk=made.pk).exists()
    entry = AuditLogEntry.objects.get(subject_user=user)
    assert (entry.action, entry.actor) == (AuditAction.EXPORT, None)
    assert entry.actor_username.startswith("service account") and "helpdesk" in entry.actor_username
    assert deleted.status_code == 204


def test_staff_cannot_link_an_account_to_an_apps_end_user(admin_client):
    assert admin_client.get("/admin/agents_app/enduser/add/").status_code == 403


def test_every_read_or_deletion_of_a_linked_persons_data_is_in_their_access_log(user):
    """Only the export of a linked browser account reached its access log: a key listed,
    read and searched their chats and deleted their memories unseen."""
    api = _api_of_new_app("helpdesk")
    app = apps.get_model("agents_app", "App").objects.get(name="helpdesk")
    EndUser.objects.create(app=app, external_id="linked", user=user)
    session = session_create(app_name="helpdesk", user_id=str(user.pk), session_id="theirs")
    memory = Memory.objects.create(app_name="helpdesk", user=user, text="Likes green tea.")
    api.post("users/made/sessions/", {"session_id": "mine"})
    api.get("users/made/sessions/mine/")

    reads = [
        api.get("users/linked/sessions/"),
        api.get(f"users/linked/sessions/{session.id}/"),
        api.get(f"users/linked/sessions/{session.id}/"),
        api.get("users/linked/memories/search/", query="tea"),
    ]
    deleted = api.delete(f"users/linked/memories/{memory.pk}/")

    assert [answer.status_code for answer in reads] == [200, 200, 200, 200]
    assert deleted.status_code == 204
    entries = AuditLogEntry.objects.filter(subject_user=user).order_by("pk")
    assert [entry.action for entry in entries] == [AuditAction.VIEW] * 4 + [AuditAction.DELETE]
    assert all(entry.actor_username.startswith("service account") for entry in entries)
    assert entries.last().path.endswith(f"/memories/{memory.pk}/")
    made = EndUser.objects.get(app=app, external_id="made").user
    assert not AuditLogEntry.objects.filter(subject_user=made).exists()
