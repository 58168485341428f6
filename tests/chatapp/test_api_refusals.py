"""What the API refuses on purpose, it refuses, and its schema says so.

Each case is a request the types of the schema allow but the API refuses by design (a NUL
character, a page out of range, an unknown grantee or invocation, an empty author ...): the
answer must be the 4xx the schema documents for the operation, with a message a person can act
on, and the schema's description of that answer must name the refusal. What names something
that does not exist (a page, an invocation, a grantee) answers 404, as an unknown id does: a
request that is valid by the schema's types is never refused with a 400 for it. So a client learns
from ``/api/schema/`` what will be refused, and a refusal the schema does not state fails here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from django.utils import timezone

from sessions_app import services
from sessions_app.events import Event
from tests.factories import MemoryFactory, StaffFactory

pytestmark = pytest.mark.django_db

SESSION_ID = "refusals-session"
DEEP = "[" * 70 + "]" * 70


@dataclass(frozen=True)
class Refusal:
    method: str
    operation: str  # the path as the schema names it
    path: str  # the path requested ({memory_id} filled in by the test)
    body: object = None  # a dict is sent as JSON, a str as it is
    status: int = 400
    says: str = ""  # in the answer
    documented: str = ""  # in the schema's description of that answer
    content_type: str = "application/json"
    query: dict = field(default_factory=dict)


def _in_days(days: int) -> str:
    return (timezone.now() + timedelta(days=days)).isoformat()


REFUSALS = {
    "NUL in a body": Refusal(
        "post",
        "/api/sessions/",
        "/api/sessions/",
        {"state": {"note": "a\x00b"}},
        says="NUL",
        documented="NUL (`\\u0000`) character",
    ),
    "NUL in a query string": Refusal(
        "get",
        "/api/sessions/",
        "/api/sessions/",
        query={"page_token": "\x00"},
        says="Null characters are not allowed",
        documented="(in the body or the query string)",
    ),
    "a lone surrogate": Refusal(
        "patch",
        "/api/sessions/{session_id}/",
        f"/api/sessions/{SESSION_ID}/",
        '{"title": "a\\ud800"}',
        says="lone surrogate",
        documented="lone surrogate",
    ),
    "JSON nested too deep": Refusal(
        "post",
        "/api/sessions/{session_id}/events/",
        f"/api/sessions/{SESSION_ID}/events/",
        '{"author": "user", "custom_metadata": {"x": ' + DEEP + "}}",
        says="64 levels",
        documented="nested more than 64 levels deep",
    ),
    "a page token not issued": Refusal(
        "get",
        "/api/sessions/",
        "/api/sessions/",
        query={"page_token": "bm90IGEgdG9rZW4"},
        status=404,
        says="not one this service issued",
        documented="A `page_token` this service did not issue",
    ),
    "a page past the last": Refusal(
        "get",
        "/api/memories/",
        "/api/memories/",
        query={"page": "99"},
        status=404,
        says="There are 1 pages",
        documented="A `page` past the last page",
    ),
    "app state from an end user": Refusal(
        "post",
        "/api/sessions/",
        "/api/sessions/",
        {"state": {"app:motd": "hello"}},
        says="'app:motd'",
        documented="`app:` keys in `state`",
    ),
    "an empty author": Refusal(
        "post",
        "/api/sessions/{session_id}/events/",
        f"/api/sessions/{SESSION_ID}/events/",
        {"author": "", "invocation_id": "e-1"},
        says="authored 'user'",
        documented="an `author` other than `user` (an empty one too)",
    ),
    "an assistant author": Refusal(
        "post",
        "/api/sessions/{session_id}/events/",
        f"/api/sessions/{SESSION_ID}/events/",
        {"author": "assistant", "invocation_id": "e-1"},
        says="got 'assistant'",
        documented="an `author` other than `user`",
    ),
    "an empty event id": Refusal(
        "post",
        "/api/sessions/{session_id}/events/",
        f"/api/sessions/{SESSION_ID}/events/",
        {"author": "user", "id": ""},
        says="1-128 characters",
        documented="an empty `id`",
    ),
    "a repeated long-running tool id": Refusal(
        "post",
        "/api/sessions/{session_id}/events/",
        f"/api/sessions/{SESSION_ID}/events/",
        {"author": "user", "long_running_tool_ids": ["call-1", "call-1"]},
        says="may appear once",
        documented="repeated in `long_running_tool_ids`",
    ),
    "a timestamp no date can hold": Refusal(
        "post",
        "/api/sessions/{session_id}/events/",
        f"/api/sessions/{SESSION_ID}/events/",
        {"author": "user", "timestamp": 1e300},
        says="within years 1-9999",
        documented="a `timestamp` outside years 1-9999",
    ),
    "an unknown invocation": Refusal(
        "post",
        "/api/sessions/{session_id}/rewind/",
        f"/api/sessions/{SESSION_ID}/rewind/",
        {"invocation_id": "never-ran"},
        status=404,
        says="No invocation 'never-ran'",
        documented="session holds no event of the `invocation_id`",
    ),
    "an empty correction": Refusal(
        "post",
        "/api/memories/{memory_id}/correct/",
        "/api/memories/{memory_id}/correct/",
        {"text": ""},
        says="may not be blank",
        documented="an empty `text`",
    ),
    "an unknown grantee": Refusal(
        "post",
        "/api/access/grants/",
        "/api/access/grants/",
        {"grantee": "nobody-here", "expires_at": _in_days(7)},
        status=404,
        says="No account has this username",
        documented="No account has the `grantee`'s user name",
    ),
    "a grant for ever": Refusal(
        "post",
        "/api/access/grants/",
        "/api/access/grants/",
        {"grantee": "staffer", "expires_at": "9999-12-31T00:00:00Z"},
        says="at most 90 days",
        documented="more than 90 days ahead",
    ),
    "a grant nested too deep": Refusal(
        "post",
        "/api/access/grants/",
        "/api/access/grants/",
        '{"grantee": ' + DEEP + "}",
        says="64 levels",
        documented="nested more than 64 levels deep",
    ),
    "a grant as a form": Refusal(
        "post",
        "/api/access/grants/",
        "/api/access/grants/",
        "grantee=staffer",
        status=415,
        says="Unsupported media type",
        documented="not JSON",
        content_type="application/x-www-form-urlencoded",
    ),
    "a crafted cursor": Refusal(
        "get",
        "/api/access/audit/",
        "/api/access/audit/",
        query={"cursor": "cD05OTk5LTk5LTk5"},
        status=404,
        says="Invalid cursor",
        documented="cursor is invalid",
    ),
}


@pytest.fixture
def schema(api_client) -> dict:
    """The schema as the app serves it."""
    return api_client.get("/api/schema/", {"format": "json"}).json()


@pytest.fixture
def memory_id(user) -> str:
    StaffFactory(username="staffer")
    session = services.session_create(app_name="chat", user_id=str(user.pk), session_id=SESSION_ID)
    services.event_append(session=session, event=Event(invocation_id="inv-1", author="user"))
    return str(MemoryFactory(user=user, text="Prefers green tea.").id)


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_a_refusal_on_purpose_is_answered_and_documented(name, api_client, schema, memory_id):
    refusal = REFUSALS[name]
    path = refusal.path.format(memory_id=memory_id)
    if refusal.query:
        response = getattr(api_client, refusal.method)(path, refusal.query)
    else:
        body = refusal.body if isinstance(refusal.body, str) else json.dumps(refusal.body)
        response = getattr(api_client, refusal.method)(
            path, data=body, content_type=refusal.content_type
        )

    assert response.status_code == refusal.status, response.content
    assert refusal.says in response.content.decode("unicode_escape")
    documented = schema["paths"][refusal.operation][refusal.method]["responses"]
    assert str(refusal.status) in documented
    assert refusal.documented in documented[str(refusal.status)]["description"]


def test_every_documented_400_names_what_every_operation_refuses(schema):
    descriptions = [
        (f"{method.upper()} {path}", operation["responses"]["400"]["description"])
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if "400" in operation["responses"]
    ]

    assert len(descriptions) > 20
    assert [name for name, text in descriptions if "NUL (`\\u0000`)" not in text] == []
    assert [name for name, text in descriptions if "nested more than 64" not in text] == []


def _request_schema(schema: dict, path: str, method: str, media: str = "application/json"):
    body = schema["paths"][path][method]["requestBody"]["content"][media]["schema"]
    if "$ref" in body:
        return schema["components"]["schemas"][body["$ref"].rsplit("/", 1)[1]]
    return body


def test_what_the_api_refuses_of_a_field_the_schema_types_refuse_too(schema):
    """Found by schemathesis' positive_data_acceptance: each of these was valid by the schema
    and answered 400."""
    event = _request_schema(schema, "/api/sessions/{session_id}/events/", "post")
    author = event["properties"]["author"]
    enum = (
        author.get("enum")
        or schema["components"]["schemas"][author["allOf"][0]["$ref"].rsplit("/", 1)[1]]["enum"]
    )
    upload = _request_schema(
        schema, "/api/sessions/{session_id}/artifacts/", "post", "multipart/form-data"
    )
    correction = _request_schema(schema, "/api/v1/apps/{app_name}/memories/{memory_id}/", "patch")

    created = _request_schema(schema, "/api/sessions/", "post")
    created_by_key = _request_schema(
        schema, "/api/v1/apps/{app_name}/users/{user_id}/sessions/", "post"
    )
    remembered = _request_schema(
        schema, "/api/v1/apps/{app_name}/users/{user_id}/memory/events/", "post"
    )
    actions = schema["components"]["schemas"]["EventActions"]

    assert enum == ["user"]
    assert {"type": "boolean", "enum": [False]} in event["properties"]["partial"]["anyOf"]
    assert upload["properties"]["file"]["minItems"] == 1
    assert correction["minProperties"] == 1
    assert schema["paths"]["/api/v1/apps/{app_name}/memories/{memory_id}/"]["patch"]["requestBody"][
        "required"
    ]
    assert remembered["properties"]["events"]["minItems"] == 1
    for state in (
        created["properties"]["state"],
        created_by_key["properties"]["state"],
        actions["properties"]["state_delta"],
    ):
        assert state["propertyNames"]["minLength"] == 1


def test_an_upload_without_a_file_and_an_empty_author_are_refused(api_client, memory_id):
    upload = api_client.post(f"/api/sessions/{SESSION_ID}/artifacts/", {}, format="multipart")
    partial = api_client.post(
        f"/api/sessions/{SESSION_ID}/events/",
        {"author": "user", "partial": True},
        format="json",
    )

    assert upload.status_code == 400
    assert partial.status_code == 400
