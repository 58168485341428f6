"""The sessions REST API, as a client of it sees it."""

import json
from urllib.parse import quote

import pytest
from django.test import Client
from rest_framework.test import APIClient

from agents_app.models import App
from core.api import MAX_JSON_DEPTH
from sessions_app import services
from sessions_app.events import Event, EventActions
from sessions_app.models import AppState, EventRecord, SessionRecord, SessionState, UserState

APP = "chat"
SECRET = "the-secret-only-the-owner-may-see"


def _session(user, *, app_name=APP, state=None, session_id=None):
    return services.session_create(
        app_name=app_name, user_id=str(user.pk), state=state, session_id=session_id
    )


def _append(session, *, invocation_id="e-1", text="hello", state_delta=None, author="user"):
    return services.event_append(
        session=session,
        event=Event(
            invocation_id=invocation_id,
            author=author,
            content={"role": "user", "parts": [{"text": text}]},
            actions=EventActions(state_delta=state_delta or {}),
        ),
    )


def _row_counts():
    return {
        model.__name__: model.objects.count()
        for model in (SessionRecord, EventRecord, SessionState, UserState, AppState)
    }


def _raw_post(client, url, body: str):
    return client.generic("POST", url, body, content_type="application/json")


@pytest.fixture
def other_client(other_user):
    client = APIClient()
    client.force_authenticate(other_user)
    return client


@pytest.fixture
def secret_session(other_user):
    """Another user's session holding content its owner alone may see."""
    session = _session(other_user, state={"note": SECRET}, session_id="their-session")
    _append(session, invocation_id="e-secret", text=SECRET)
    return session


# --- Listing ------------------------------------------------------------------------


def test_list_shows_only_my_sessions_of_the_app_newest_first(api_client, user, other_user):
    older = _session(user, state={"topic": "older"})
    newer = _session(user, state={"topic": "newer", "user:name": "Ada"})
    SessionRecord.objects.filter(session_id=older.id).update(last_update_time=1000.0)
    SessionRecord.objects.filter(session_id=newer.id).update(last_update_time=2000.0)
    _session(user, app_name="other-app")
    _session(other_user)

    response = api_client.get("/api/sessions/")

    assert response.status_code == 200
    body = response.json()
    assert [item["id"] for item in body["results"]] == [newer.id, older.id]
    assert body["next_page_token"] is None
    assert body["results"][0] == {
        "id": newer.id,
        "title": "",
        "app_name": APP,
        "user_id": str(user.pk),
        "temporary": False,
        "state": {"topic": "newer", "user:name": "Ada"},
        "last_update_time": 2000.0,
    }
    assert body["results"][1]["state"] == {"topic": "older", "user:name": "Ada"}


def test_list_of_another_app(api_client, user):
    mine = _session(user, app_name="other-app")
    _session(user)

    response = api_client.get("/api/sessions/", {"app_name": "other-app"})

    assert response.status_code == 200
    assert [item["id"] for item in response.json()["results"]] == [mine.id]


def test_list_walks_45_sessions_page_by_page_without_gaps_or_repeats(api_client, user):
    ids = [_session(user).id for _ in range(45)]
    for index, session_id in enumerate(ids):
        # Groups of three share a time, so the order must also break ties.
        SessionRecord.objects.filter(session_id=session_id).update(
            last_update_time=1000.0 + index // 3
        )
    expected = sorted(
        SessionRecord.objects.filter(session_id__in=ids).values_list(
            "last_update_time", "session_id"
        ),
        reverse=True,
    )

    seen, page_lengths, token = [], [], ""
    while True:
        response = api_client.get("/api/sessions/", {"page_size": 10, "page_token": token})
        assert response.status_code == 200
        body = response.json()
        seen += [(item["last_update_time"], item["id"]) for item in body["results"]]
        page_lengths.append(len(body["results"]))
        token = body["next_page_token"]
        if token is None:
            break

    assert page_lengths == [10, 10, 10, 10, 5]
    assert seen == expected
    assert len({session_id for _, session_id in seen}) == 45


@pytest.mark.parametrize(
    "query",
    [
        {"page_size": 0},
        {"page_size": 101},
        {"page_size": "ten"},
        {"app_name": "a" * 200},
        {"app_name": "\x00"},
        # Found by the REST fuzz (tests/chatapp/test_api_fuzz.py): an empty value was read
        # as "left out".
        {"app_name": ""},
        {"page_size": ""},
    ],
)
def test_list_refuses_bad_query_parameters(api_client, user, query):
    _session(user)

    response = api_client.get("/api/sessions/", query)

    assert response.status_code == 400
    assert response.json()


@pytest.mark.parametrize(
    "token",
    ["garbage!", "not-a-token", "W10"],  # W10: a valid base64 JSON list, but not a token
)
def test_list_bad_page_token_is_a_page_that_does_not_exist(api_client, token):
    """Not a 400: the token is valid by the schema (any string), and names no page
    (found by schemathesis' positive_data_acceptance)."""
    response = api_client.get("/api/sessions/", {"page_token": token})

    assert response.status_code == 404
    assert response.json() == {"detail": "The page token is not one this service issued."}


# --- Creating -----------------------------------------------------------------------


def test_create_session_with_scoped_state(api_client, user):
    App.objects.create(name="planner")
    response = api_client.post(
        "/api/sessions/",
        {
            "app_name": "planner",
            "session_id": "trip-2024",
            "state": {"step": 1, "user:name": "Ada", "temp:scratch": "x"},
        },
        format="json",
    )

    assert response.status_code == 201
    body = response.json()
    assert body["id"] == "trip-2024"
    assert body["app_name"] == "planner"
    assert body["user_id"] == str(user.pk)
    assert body["state"] == {"step": 1, "user:name": "Ada"}
    state = api_client.get("/api/sessions/trip-2024/state/").json()
    assert state == {
        "session": {"step": 1},
        "user": {"user:name": "Ada"},
        "app": {},
        "merged": {"step": 1, "user:name": "Ada"},
    }


def test_create_session_with_defaults(api_client, user, settings):
    settings.DEFAULT_APP_NAME = "default-app"
    App.objects.create(name="default-app")

    response = api_client.post("/api/sessions/", {}, format="json")

    assert response.status_code == 201
    body = response.json()
    record = SessionRecord.objects.get(session_id=body["id"])
    assert (record.app_name, record.user_id, body["state"]) == ("default-app", user.pk, {})


def test_create_session_is_owned_by_the_caller_whatever_the_body_says(api_client, user, other_user):
    response = api_client.post(
        "/api/sessions/", {"user_id": str(other_user.pk), "session_id": "mine"}, format="json"
    )

    assert response.status_code == 201
    assert response.json()["user_id"] == str(user.pk)
    assert SessionRecord.objects.get(session_id="mine").user_id == user.pk


def test_an_id_another_user_has_is_free_for_me_and_each_sees_their_own(
    api_client, user, other_user
):
    _session(other_user, state={"theirs": True}, session_id="first-chat")

    response = api_client.post(
        "/api/sessions/", {"session_id": "first-chat", "state": {"mine": 1}}, format="json"
    )

    assert response.status_code == 201
    created = response.json()
    assert created["id"] == "first-chat" and created["state"] == {"mine": 1}
    assert "exists" not in response.content.decode()
    assert api_client.get("/api/sessions/first-chat/state/").json()["session"] == {"mine": 1}
    owners = SessionRecord.objects.filter(session_id="first-chat").values_list("user_id")
    assert sorted(owners) == sorted([(user.pk,), (other_user.pk,)])


def test_the_same_id_in_two_apps_is_two_sessions_named_by_app_name(api_client, user):
    App.objects.create(name="travel")
    for app_name in ("chat", "travel"):
        created = api_client.post(
            "/api/sessions/",
            {"app_name": app_name, "session_id": "first-chat", "state": {"app": app_name}},
            format="json",
        )
        assert created.status_code == 201 and created.json()["id"] == "first-chat"

    for app_name in ("chat", "travel"):
        state = api_client.get("/api/sessions/first-chat/state/", {"app_name": app_name})
        assert state.json()["session"] == {"app": app_name}
    ambiguous = api_client.get("/api/sessions/first-chat/")
    assert ambiguous.status_code == 404 and "app_name" in ambiguous.json()["detail"]
    assert api_client.delete("/api/sessions/first-chat/?app_name=travel").status_code == 204
    assert api_client.get("/api/sessions/first-chat/state/").json()["session"] == {"app": "chat"}


def test_create_session_with_an_id_in_use_is_a_conflict(api_client, user):
    _session(user, state={"kept": True}, session_id="taken")
    before = _row_counts()

    response = api_client.post(
        "/api/sessions/", {"session_id": "taken", "state": {"kept": False}}, format="json"
    )

    assert response.status_code == 409
    assert "already exists" in response.json()["detail"]
    assert _row_counts() == before
    assert api_client.get("/api/sessions/taken/state/").json()["session"] == {"kept": True}


DEEP = "[" * (MAX_JSON_DEPTH - 1) + "]" * (MAX_JSON_DEPTH - 1)  # one level too many
VERY_DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ("{not json", "JSON parse error"),
        ('{"state": {"x": NaN}}', "Out of range float"),
        ('{"state": {"x": Infinity}}', "Out of range float"),
        ('{"state": {"x": 1e400}}', "not JSON-serialisable"),
        ('{"state": {"x": "a\\u0000b"}}', "NUL"),
        ('{"state": {"a\\u0000": 1}}', "NUL"),
        ('{"state": {"x": ' + DEEP + "}}", "nest"),
        ('{"state": {"x": ' + VERY_DEEP + "}}", "nest"),
        ("[1, 2]", "Expected a dictionary"),
        ('"a string"', "Expected a dictionary"),
        ('{"state": [["a", 1]]}', "Expected a dictionary"),
        ('{"state": "a=1"}', "Expected a dictionary"),
        ('{"state": null}', "may not be null"),
        ('{"state": {"User:x": 1}}', "wrong case"),
        ('{"state": {"user:": 1}}', "no name"),
        ('{"state": {"": 1}}', "must not be empty"),
        ('{"state": {"' + "k" * 300 + '": 1}}', "longer than"),
        ('{"session_id": "' + "s" * 129 + '"}', "1-128 characters"),
        ('{"session_id": ""}', "may not be blank"),
        # Found by the REST fuzz: lone surrogates could not be stored (500), numbers were
        # taken for ids.
        ('{"state": {"x": "\\ud800"}}', "lone surrogate"),
        ('{"state": {"\\udfff": 1}}', "lone surrogate"),
        ('{"session_id": "x\\ud800"}', "lone surrogate"),
        ('{"session_id": 0}', "1-128 characters"),
        ('{"temporary": 0}', "valid boolean"),
    ],
)
def test_create_session_refuses_bad_input_and_writes_nothing(api_client, body, complaint):
    before = _row_counts()

    response = _raw_post(api_client, "/api/sessions/", body)

    assert response.status_code == 400
    assert complaint in response.content.decode()
    assert _row_counts() == before


def test_create_session_keeps_state_nested_up_to_the_depth_limit(api_client):
    value = 1
    for _ in range(MAX_JSON_DEPTH - 2):  # the body and the state object are two levels
        value = [value]

    response = api_client.post("/api/sessions/", {"state": {"x": value}}, format="json")

    assert response.status_code == 201
    state = api_client.get(f"/api/sessions/{response.json()['id']}/state/").json()
    assert state["session"] == {"x": value}


def test_create_session_refuses_an_oversized_body_with_413(api_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    before = _row_counts()

    response = api_client.post("/api/sessions/", {"state": {"blob": "x" * 2000}}, format="json")

    assert response.status_code == 413
    assert response.json() == {"detail": "The request body is larger than this server accepts."}
    assert _row_counts() == before


def test_oversized_body_from_a_signed_in_browser_is_413_json(user, settings):
    """A browser session's CSRF check reads the body before the view does."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.cookies["csrftoken"] = "a" * 32

    response = client.post(
        "/api/sessions/",
        json.dumps({"state": {"blob": "x" * 2000}}),
        content_type="application/json",
    )

    assert response.status_code == 413
    assert response.json()["detail"]
    assert SessionRecord.objects.count() == 0


def test_create_session_refuses_form_bodies(api_client):
    response = api_client.post("/api/sessions/", {"session_id": "form"})

    assert response.status_code == 415
    assert not SessionRecord.objects.exists()


# --- One session --------------------------------------------------------------------


def test_get_session_with_merged_state_and_recent_events(api_client, user):
    session = _session(user, state={"step": 0})
    for number in range(1, 4):
        _append(session, invocation_id=f"e-{number}", text=f"turn {number}")
    _append(session, invocation_id="e-4", text="turn 4", state_delta={"user:name": "Ada"})

    response = api_client.get(f"/api/sessions/{session.id}/", {"num_recent_events": 2})

    assert response.status_code == 200
    body = response.json()
    assert body["id"] == session.id
    assert body["state"] == {"step": 0, "user:name": "Ada"}
    assert [event["sequence"] for event in body["events"]] == [3, 4]
    assert body["events"][1]["content"] == {"role": "user", "parts": [{"text": "turn 4"}]}
    assert body["events"][1]["actions"] == {"state_delta": {"user:name": "Ada"}}
    assert body["events"][1]["rewound"] is False
    assert body["events"][1]["author"] == "user"


def test_get_session_defaults_to_the_last_20_events(api_client, user):
    session = _session(user)
    for number in range(25):
        _append(session, invocation_id=f"e-{number}")

    body = api_client.get(f"/api/sessions/{session.id}/").json()

    assert [event["sequence"] for event in body["events"]] == list(range(6, 26))


def test_get_session_with_no_events(api_client, user):
    session = _session(user)
    _append(session)

    response = api_client.get(f"/api/sessions/{session.id}/", {"num_recent_events": 0})

    assert response.status_code == 200
    assert response.json()["events"] == []


@pytest.mark.parametrize("value", [-1, 1001, "all"])
def test_get_session_refuses_bad_num_recent_events(api_client, user, value):
    session = _session(user)

    response = api_client.get(f"/api/sessions/{session.id}/", {"num_recent_events": value})

    assert response.status_code == 400
    assert "num_recent_events" in response.json()


@pytest.mark.parametrize("session_id", ["unknown", "s" * 300, "has space", "a\x00b", "-dash", "é"])
def test_unknown_or_malformed_session_ids_are_404(api_client, session_id):
    url = f"/api/sessions/{quote(session_id)}/"

    for response in (
        api_client.get(url),
        api_client.get(url + "events/"),
        api_client.get(url + "state/"),
        api_client.post(url + "events/", {"author": "user"}, format="json"),
        api_client.post(url + "rewind/", {"invocation_id": "e-1"}, format="json"),
        api_client.delete(url),
    ):
        assert response.status_code == 404
        assert response.json() == {"detail": "Not found."}


def test_delete_session(api_client, user):
    session = _session(user, state={"step": 1, "user:name": "Ada"})
    _append(session)
    kept = _session(user)

    response = api_client.delete(f"/api/sessions/{session.id}/")

    assert response.status_code == 204
    assert response.content == b""
    assert api_client.get(f"/api/sessions/{session.id}/").status_code == 404
    assert not EventRecord.objects.filter(session__session_id=session.id).exists()
    assert not SessionState.objects.filter(session__session_id=session.id).exists()
    assert api_client.get(f"/api/sessions/{kept.id}/state/").json()["user"] == {"user:name": "Ada"}
    assert api_client.delete(f"/api/sessions/{session.id}/").status_code == 404


# --- Events -------------------------------------------------------------------------


def test_append_event_changes_state_and_is_stored(api_client, user):
    session = _session(user, state={"count": 0})

    response = api_client.post(
        f"/api/sessions/{session.id}/events/",
        {
            "author": "user",
            "invocation_id": "e-1",
            "content": {"role": "user", "parts": [{"text": "Call me Ada."}]},
            "actions": {"state_delta": {"count": 1, "user:name": "Ada", "temp:draft": "x"}},
            "custom_metadata": {"source": "test"},
        },
        format="json",
    )

    assert response.status_code == 201
    event = response.json()
    assert event["sequence"] == 1
    assert event["rewound"] is False
    assert event["author"] == "user"
    assert event["invocation_id"] == "e-1"
    assert event["content"] == {"role": "user", "parts": [{"text": "Call me Ada."}]}
    assert event["actions"]["state_delta"] == {"count": 1, "user:name": "Ada"}
    assert event["custom_metadata"] == {"source": "test"}
    assert isinstance(event["id"], str) and event["id"]
    assert isinstance(event["timestamp"], float)
    assert "partial" not in event
    state = api_client.get(f"/api/sessions/{session.id}/state/").json()
    assert state["merged"] == {"count": 1, "user:name": "Ada"}
    listed = api_client.get(f"/api/sessions/{session.id}/events/").json()["results"]
    assert listed == [event]


def test_append_event_with_given_id_and_timestamp(api_client, user):
    session = _session(user)
    answer = {
        "id": "answer-1",
        "author": "user",
        "invocation_id": "e-7",
        "timestamp": 1700000000.5,
        "content": {
            "role": "user",
            "parts": [{"text": "Yes, book it."}],
        },
    }

    first = api_client.post(f"/api/sessions/{session.id}/events/", answer, format="json")
    second = api_client.post(
        f"/api/sessions/{session.id}/events/",
        {"author": "user", "invocation_id": "e-7", "turn_complete": True},
        format="json",
    )

    assert first.status_code == 201
    assert first.json()["id"] == "answer-1"
    assert first.json()["timestamp"] == 1700000000.5
    assert first.json()["content"]["parts"] == [{"text": "Yes, book it."}]
    assert second.status_code == 201
    assert (second.json()["sequence"], second.json()["turn_complete"]) == (2, True)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "author"),
        ({"author": "user", "unknown": 1}, "unknown"),
        ({"author": "user", "content": {"parts": [{"text": 3}]}}, "content.parts.0.text"),
        ({"author": "user", "content": "hello"}, "content"),
        ({"author": "user", "actions": {"state_delta": []}}, "actions.state_delta"),
        ({"author": "user", "partial": True}, "partial"),
        (
            {"author": "user", "actions": {"rewind_before_invocation_id": "e-1"}},
            "actions.rewind_before_invocation_id",
        ),
        ({"author": "user", "branch": "b" * 600}, "branch"),
        ({"author": "user", "error_code": "c" * 200}, "error_code"),
        ([{"author": "user"}], "non_field_errors"),
        ({"author": "user", "usage_metadata": {"traffic_type": {}}}, "non_field_errors"),
        ({"author": "user", "timestamp": True}, "timestamp"),
        ({"author": "user", "timestamp": "1700000000"}, "timestamp"),
        (
            {"author": "user", "usage_metadata": {"prompt_token_count": True}},
            "usage_metadata.prompt_token_count",
        ),
        (
            {
                "author": "user",
                "actions": {
                    "compaction": {
                        "start_timestamp": False,
                        "end_timestamp": 1.5,
                        "compacted_content": {"role": "model", "parts": [{"text": "s"}]},
                    }
                },
            },
            "actions.compaction.start_timestamp",
        ),
    ],
)
def test_append_event_refuses_invalid_events_field_by_field(api_client, user, body, field):
    session = _session(user)
    before = _row_counts()

    response = api_client.post(f"/api/sessions/{session.id}/events/", body, format="json")

    assert response.status_code == 400
    assert field in response.json()
    assert _row_counts() == before


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ('{"author": ""}', "authored 'user'"),
        ('{"author": "' + "a" * 200 + '"}', "authored 'user'"),
        ('{"author": "user", "invocation_id": "' + "i" * 200 + '"}', "at most 128"),
        ('{"author": "user", "timestamp": 1e400}', "finite"),
        ('{"author": "user", "timestamp": 1e300}', "within years 1-9999"),
        ('{"author": "user", "id": ""}', "1-128 characters"),
        ('{"author": "user", "long_running_tool_ids": ["a", "a"]}', "may appear once"),
        ('{"author": "user", "timestamp": -1e300}', "within years 1-9999"),
        ('{"author": "user", "timestamp": 253402300800}', "within years 1-9999"),
        ('{"author": "user", "custom_metadata": {"x": 1e400}}', "not JSON-serialisable"),
        ('{"author": "user", "actions": {"state_delta": {"User:x": 1}}}', "wrong case"),
        ('{"author": "user", "actions": {"state_delta": {"user:": 1}}}', "no name"),
        ('{"author": "user", "actions": {"state_delta": {"x": NaN}}}', "Out of range float"),
        ('{"author": "user", "invocation_id": "a\\u0000"}', "NUL"),
        ('{"author": "user", "content": {"parts": [{"text": "\\u0000"}]}}', "NUL"),
        ('{"author": "user"', "JSON parse error"),
    ],
)
def test_append_event_refuses_bad_input_and_writes_nothing(api_client, user, body, complaint):
    session = _session(user, state={"kept": 1})
    before = _row_counts()

    response = _raw_post(api_client, f"/api/sessions/{session.id}/events/", body)

    assert response.status_code == 400
    assert complaint in response.content.decode()
    assert _row_counts() == before
    assert api_client.get(f"/api/sessions/{session.id}/state/").json()["session"] == {"kept": 1}


def test_append_event_over_the_event_size_limit_is_refused(api_client, user, settings):
    settings.MAX_EVENT_BYTES = 1000
    session = _session(user)
    before = _row_counts()

    response = api_client.post(
        f"/api/sessions/{session.id}/events/",
        {"author": "user", "content": {"parts": [{"text": "x" * 2000}]}},
        format="json",
    )

    assert response.status_code == 400
    assert "the limit is 1,000 bytes" in response.json()["detail"]
    assert _row_counts() == before


def test_append_event_with_an_oversized_body_is_413(api_client, user, settings):
    """An event's body has a limit of its own (an event may carry files), not the other
    JSON routes' DATA_UPLOAD_MAX_MEMORY_SIZE."""
    session = _session(user)
    settings.EVENT_REQUEST_MAX_BYTES = 1000
    before = _row_counts()

    response = api_client.post(
        f"/api/sessions/{session.id}/events/",
        {"author": "user", "content": {"parts": [{"text": "x" * 2000}]}},
        format="json",
    )

    assert response.status_code == 413
    assert _row_counts() == before


def test_append_event_with_an_id_already_stored_is_refused(api_client, user):
    session = _session(user)
    url = f"/api/sessions/{session.id}/events/"
    assert api_client.post(url, {"id": "ev-1", "author": "user"}, format="json").status_code == 201
    before = _row_counts()

    response = api_client.post(
        url, {"id": "ev-1", "author": "user", "actions": {"state_delta": {"x": 1}}}, format="json"
    )

    assert response.status_code == 409
    assert "already stored" in response.json()["detail"]
    assert _row_counts() == before


def test_events_pages_in_sequence_order(api_client, user):
    session = _session(user)
    for number in range(25):
        _append(session, invocation_id=f"e-{number}", text=f"turn {number}")
    url = f"/api/sessions/{session.id}/events/"

    sequences, texts, after = [], [], 0
    while after is not None:
        response = api_client.get(url, {"page_size": 10, "after_sequence": after})
        assert response.status_code == 200
        page = response.json()
        sequences += [event["sequence"] for event in page["results"]]
        texts += [event["content"]["parts"][0]["text"] for event in page["results"]]
        after = page["next_after_sequence"]

    assert sequences == list(range(1, 26))
    assert texts == [f"turn {number}" for number in range(25)]


def test_events_page_size_defaults_to_100(api_client, user):
    session = _session(user)
    for number in range(101):
        _append(session, invocation_id=f"e-{number}")

    page = api_client.get(f"/api/sessions/{session.id}/events/").json()

    assert len(page["results"]) == 100
    assert page["next_after_sequence"] == 100


@pytest.mark.parametrize(
    "query",
    [
        {"after_sequence": -1},
        {"after_sequence": 2**63},
        {"after_sequence": "first"},
        {"page_size": 0},
        {"page_size": 1001},
        {"include_rewound": "perhaps"},
    ],
)
def test_events_refuse_bad_query_parameters(api_client, user, query):
    session = _session(user)

    response = api_client.get(f"/api/sessions/{session.id}/events/", query)

    assert response.status_code == 400
    assert set(response.json()) == set(query)


# --- State --------------------------------------------------------------------------


def test_state_by_scope_is_shared_as_scopes_say(api_client, user, other_user):
    first = _session(user, state={"step": 1})
    second = _session(user, state={"step": 2})
    _append(first, state_delta={"user:name": "Ada", "app:motd": "hi", "temp:draft": "x"})
    theirs = _session(other_user)

    mine = api_client.get(f"/api/sessions/{second.id}/state/")

    assert mine.status_code == 200
    assert mine.json() == {
        "session": {"step": 2},
        "user": {"user:name": "Ada"},
        "app": {"app:motd": "hi"},
        "merged": {"step": 2, "user:name": "Ada", "app:motd": "hi"},
    }
    other_client = APIClient()
    other_client.force_authenticate(other_user)
    assert other_client.get(f"/api/sessions/{theirs.id}/state/").json() == {
        "session": {},
        "user": {},
        "app": {"app:motd": "hi"},
        "merged": {"app:motd": "hi"},
    }


# --- Rewind -------------------------------------------------------------------------


def test_rewind_restores_state_and_hides_later_events(api_client, user):
    session = _session(user, state={"a": 0})
    _append(session, invocation_id="e-1", text="one", state_delta={"a": 1})
    _append(session, invocation_id="e-2", text="two", state_delta={"a": 2, "b": 1})
    _append(session, invocation_id="e-3", text="three", state_delta={"c": 1})
    url = f"/api/sessions/{session.id}/"

    response = api_client.post(url + "rewind/", {"invocation_id": "e-2"}, format="json")

    assert response.status_code == 201
    rewind = response.json()
    assert rewind["sequence"] == 4
    assert rewind["rewound"] is False
    assert rewind["actions"]["rewind_before_invocation_id"] == "e-2"
    assert rewind["actions"]["state_delta"] == {"a": 1, "b": None, "c": None}
    assert api_client.get(url + "state/").json()["session"] == {"a": 1}
    history = api_client.get(url + "events/").json()["results"]
    assert [event["sequence"] for event in history] == [1, 4]
    everything = api_client.get(url + "events/", {"include_rewound": "true"}).json()["results"]
    assert [(event["sequence"], event["rewound"]) for event in everything] == [
        (1, False),
        (2, True),
        (3, True),
        (4, False),
    ]
    detail = api_client.get(url).json()
    assert [event["sequence"] for event in detail["events"]] == [1, 4]


@pytest.mark.parametrize(
    ("body", "status", "complaint"),
    [
        ({"invocation_id": "e-unknown"}, 404, "No invocation 'e-unknown'"),
        ({}, 400, "invocation_id"),
        ({"invocation_id": "i" * 200}, 400, "invocation_id"),
        ({"invocation_id": "e-1\u0000"}, 400, "NUL"),
        ({"invocation_id": 1}, 400, "Not a valid string"),
    ],
)
def test_rewind_refuses_bad_input_and_writes_nothing(api_client, user, body, status, complaint):
    session = _session(user)
    _append(session, invocation_id="e-1", state_delta={"a": 1})
    before = _row_counts()

    response = api_client.post(f"/api/sessions/{session.id}/rewind/", body, format="json")

    assert response.status_code == status
    assert complaint in response.content.decode()
    assert _row_counts() == before
    assert not EventRecord.objects.filter(rewound=True).exists()


# --- Access control -----------------------------------------------------------------

ENDPOINTS = [
    ("get", "", None),
    ("get", "events/", None),
    ("get", "state/", None),
    ("post", "events/", {"author": "user", "actions": {"state_delta": {"note": "overwritten"}}}),
    ("post", "rewind/", {"invocation_id": "e-secret"}),
    ("delete", "", None),
]


@pytest.mark.parametrize(("method", "suffix", "body"), ENDPOINTS)
def test_another_users_session_is_404_on_every_endpoint(
    api_client, secret_session, method, suffix, body
):
    before = _row_counts()
    url = f"/api/sessions/{secret_session.id}/{suffix}"

    response = getattr(api_client, method)(url, body, format="json")

    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}
    assert SECRET not in response.content.decode()
    assert _row_counts() == before
    assert not EventRecord.objects.filter(rewound=True).exists()
    assert (
        SessionState.objects.get(session__session_id=secret_session.id, key="note").value == SECRET
    )


def test_another_users_sessions_are_not_listed(api_client, secret_session):
    response = api_client.get("/api/sessions/")

    assert response.status_code == 200
    assert response.json() == {"results": [], "next_page_token": None}


def test_owner_reaches_the_session_others_cannot(other_client, secret_session):
    response = other_client.get(f"/api/sessions/{secret_session.id}/")

    assert response.status_code == 200
    assert response.json()["state"] == {"note": SECRET}


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [("get", "/api/sessions/", None), ("post", "/api/sessions/", {"state": {"a": 1}})]
    + [
        (method, f"/api/sessions/their-session/{suffix}", body)
        for method, suffix, body in ENDPOINTS
    ],
)
def test_anonymous_requests_are_refused(secret_session, method, url, body):
    before = _row_counts()

    response = getattr(APIClient(), method)(url, body, format="json")

    assert response.status_code in (401, 403)
    assert SECRET not in response.content.decode()
    assert _row_counts() == before


def test_session_signed_in_browser_needs_the_csrf_token_to_write(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    refused = client.post("/api/sessions/", json.dumps({}), content_type="application/json")
    listed = client.get("/api/sessions/")

    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    assert listed.status_code == 200
    assert not SessionRecord.objects.exists()


def test_ids_in_use_by_another_user_cannot_be_taken_over(
    api_client, user, other_user, secret_session
):
    response = api_client.post(
        "/api/sessions/", {"session_id": secret_session.id, "state": {"x": 1}}, format="json"
    )

    assert response.status_code == 201
    assert response.json()["id"] == secret_session.id
    assert SECRET not in response.content.decode()
    theirs = SessionRecord.objects.get(session_id=secret_session.id, user=other_user)
    assert SessionState.objects.get(session=theirs, key="note").value == SECRET
    assert api_client.get(f"/api/sessions/{secret_session.id}/events/").json()["results"] == []


def test_a_temporary_chat_is_created_and_listed_as_such(api_client, user):
    created = api_client.post("/api/sessions/", {"temporary": True}, format="json").json()
    plain = api_client.post("/api/sessions/", {}, format="json").json()

    assert created["temporary"] is True
    assert plain["temporary"] is False
    assert SessionRecord.objects.get(session_id=created["id"]).temporary is True
    listed = {
        item["id"]: item["temporary"] for item in api_client.get("/api/sessions/").json()["results"]
    }
    assert listed == {created["id"]: True, plain["id"]: False}
    assert api_client.get(f"/api/sessions/{created['id']}/").json()["temporary"] is True
