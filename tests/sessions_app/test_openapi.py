"""The OpenAPI schema of the sessions API is valid, warning-free and true to the API."""

import json
import re

import pytest
from django.core.management import call_command
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate

from sessions_app import services


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("schema") / "openapi.json"
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--format", "openapi-json", "--file", path
    )
    return json.loads(path.read_text())


def _schema_of(spec, path, method, status):
    media = spec["paths"][path][method]["responses"][str(status)]["content"]["application/json"]
    return {**media["schema"], "components": spec["components"]}


def _request_schema_of(spec, path, method):
    media = spec["paths"][path][method]["requestBody"]["content"]["application/json"]
    return {**media["schema"], "components": spec["components"]}


def _assert_matches(schema, body):
    errors = [error.message for error in OAS31Validator(schema).iter_errors(body)]
    assert errors == []


def test_schema_is_valid_openapi_3_1(spec):
    assert spec["openapi"] == "3.1.0"
    validate(spec)


def test_schema_documents_every_sessions_operation(spec):
    operations = {
        (method, path): operation["operationId"]
        for path, methods in spec["paths"].items()
        if path.startswith("/api/sessions/")
        for method, operation in methods.items()
    }

    assert operations == {
        ("get", "/api/sessions/"): "sessions_list",
        ("post", "/api/sessions/"): "sessions_create",
        ("get", "/api/sessions/{session_id}/"): "sessions_retrieve",
        ("patch", "/api/sessions/{session_id}/"): "sessions_partial_update",
        ("delete", "/api/sessions/{session_id}/"): "sessions_destroy",
        ("get", "/api/sessions/{session_id}/events/"): "sessions_events_list",
        ("post", "/api/sessions/{session_id}/events/"): "sessions_events_create",
        ("get", "/api/sessions/{session_id}/state/"): "sessions_state_retrieve",
        ("post", "/api/sessions/{session_id}/rewind/"): "sessions_rewind_create",
        ("get", "/api/sessions/{session_id}/artifacts/"): "sessions_artifacts_list",
        ("post", "/api/sessions/{session_id}/artifacts/"): "sessions_artifacts_upload",
    }
    session_id = next(
        parameter
        for parameter in spec["paths"]["/api/sessions/{session_id}/"]["get"]["parameters"]
        if parameter["name"] == "session_id"
    )
    assert session_id["schema"]["pattern"] == services.IDENTIFIER_PATTERN.pattern


def test_event_request_schema_is_the_event_model(spec):
    schema = _request_schema_of(spec, "/api/sessions/{session_id}/events/", "post")
    example = spec["paths"]["/api/sessions/{session_id}/events/"]["post"]["requestBody"]["content"][
        "application/json"
    ]["examples"]

    for item in example.values():
        _assert_matches(schema, item["value"])
    assert not OAS31Validator(schema).is_valid({"content": {"role": "user"}})
    assert not OAS31Validator(schema).is_valid({"author": "user", "unknown": 1})
    assert not OAS31Validator(schema).is_valid(
        {"author": "user", "content": {"parts": [{"text": 1}]}}
    )


def test_responses_match_the_schema(spec, api_client):
    created = api_client.post(
        "/api/sessions/", {"session_id": "s-1", "state": {"user:name": "Ada"}}, format="json"
    )
    appended = api_client.post(
        "/api/sessions/s-1/events/",
        {
            "author": "user",
            "invocation_id": "e-1",
            "content": {
                "role": "user",
                "parts": [
                    {"text": "Here is the answer."},
                ],
            },
            "actions": {"state_delta": {"city": "Paris"}},
            "usage_metadata": {"prompt_token_count": 12, "total_token_count": 20},
            "long_running_tool_ids": ["call-1"],
        },
        format="json",
    )
    rewound = api_client.post("/api/sessions/s-1/rewind/", {"invocation_id": "e-1"}, format="json")
    detail = "/api/sessions/{session_id}/"
    checks = [
        (created, "/api/sessions/", "post", 201),
        (appended, detail + "events/", "post", 201),
        (rewound, detail + "rewind/", "post", 201),
        (api_client.get("/api/sessions/"), "/api/sessions/", "get", 200),
        (api_client.get("/api/sessions/s-1/"), detail, "get", 200),
        (
            api_client.get("/api/sessions/s-1/events/", {"include_rewound": "true"}),
            detail + "events/",
            "get",
            200,
        ),
        (api_client.get("/api/sessions/s-1/state/"), detail + "state/", "get", 200),
        (
            api_client.patch("/api/sessions/s-1/", {"title": "Trip"}, format="json"),
            detail,
            "patch",
            200,
        ),
        (api_client.get("/api/sessions/nope/"), detail, "get", 404),
        (api_client.get("/api/sessions/", {"page_token": "x"}), "/api/sessions/", "get", 404),
        (
            api_client.post("/api/sessions/", {"session_id": "s-1"}, format="json"),
            "/api/sessions/",
            "post",
            409,
        ),
    ]

    for response, path, method, status in checks:
        assert response.status_code == status, (path, method, response.content)
        _assert_matches(_schema_of(spec, path, method, status), response.json())
    events = api_client.get("/api/sessions/s-1/events/", {"include_rewound": "true"}).json()
    assert [event["rewound"] for event in events["results"]] == [True, False]


def test_docs_page_renders_from_local_assets_only(client, user):
    client.force_login(user)

    response = client.get("/api/docs/")

    assert response.status_code == 200
    html = response.content.decode()
    assert '<div id="swagger-ui"></div>' in html
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert any("swagger-ui-bundle.js" in asset for asset in assets)
    assert all(asset.startswith(("/static/", "/api/docs/?script")) for asset in assets), assets
    assert "cdn" not in html.lower()
    assert "<script>" not in html, "no inline script: the Content-Security-Policy forbids it"
    script = client.get("/api/docs/?script=")
    assert 'url: "/api/schema/"' in script.content.decode()
    for asset in assets:
        assert client.get(asset).status_code == 200, asset
    assert client.get("/api/schema/").status_code == 200


def test_the_event_a_person_appends_is_refused_by_the_schema_as_by_the_api(spec):
    """What ``sessions_app.end_user`` refuses of a person's event, the request schema refuses:
    another role, a tool call or result, a turn's id, an ``app:`` key, an agent's action, a
    rewind, a timestamp past year 9999; an ordinary message passes."""
    schema = _request_schema_of(spec, "/api/sessions/{session_id}/events/", "post")
    message = {"author": "user", "content": {"role": "user", "parts": [{"text": "Hi"}]}}
    _assert_matches(schema, message)
    refused = [
        {**message, "content": {"role": "model", "parts": [{"text": "Hi"}]}},
        {**message, "content": {"parts": [{"function_call": {"name": "lookup"}}]}},
        {**message, "content": {"parts": [{"function_response": {"name": "load_memory"}}]}},
        {**message, "id": "msg-p1.1"},
        {**message, "id": "edit-p2"},
        {**message, "actions": {"state_delta": {"app:greeting": "hello"}}},
        {**message, "actions": {"transfer_to_agent": "billing"}},
        {**message, "actions": {"escalate": True}},
        {**message, "actions": {"rewind_before_invocation_id": "inv-1"}},
        {**message, "actions": {"not_an_action": 1}},
        {**message, "timestamp": 1e300},
    ]
    for body in refused:
        assert list(OAS31Validator(schema).iter_errors(body)), body


def test_an_upload_needs_its_body(spec):
    body = spec["paths"]["/api/sessions/{session_id}/artifacts/"]["post"]["requestBody"]
    assert body["required"] is True
