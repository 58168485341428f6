"""The service-account HTTP API (/api/v1/apps/<app>/): keys, scopes, end users, sessions,
events, state, memory, end users' data rights, and the audit of every request."""

from __future__ import annotations

import base64
import io
import json
import os
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from agents_app.models import App, EndUser, ServiceAccountKey, ServiceRequest
from agents_app.services import app_ensure, service_account_create
from memory_app.models import GenerationJob, Memory
from sessions_app.models import AppState, EventRecord, SessionRecord

pytestmark = pytest.mark.django_db


def key_for(app_name: str, scopes=None, **kwargs) -> str:
    app, _ = app_ensure(name=app_name)
    count = app.service_accounts.count()
    return service_account_create(app=app, name=f"sa{count}", scopes=scopes, **kwargs).key


class Api:
    """A client of the service-account API with one key."""

    def __init__(self, key: str, app: str) -> None:
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
        self.base = f"/api/v1/apps/{app}/"

    def get(self, path: str, **params):
        return self.client.get(self.base + path, params)

    def post(self, path: str, body: dict):
        return self.client.post(self.base + path, json.dumps(body), content_type="application/json")

    def patch(self, path: str, body: dict):
        return self.client.patch(
            self.base + path, json.dumps(body), content_type="application/json"
        )

    def delete(self, path: str):
        return self.client.delete(self.base + path)


def said(text: str) -> dict:
    """A user's message as ADK's Event JSON."""
    return {"author": "user", "content": {"role": "user", "parts": [{"text": text}]}}


@pytest.fixture
def api() -> Api:
    return Api(key_for("support"), "support")


def test_app_key_create_prints_the_key_alone_on_its_last_line_and_makes_the_app():
    out = io.StringIO()
    call_command("app_key_create", "--app", "helpdesk", stdout=out, stderr=io.StringIO())
    key = out.getvalue().strip().splitlines()[-1]

    app = App.objects.get(name="helpdesk")
    assert app.open_to_all
    stored = ServiceAccountKey.objects.get(service_account__app=app)
    assert key.startswith(stored.prefix + ".")
    assert key not in stored.hashed_key and key.split(".")[1] not in stored.hashed_key
    assert sorted(stored.scopes) == sorted(
        ["sessions:read", "sessions:write", "memory:read", "memory:write", "users:admin"]
    )
    assert Api(key, "helpdesk").get("users/u1/sessions/").status_code == 200


def test_app_key_create_narrows_the_scopes():
    out = io.StringIO()
    call_command(
        "app_key_create",
        "--app",
        "helpdesk",
        "--scopes",
        "sessions:read",
        stdout=out,
        stderr=io.StringIO(),
    )
    key = out.getvalue().strip().splitlines()[-1]
    api = Api(key, "helpdesk")

    assert api.get("users/u1/sessions/").status_code == 200
    refused = api.post("users/u1/sessions/", {})
    assert refused.status_code == 403
    assert refused.json()["detail"] == "This API key lacks the scope 'sessions:write'."


def test_a_session_round_trip_in_adk_shapes(api):
    created = api.post(
        "users/alice/sessions/",
        {"session_id": "s1", "state": {"k": 1, "user:tz": "CET", "app:motd": "hi", "temp:x": 0}},
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["user_id"] == "alice" and body["app_name"] == "support"
    assert body["state"] == {"k": 1, "user:tz": "CET", "app:motd": "hi"}
    assert body["events"] == []

    event = {
        "id": "ev1",
        "invocation_id": "inv1",
        "author": "support_agent",
        "content": {"role": "model", "parts": [{"text": "Hello"}]},
        "actions": {
            "state_delta": {"app:counter": 2, "temp:scratch": 1, "k": 2},
            "artifact_delta": {"report.txt": 0},
            "requested_tool_confirmations": {},
        },
        "model_version": "gemini-2.5-flash-001",
        "finish_reason": "STOP",
    }
    appended = api.post("users/alice/sessions/s1/events/", event)
    assert appended.status_code == 201, appended.content
    stored = appended.json()["event"]
    assert stored["model_version"] == "gemini-2.5-flash-001"
    assert stored["actions"]["artifact_delta"] == {"report.txt": 0}
    assert "temp:scratch" not in stored["actions"]["state_delta"]
    assert appended.json()["last_update_time"] > 0

    got = api.get("users/alice/sessions/s1/", num_recent_events=5).json()
    assert got["state"] == {"k": 2, "user:tz": "CET", "app:motd": "hi", "app:counter": 2}
    assert [e["id"] for e in got["events"]] == ["ev1"]
    assert got["events"][0]["model_version"] == "gemini-2.5-flash-001"
    assert got["events"][0]["actions"]["artifact_delta"] == {"report.txt": 0}

    listed = api.get("users/alice/sessions/").json()
    assert [s["id"] for s in listed["sessions"]] == ["s1"]
    assert api.get("users/alice/state/").json() == {"user": {"user:tz": "CET"}}
    assert api.get("state/").json() == {"app": {"app:motd": "hi", "app:counter": 2}}

    assert api.post("users/alice/sessions/", {"session_id": "s1"}).status_code == 409
    assert api.delete("users/alice/sessions/s1/").status_code == 204
    assert api.get("users/alice/sessions/s1/").status_code == 404


def test_an_event_comes_back_with_the_values_it_was_sent_with(api):
    """Text beyond ASCII, quotes and line ends, nulls and numbers in state and metadata, and
    a field ADK added that this server does not model: the append's answer and a read give
    back what was sent, temp: keys aside."""
    api.post("users/alice/sessions/", {"session_id": "s1"})
    event = {
        "id": "ev1",
        "invocation_id": "inv1",
        "author": "support_agent",
        "timestamp": 1_790_000_000.125,
        "content": {"role": "model", "parts": [{"text": 'Grüße — "ok" 😀\n\tdone\u2028'}]},
        "actions": {
            "state_delta": {
                "none": None,
                "big": 2**53 + 1,
                "tenth": 0.1,
                "nested": {"list": [1, None, "x", {"deep": -0.5e-7}]},
                "temp:scratch": 1,
            },
        },
        "custom_metadata": {"note": None, "ratio": 1e21},
        "x_added_by_a_later_adk": {"values": [None, True, 1.5]},
    }

    appended = api.post("users/alice/sessions/s1/events/", event).json()["event"]
    read = api.get("users/alice/sessions/s1/").json()["events"]

    assert read == [appended]
    del event["actions"]["state_delta"]["temp:scratch"]
    for field in ("id", "invocation_id", "author", "timestamp", "content", "custom_metadata"):
        assert appended[field] == event[field]
    assert appended["x_added_by_a_later_adk"] == event["x_added_by_a_later_adk"]
    assert appended["actions"]["state_delta"] == event["actions"]["state_delta"]


def test_a_service_account_stores_its_agents_tool_results(api):
    """The app's own runtime answers its tool calls through its service account: the
    ``function_response`` an end user may not write (issue 27) is stored from here."""
    api.post("users/alice/sessions/", {"session_id": "s1"})
    part = {"function_response": {"id": "c1", "name": "lookup", "response": {"ok": True}}}

    appended = api.post(
        "users/alice/sessions/s1/events/",
        {"author": "support_agent", "content": {"role": "user", "parts": [part]}},
    )

    assert appended.status_code == 201, appended.content
    assert appended.json()["event"]["content"]["parts"] == [part]


def test_partial_events_are_refused_and_nothing_is_written(api):
    api.post("users/alice/sessions/", {"session_id": "s1"})
    refused = api.post("users/alice/sessions/s1/events/", {"author": "user", "partial": True})
    assert refused.status_code == 400
    assert "partial" in refused.json()
    assert not EventRecord.objects.exists()


def test_rewind_answers_the_session_as_it_was(api):
    api.post("users/alice/sessions/", {"session_id": "s1"})
    for number in (1, 2):
        api.post(
            "users/alice/sessions/s1/events/",
            {
                "invocation_id": f"i{number}",
                "author": "user",
                "actions": {"state_delta": {"n": number}},
            },
        )
    rewound = api.post("users/alice/sessions/s1/rewind/", {"invocation_id": "i2"})
    assert rewound.status_code == 200, rewound.content
    assert rewound.json()["state"] == {"n": 1}
    events = rewound.json()["events"]
    assert [e["invocation_id"] for e in events[:2]] == ["i1", "i2"]
    assert events[2]["actions"]["rewind_before_invocation_id"] == "i2"


def test_reads_of_an_unknown_end_user_are_empty_and_create_nobody(api):
    assert api.get("users/nobody/sessions/").json() == {"sessions": [], "next_page_token": None}
    assert api.get("users/nobody/state/").json() == {"user": {}}
    assert api.get("users/nobody/memories/search/", query="tea").json() == {"memories": []}
    assert api.get("users/nobody/sessions/s1/").status_code == 404
    assert not EndUser.objects.exists()


def test_end_users_are_isolated_from_each_other_and_across_apps():
    support = Api(key_for("support"), "support")
    billing = Api(key_for("billing"), "billing")
    support.post("users/alice/sessions/", {"session_id": "a1", "state": {"user:plan": "pro"}})

    assert support.get("users/bob/sessions/a1/").status_code == 404
    assert support.get("users/bob/state/").json() == {"user": {}}
    assert billing.get("users/alice/sessions/").json()["sessions"] == []
    assert billing.get("users/alice/sessions/a1/").status_code == 404
    assert billing.delete("users/alice/sessions/a1/").status_code == 404
    assert billing.post("users/alice/sessions/a1/events/", {"author": "x"}).status_code == 404
    assert SessionRecord.objects.filter(session_id="a1").exists()

    alice_support = EndUser.objects.get(app__name="support", external_id="alice")
    billing.post("users/alice/sessions/", {"session_id": "b1"})
    alice_billing = EndUser.objects.get(app__name="billing", external_id="alice")
    assert alice_support.user_id != alice_billing.user_id
    assert not alice_support.user.has_usable_password()


def test_a_key_of_one_app_reaches_no_other_app():
    app_ensure(name="billing")
    support = Api(key_for("support"), "billing")
    answer = support.get("users/alice/sessions/")
    assert answer.status_code == 404
    assert "no app named 'billing'" in answer.json()["detail"]


def test_unknown_revoked_and_expired_keys_answer_401_saying_why():
    key = key_for("support")
    record = ServiceAccountKey.objects.get()
    assert Api(key + "x", "support").get("state/").status_code == 401
    missing = Client().get("/api/v1/apps/support/state/")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"].startswith("Bearer")

    ServiceAccountKey.objects.filter(pk=record.pk).update(revoked=True)
    revoked = Api(key, "support").get("state/")
    assert (revoked.status_code, revoked.json()["detail"]) == (401, "The API key was revoked.")

    expired_key = key_for("support")
    ServiceAccountKey.objects.filter(revoked=False).update(
        expiry_date=timezone.now() - timedelta(seconds=1)
    )
    expired = Api(expired_key, "support").get("state/")
    assert (expired.status_code, expired.json()["detail"]) == (401, "The API key has expired.")


def test_a_browser_session_is_not_a_key(user):
    browser = Client()
    browser.force_login(user)
    assert browser.get("/api/v1/apps/chat/users/1/sessions/").status_code == 401


def test_every_request_and_its_outcome_is_audited(api):
    api.post("users/alice/sessions/", {"session_id": "s1"})
    api.get("users/alice/sessions/nope/")
    Api("bad.key", "support").get("state/")

    rows = list(ServiceRequest.objects.order_by("id").values_list("route", "status_code"))
    assert rows == [
        ("api/v1/apps/<key:app_name>/users/<key:user_id>/sessions/", 201),
        ("api/v1/apps/<key:app_name>/users/<key:user_id>/sessions/<key:session_id>/", 404),
        ("api/v1/apps/<key:app_name>/state/", 401),
    ]
    first = ServiceRequest.objects.order_by("id").first()
    assert first.service_account.app.name == "support"
    assert first.end_user == EndUser.objects.get(external_id="alice").user
    assert ServiceRequest.objects.order_by("id").last().key_prefix == "bad"


def test_memories_add_search_delete(api):
    added = api.post("users/alice/memories/", {"text": "Alice prefers green tea."})
    assert added.status_code == 201, added.content
    memory_id = added.json()["id"]

    found = api.get("users/alice/memories/search/", query="what tea does alice like").json()
    assert [m["id"] for m in found["memories"]] == [memory_id]
    assert found["memories"][0]["text"] == "Alice prefers green tea."
    assert api.get("users/bob/memories/search/", query="tea").json() == {"memories": []}

    assert api.delete(f"users/bob/memories/{memory_id}/").status_code == 404
    assert api.delete(f"users/alice/memories/{memory_id}/").status_code == 204
    assert not Memory.objects.filter(pk=memory_id).exists()


def test_a_session_memory_is_added_for_that_session_and_goes_with_it(api):
    assert api.post("users/alice/sessions/", {"session_id": "trip"}).status_code == 201
    added = api.post(
        "users/alice/memories/",
        {"text": "Alice is vegetarian.", "scope": "session", "session_id": "trip"},
    )
    assert added.status_code == 201, added.content
    assert (added.json()["scope"], added.json()["session_id"]) == ("session", "trip")
    assert api.get("users/alice/memories/search/", query="vegetarian").json() == {"memories": []}

    refused = api.post("users/alice/memories/", {"text": "Alice is vegan.", "scope": "session"})
    assert refused.status_code == 400 and "session_id" in refused.json()
    unknown = {"text": "Alice is vegan.", "scope": "session", "session_id": "nope"}
    assert api.post("users/alice/memories/", unknown).status_code == 404
    assert api.delete("users/alice/sessions/trip/").status_code == 204
    assert not Memory.objects.exists()


def test_generation_is_a_background_job_the_caller_can_poll(
    api, django_capture_on_commit_callbacks
):
    api.post("users/alice/sessions/", {"session_id": "s1"})
    api.post(
        "users/alice/sessions/s1/events/",
        {
            "invocation_id": "i1",
            "author": "user",
            "content": {
                "role": "user",
                "parts": [{"text": "My name is Alice and I live in Lyon."}],
            },
        },
    )
    with django_capture_on_commit_callbacks(execute=False):
        queued = api.post("users/alice/memory/generate/", {"session_id": "s1"})
    assert queued.status_code == 202, queued.content
    job = queued.json()
    assert job["status"] == "queued" and job["job_id"]
    assert api.get(f"jobs/{job['job_id']}/").json()["status"] == "queued"
    assert api.post("users/bob/memory/generate/", {"session_id": "s1"}).status_code == 404
    other = Api(key_for("billing"), "billing")
    assert other.get(f"jobs/{job['job_id']}/").status_code == 404


def test_last_update_time_is_the_newest_appended_events_timestamp(api):
    created = api.post("users/alice/sessions/", {"session_id": "s1"}).json()
    later = created["last_update_time"] + 100.0

    newer = api.post("users/alice/sessions/s1/events/", {**said("later"), "timestamp": later})
    older = api.post(
        "users/alice/sessions/s1/events/", {**said("earlier"), "timestamp": later - 50.0}
    )

    assert newer.json()["last_update_time"] == later
    assert older.json()["last_update_time"] == later
    assert api.get("users/alice/sessions/s1/").json()["last_update_time"] == later


def _append_checked(api, session: dict, text: str):
    newest = session["events"][-1]["id"] if session.get("events") else ""
    query = urlencode(
        {
            "stale_check_last_update_time": repr(session["last_update_time"]),
            "stale_check_last_event_id": newest,
        }
    )
    return api.post(f"users/alice/sessions/s1/events/?{query}", said(text))


def test_an_append_with_the_stale_check_refuses_a_copy_older_than_the_stored_session(api):
    api.post("users/alice/sessions/", {"session_id": "s1"})
    first = api.get("users/alice/sessions/s1/").json()
    second = api.get("users/alice/sessions/s1/").json()

    appended = _append_checked(api, first, "first writer")
    refused = _append_checked(api, second, "second writer")

    assert appended.status_code == 201, appended.content
    assert refused.status_code == 409
    assert refused.json()["code"] == "stale_session"
    stored = api.get("users/alice/sessions/s1/").json()
    assert [event["content"]["parts"][0]["text"] for event in stored["events"]] == ["first writer"]
    assert _append_checked(api, stored, "after a reload").status_code == 201
    assert api.post("users/alice/sessions/s1/events/", said("unchecked")).status_code == 201
    unknown = api.post(
        "users/alice/sessions/nope/events/?stale_check_last_update_time=0", said("lost")
    )
    assert unknown.status_code == 404


def test_events_added_to_memory_feed_a_job_and_never_the_conversation(
    api, django_capture_on_commit_callbacks
):
    api.post("users/alice/sessions/", {"session_id": "s1"})
    first = api.post("users/alice/sessions/s1/events/", {**said("Hello."), "id": "e1"}).json()
    given = {**said("My name is Alice and I live in Lyon."), "id": "e2"}
    given["actions"] = {"state_delta": {"user:city": "Lyon", "mood": "calm"}}

    with django_capture_on_commit_callbacks(execute=False):
        queued = api.post(
            "users/alice/memory/events/", {"session_id": "s1", "events": [first["event"], given]}
        )
        alone = api.post("users/carol/memory/events/", {"events": [said("I am Carol.")]})

    assert queued.status_code == 202, queued.content
    assert alone.status_code == 202, alone.content
    assert len(queued.json()["job_ids"]) == 2
    assert queued.json()["job_id"] == queued.json()["job_ids"][-1]
    session = api.get("users/alice/sessions/s1/").json()
    assert [event["id"] for event in session["events"]] == ["e1"]
    assert session["state"] == {}
    assert api.get("users/alice/state/").json() == {"user": {}}
    assert [s["id"] for s in api.get("users/alice/sessions/").json()["sessions"]] == ["s1"]
    assert api.get("users/carol/sessions/").json()["sessions"] == []
    held = EventRecord.objects.get(event_id="e2")
    assert held.session.memory_only and held.actions.get("state_delta", {}) == {}
    jobs = GenerationJob.objects.filter(user__end_user__external_id="alice")
    assert {job.session_id for job in jobs} == {held.session_id, session_key("alice", "s1")}


def test_events_added_to_memory_are_checked_whole_before_any_is_kept(api):
    refused = api.post(
        "users/alice/memory/events/", {"events": [said("Fine."), {"author": "user", "id": 7}]}
    )

    assert refused.status_code == 400
    assert "events.1" in refused.json()
    assert not SessionRecord.objects.exists() and not EventRecord.objects.exists()


def session_key(user_id: str, session_id: str) -> str:
    return SessionRecord.objects.get(user__end_user__external_id=user_id, session_id=session_id).key


def test_export_and_delete_all_of_an_end_user(api):
    api.post("users/alice/sessions/", {"session_id": "s1", "state": {"user:tz": "CET"}})
    api.post("users/alice/memories/", {"text": "Alice prefers green tea."})
    exported = api.get("users/alice/export/")
    assert exported.status_code == 200
    document = json.loads(b"".join(exported.streaming_content))
    assert [s["id"] for s in document["sessions"]] == ["s1"]

    assert api.delete("users/alice/").status_code == 204
    assert not EndUser.objects.filter(external_id="alice").exists()
    assert not SessionRecord.objects.exists() and not Memory.objects.exists()
    assert api.get("users/alice/export/").status_code == 404
    assert api.get("users/").json() == {"users": [], "next_page_token": None}


def test_users_admin_needs_its_scope():
    api = Api(key_for("support", scopes=["sessions:read", "sessions:write"]), "support")
    api.post("users/alice/sessions/", {})
    assert api.get("users/").status_code == 403
    assert api.delete("users/alice/").status_code == 403
    assert EndUser.objects.filter(external_id="alice").exists()


def test_service_accounts_write_app_state_end_users_through_it_only(api):
    api.post("users/alice/sessions/", {"session_id": "s1", "state": {"app:greeting": "hi"}})
    assert AppState.objects.get(app_name="support", key="greeting").value == "hi"


def test_pii_redaction_of_the_app_applies_to_events_before_they_are_stored(api):
    App.objects.filter(name="support").update(pii_redaction=True)
    api.post("users/alice/sessions/", {"session_id": "s1"})
    api.post(
        "users/alice/sessions/s1/events/",
        {
            "author": "user",
            "content": {"role": "user", "parts": [{"text": "mail me at a@b.example"}]},
        },
    )
    stored = EventRecord.objects.get()
    assert stored.content["parts"][0]["text"] == "mail me at [email]"


def test_end_users_are_listed_a_page_at_a_time(api):
    for name in ("carol", "alice", "bob"):
        api.post(f"users/{name}/sessions/", {})
    first = api.get("users/", page_size=2).json()
    assert [row["user_id"] for row in first["users"]] == ["alice", "bob"]
    second = api.get("users/", page_size=2, page_token=first["next_page_token"]).json()
    assert [row["user_id"] for row in second["users"]] == ["carol"]
    assert second["next_page_token"] is None


def test_a_rewind_appended_as_adk_does_rewinds_on_the_server(api):
    api.post("users/alice/sessions/", {"session_id": "s1", "state": {"n": 0}})
    for number in (1, 2):
        api.post(
            "users/alice/sessions/s1/events/",
            {
                "invocation_id": f"i{number}",
                "author": "user",
                "actions": {"state_delta": {"n": number}},
            },
        )
    rewind = {
        "id": "rw1",
        "invocation_id": "i3",
        "author": "user",
        "actions": {"rewind_before_invocation_id": "i2", "state_delta": {"n": 99}},
    }
    answer = api.post("users/alice/sessions/s1/events/", rewind)
    assert answer.status_code == 201, answer.content
    assert answer.json()["event"]["id"] == "rw1"
    assert answer.json()["event"]["actions"]["state_delta"] == {"n": 1}
    session = api.get("users/alice/sessions/s1/").json()
    assert session["state"] == {"n": 1}
    # As ADK's get_session: every stored event, the rewound one too, then the rewind's.
    assert [e["invocation_id"] for e in session["events"]] == ["i1", "i2", "i3"]
    assert api.post("users/alice/sessions/s1/events/", rewind).status_code == 409
    again = {**rewind, "id": "rw2", "actions": {"rewind_before_invocation_id": "i2"}}
    assert api.post("users/alice/sessions/s1/events/", again).status_code == 201
    unknown = {**rewind, "id": "rw3", "actions": {"rewind_before_invocation_id": "i9"}}
    assert api.post("users/alice/sessions/s1/events/", unknown).status_code == 404


def test_app_memories_are_bootstrapped_shared_and_found_by_every_end_user(api):
    added = api.post("memories/", {"text": "Refunds over 100 EUR need a manager's approval."})
    assert added.status_code == 201, added.content
    memory = Memory.objects.get(pk=added.json()["id"])
    assert (memory.scope, memory.user_id, memory.source_type) == ("app", None, "bootstrapped")
    revision = memory.revisions.get()
    assert revision.action == "created" and "service account" in revision.reason
    assert [m["id"] for m in api.get("memories/").json()["memories"]] == [str(memory.pk)]

    api.post("users/alice/sessions/", {})
    found = api.get("users/alice/memories/search/", query="refund approval manager").json()
    assert [m["id"] for m in found["memories"]] == [str(memory.pk)]
    assert found["memories"][0]["author"] == "app"

    other = Api(key_for("billing"), "billing")
    assert other.delete(f"memories/{memory.pk}/").status_code == 404
    assert api.delete(f"memories/{memory.pk}/").status_code == 204
    assert not Memory.objects.filter(pk=memory.pk).exists()


def test_num_recent_events_zero_answers_no_events_and_after_timestamp_keeps_later_ones(api):
    api.post("users/alice/sessions/", {"session_id": "s1"})
    for number, stamp in ((1, 100.0), (2, 200.0), (3, 300.0)):
        api.post(
            "users/alice/sessions/s1/events/",
            {"id": f"e{number}", "author": "user", "timestamp": stamp},
        )
    assert api.get("users/alice/sessions/s1/", num_recent_events=0).json()["events"] == []
    later = api.get("users/alice/sessions/s1/", after_timestamp=200.0).json()["events"]
    assert [event["id"] for event in later] == ["e2", "e3"]
    both = api.get("users/alice/sessions/s1/", after_timestamp=100.0, num_recent_events=1)
    assert [event["id"] for event in both.json()["events"]] == ["e3"]


TOLD = {
    "invocation_id": "i1",
    "author": "user",
    "content": {"role": "user", "parts": [{"text": "I moved to Porto last week."}]},
}
REPLIED = {
    "id": "reply",
    "invocation_id": "i1",
    "author": "support_agent",
    "content": {"role": "model", "parts": [{"text": "Noted, welcome to Porto!"}]},
}


def test_an_agents_reply_appended_triggers_memory_generation_as_a_turn_does(
    api, django_capture_on_commit_callbacks
):
    App.objects.filter(name="support").update(trigger_every_turn=True)
    api.post("users/alice/sessions/", {"session_id": "s1"})
    with django_capture_on_commit_callbacks(execute=False):
        assert api.post("users/alice/sessions/s1/events/", TOLD).status_code == 201
        assert not GenerationJob.objects.exists()
        assert api.post("users/alice/sessions/s1/events/", REPLIED).status_code == 201

    job = GenerationJob.objects.get()
    assert (job.session.session_id, job.trigger, job.status) == ("s1", "every_turn", "queued")
    assert job.user == EndUser.objects.get(external_id="alice").user


def test_a_reply_refused_triggers_nothing(api, django_capture_on_commit_callbacks):
    App.objects.filter(name="support").update(trigger_every_turn=True)
    api.post("users/alice/sessions/", {"session_id": "s1"})
    api.post("users/bob/sessions/", {"session_id": "b1"})
    with django_capture_on_commit_callbacks(execute=False):
        assert api.post("users/alice/sessions/s1/events/", TOLD).status_code == 201
        # Bob's reply to Alice's session: her trigger is due, his append is refused.
        assert api.post("users/bob/sessions/s1/events/", REPLIED).status_code == 404
        assert api.post("users/alice/sessions/s2/events/", REPLIED).status_code == 404
    assert not GenerationJob.objects.exists()
    with django_capture_on_commit_callbacks(execute=False):
        assert api.post("users/alice/sessions/s1/events/", REPLIED).status_code == 201
    GenerationJob.objects.update(status=GenerationJob.Status.SUCCEEDED)
    with django_capture_on_commit_callbacks(execute=False):
        assert api.post("users/alice/sessions/s1/events/", REPLIED).status_code == 409
    assert GenerationJob.objects.count() == 1


def test_a_function_call_of_the_agent_is_no_finished_turn(api, django_capture_on_commit_callbacks):
    App.objects.filter(name="support").update(trigger_every_turn=True)
    api.post("users/alice/sessions/", {"session_id": "s1"})
    call = {
        "invocation_id": "i1",
        "author": "support_agent",
        "content": {"role": "model", "parts": [{"function_call": {"name": "lookup", "args": {}}}]},
    }
    with django_capture_on_commit_callbacks(execute=False):
        assert api.post("users/alice/sessions/s1/events/", call).status_code == 201
    assert not GenerationJob.objects.exists()


def test_app_memories_are_corrected_with_a_revision_naming_the_service_account(api):
    memory_id = api.post("memories/", {"text": "Refunds need a manager."}).json()["id"]

    corrected = api.patch(
        f"memories/{memory_id}/",
        {"text": "Refunds over 100 EUR need a manager.", "topic": "refunds"},
    )

    assert corrected.status_code == 200, corrected.content
    assert (corrected.json()["text"], corrected.json()["topic"]) == (
        "Refunds over 100 EUR need a manager.",
        "refunds",
    )
    memory = Memory.objects.get(pk=memory_id)
    assert (memory.source_type, memory.status) == ("bootstrapped", "active")
    revision = memory.revisions.get(action="updated")
    assert revision.before == {"text": "Refunds need a manager.", "topic": ""}
    assert revision.after == {"text": "Refunds over 100 EUR need a manager.", "topic": "refunds"}
    assert "service account 'sa0'" in revision.reason
    found = api.get("users/alice/memories/search/", query="refund manager").json()
    assert found == {"memories": []}, "an unknown end user reads nothing"
    api.post("users/alice/sessions/", {})
    found = api.get("users/alice/memories/search/", query="refund 100 EUR manager").json()
    assert [m["text"] for m in found["memories"]] == ["Refunds over 100 EUR need a manager."]

    assert api.patch(f"memories/{memory_id}/", {}).status_code == 400
    assert api.patch(f"memories/{memory_id}/", {"text": "  "}).status_code == 400
    assert Memory.objects.get(pk=memory_id).text == "Refunds over 100 EUR need a manager."
    other = Api(key_for("billing"), "billing")
    assert other.patch(f"memories/{memory_id}/", {"text": "Refunds are free."}).status_code == 404
    assert api.patch("memories/not-a-uuid/", {"text": "x"}).status_code == 404
    assert Memory.objects.get(pk=memory_id).revisions.count() == 2


def test_what_names_nothing_is_not_found_and_an_empty_correction_is_refused(api):
    """Found by schemathesis' positive_data_acceptance with a valid key: each request is valid
    by the schema, and was answered 400."""
    api.post("users/alice/sessions/", {"session_id": "s1"})
    memory = api.post("memories/", {"text": "Opening hours are 9 to 5."}).json()

    unknown_invocation = api.post("users/alice/sessions/s1/rewind/", {"invocation_id": "never"})
    unknown_page = api.get("users/", page_token="session_state_key")
    empty_correction = api.patch(f"memories/{memory['id']}/", {})

    assert unknown_invocation.status_code == 404
    assert "No invocation 'never'" in unknown_invocation.json()["detail"]
    assert unknown_page.status_code == 404
    assert empty_correction.status_code == 400


def test_an_agents_large_photo_and_tool_result_are_stored_and_read_back_whole(api):
    """ADK stores events of any size: a 2 MB photo a user sent and a tool's 600 KB result
    are appended (bodies far past DATA_UPLOAD_MAX_MEMORY_SIZE) and come back byte for byte."""
    photo = os.urandom(2 * 1024 * 1024)
    photo_json = base64.urlsafe_b64encode(photo).decode()
    result = {"rows": ["x" * 1000] * 600}
    api.post("users/alice/sessions/", {"session_id": "s1"})
    sent = [
        {
            "author": "user",
            "invocation_id": "i1",
            "content": {
                "role": "user",
                "parts": [{"inline_data": {"mime_type": "image/jpeg", "data": photo_json}}],
            },
        },
        {
            "author": "support_agent",
            "invocation_id": "i1",
            "content": {
                "role": "model",
                "parts": [{"function_call": {"id": "c1", "name": "lookup", "args": {}}}],
            },
        },
        {
            "author": "support_agent",
            "invocation_id": "i1",
            "content": {
                "role": "user",
                "parts": [
                    {"function_response": {"id": "c1", "name": "lookup", "response": result}}
                ],
            },
        },
    ]
    for event in sent:
        appended = api.post("users/alice/sessions/s1/events/", event)
        assert appended.status_code == 201, appended.content[:300]

    events = api.get("users/alice/sessions/s1/").json()["events"]

    data = events[0]["content"]["parts"][0]["inline_data"]["data"]
    assert base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)) == photo
    assert events[2]["content"]["parts"][0]["function_response"]["response"] == result


def test_a_large_event_added_to_memory_is_kept_whole_for_it(
    api, django_capture_on_commit_callbacks
):
    """add_events_to_memory takes the events an agent has, a photo sent inline too."""
    photo = os.urandom(2 * 1024 * 1024)
    event = {
        "author": "user",
        "id": "with-photo",
        "content": {
            "role": "user",
            "parts": [
                {"text": "This is my dog."},
                {
                    "inline_data": {
                        "mime_type": "image/jpeg",
                        "data": base64.urlsafe_b64encode(photo).decode(),
                    }
                },
            ],
        },
    }

    with django_capture_on_commit_callbacks(execute=False):
        queued = api.post("users/alice/memory/events/", {"events": [event]})

    assert queued.status_code == 202, queued.content[:300]
    held = EventRecord.objects.get(event_id="with-photo")
    assert held.session.memory_only
    (blob,) = held.session.blobs.all()
    assert blob.size == len(photo)
