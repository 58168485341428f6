"""The access REST API: owner-only grants and audit log, answers matching the OpenAPI schema."""

import base64
import json
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from openapi_schema_validator import OAS31Validator
from rest_framework.test import APIClient

from access_app import services
from access_app.models import AccessGrant
from access_app.selectors import staff_may_view_user_data
from tests.factories import AccessGrantFactory, StaffFactory, UserFactory

GRANTS = "access_api:grant-list"
AUDIT = "access_api:audit-list"


@pytest.mark.django_db
def test_anonymous_gets_403_everywhere(user):
    grant = AccessGrantFactory(owner=user)
    client = APIClient()
    assert client.get(reverse(GRANTS)).status_code == 403
    assert client.get(reverse(AUDIT)).status_code == 403
    assert client.post(reverse(GRANTS), {}, format="json").status_code == 403
    assert client.post(reverse("access_api:grant-revoke", args=[grant.pk])).status_code == 403


@pytest.mark.django_db
def test_create_list_and_revoke_a_grant(api_client, user, staff):
    expires_at = timezone.now() + timedelta(days=2)
    response = api_client.post(
        reverse(GRANTS),
        {"grantee": staff.username, "scope": "memories", "expires_at": expires_at.isoformat()},
        format="json",
    )
    assert response.status_code == 201, response.content
    created = response.json()
    assert (created["grantee"], created["scope"], created["active"]) == (
        staff.username,
        "memories",
        True,
    )
    listed = api_client.get(reverse(GRANTS)).json()
    assert [grant["id"] for grant in listed["results"]] == [created["id"]]
    revoked = api_client.post(reverse("access_api:grant-revoke", args=[created["id"]])).json()
    assert revoked["active"] is False
    assert revoked["revoked_at"] is not None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"grantee": "STAFF", "expires_at": "-1"}, "expires_at"),
        ({"grantee": "STAFF", "expires_at": "yesterday"}, "expires_at"),
        ({"grantee": "STAFF", "scope": "all", "expires_at": "+1"}, "scope"),
        ({"expires_at": "+1"}, "grantee"),
    ],
)
def test_bad_grants_answer_400_with_the_field(api_client, staff, body, field):
    data = dict(body)
    if data.get("grantee") == "STAFF":
        data["grantee"] = staff.username
    if data["expires_at"][0] in "+-":
        data["expires_at"] = (timezone.now() + timedelta(days=int(data["expires_at"]))).isoformat()
    response = api_client.post(reverse(GRANTS), data, format="json")
    assert response.status_code == 400
    assert field in response.json()
    assert not AccessGrant.objects.exists()


@pytest.mark.django_db
def test_a_grant_to_an_unknown_account_answers_404_and_writes_nothing(api_client, staff):
    """The grantee is valid by the schema (a user name) and names no account, as an
    unknown id names no object (found by schemathesis' positive_data_acceptance)."""
    expires_at = (timezone.now() + timedelta(days=1)).isoformat()

    response = api_client.post(
        reverse(GRANTS), {"grantee": "nobody", "expires_at": expires_at}, format="json"
    )

    assert response.status_code == 404
    assert response.json() == {"detail": "No account has this username."}
    assert not AccessGrant.objects.exists()


@pytest.mark.django_db
def test_a_grant_answers_alike_whether_or_not_the_account_is_active_staff(api_client, user):
    """Any user could once learn who is staff from a grant's 404 against its 201."""
    expires_at = (timezone.now() + timedelta(days=1)).isoformat()
    accounts = {
        "staff": StaffFactory(),
        "plain user": UserFactory(),
        "inactive staff": StaffFactory(is_active=False),
    }

    answers = {
        kind: api_client.post(
            reverse(GRANTS),
            {"grantee": account.username, "scope": "memories", "expires_at": expires_at},
            format="json",
        )
        for kind, account in accounts.items()
    }

    shapes = {
        kind: (answer.status_code, tuple(sorted(answer.json())), answer.json()["active"])
        for kind, answer in answers.items()
    }
    assert set(shapes.values()) == {(201, tuple(sorted(answers["staff"].json())), True)}
    reaches = {
        kind: staff_may_view_user_data(staff=account, subject_user_pk=user.pk, scope="memories")
        for kind, account in accounts.items()
    }
    assert reaches == {"staff": True, "plain user": False, "inactive staff": False}


@pytest.mark.django_db
def test_a_grantee_must_be_a_json_string(api_client, staff):
    """Found by the REST fuzz: a number was taken for the username the schema types as a
    string (here it would have granted access to the staff account named "42")."""
    staff.username = "42"
    staff.save(update_fields=["username"])
    expires_at = (timezone.now() + timedelta(days=1)).isoformat()

    response = api_client.post(
        reverse(GRANTS), {"grantee": 42, "expires_at": expires_at}, format="json"
    )

    assert response.status_code == 400
    assert "grantee" in response.json()
    assert not AccessGrant.objects.exists()


@pytest.mark.django_db
def test_malformed_json_is_a_clear_400(api_client):
    response = api_client.post(reverse(GRANTS), "{not json", content_type="application/json")
    assert response.status_code == 400
    assert "JSON parse error" in response.json()["detail"]


@pytest.mark.django_db
def test_another_users_grants_and_audit_entries_stay_hidden(api_client, user, other_user, staff):
    theirs = AccessGrantFactory(owner=other_user, grantee=staff)
    services.audit_record(
        actor=staff, subject_user_pk=other_user.pk, action="view", object_type="memory_app.memory"
    )
    assert api_client.get(reverse(GRANTS)).json()["results"] == []
    assert api_client.get(reverse(AUDIT)).json()["results"] == []
    response = api_client.post(reverse("access_api:grant-revoke", args=[theirs.pk]))
    assert response.status_code == 404
    assert response.json() == {"detail": "Not found."}
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


@pytest.mark.django_db
def test_audit_log_lists_staff_access_newest_first(api_client, user, staff):
    first = services.audit_record(
        actor=staff,
        subject_user_pk=user.pk,
        action="view",
        object_type="memory_app.memory",
        object_id="a",
        reason="ticket 1",
    )
    second = services.audit_record(
        actor=staff,
        subject_user_pk=user.pk,
        action="delete",
        object_type="memory_app.memory",
        object_id="a",
        reason="ticket 1",
    )
    results = api_client.get(reverse(AUDIT)).json()["results"]
    assert [entry["id"] for entry in results] == [second.pk, first.pk]
    assert results[0] | {"created_at": None} == {
        "id": second.pk,
        "actor": staff.username,
        "action": "delete",
        "object_type": "memory_app.memory",
        "object_id": "a",
        "reason": "ticket 1",
        "created_at": None,
    }


@pytest.mark.django_db
@pytest.mark.parametrize("route", [AUDIT, GRANTS])
@pytest.mark.parametrize(
    "position",
    ["notadate", "9999-99-99", "\x00", "2026-01-01T00:00:00\x00"],
)
def test_a_cursor_with_a_position_that_is_no_date_is_404(api_client, route, position):
    """A well-formed cursor (base64 of ``p=<position>``) whose position is not a date, or
    holds a NUL, is refused like any bad cursor, not a 500 from the database."""
    cursor = base64.b64encode(urlencode({"p": position}).encode()).decode()

    response = api_client.get(reverse(route), {"cursor": cursor})

    assert response.status_code == 404
    assert response.json()["detail"] == "Invalid cursor"


@pytest.mark.django_db
@pytest.mark.parametrize("route", [AUDIT, GRANTS])
def test_a_bad_cursor_is_404(api_client, route):
    assert api_client.get(reverse(route), {"cursor": "garbage"}).status_code == 404


@pytest.fixture(scope="module")
def spec(tmp_path_factory, django_db_blocker):
    path = tmp_path_factory.mktemp("schema") / "openapi.json"
    with django_db_blocker.unblock():
        call_command(
            "spectacular",
            "--validate",
            "--fail-on-warn",
            "--format",
            "openapi-json",
            "--file",
            path,
        )
    return json.loads(path.read_text())


def _matches(spec, path, method, response) -> list[str]:
    media = spec["paths"][path][method]["responses"][str(response.status_code)]["content"]
    schema = {**media["application/json"]["schema"], "components": spec["components"]}
    return [error.message for error in OAS31Validator(schema).iter_errors(response.json())]


@pytest.mark.django_db
def test_schema_documents_the_access_operations_and_answers_match_it(spec, api_client, user):
    operations = {
        (method, path): operation["operationId"]
        for path, methods in spec["paths"].items()
        if path.startswith("/api/access/")
        for method, operation in methods.items()
    }
    assert operations == {
        ("get", "/api/access/grants/"): "access_grants_list",
        ("post", "/api/access/grants/"): "access_grants_create",
        ("post", "/api/access/grants/{grant_id}/revoke/"): "access_grants_revoke",
        ("get", "/api/access/audit/"): "access_audit_list",
    }
    staff = StaffFactory()
    created = api_client.post(
        reverse(GRANTS),
        {"grantee": staff.username, "expires_at": (timezone.now() + timedelta(days=1)).isoformat()},
        format="json",
    )
    services.audit_record(
        actor=staff, subject_user_pk=user.pk, action="view", object_type="memory_app.memory"
    )
    revoke = "/api/access/grants/{grant_id}/revoke/"
    checks = [
        (created, "/api/access/grants/", "post"),
        (api_client.get(reverse(GRANTS)), "/api/access/grants/", "get"),
        (api_client.get(reverse(AUDIT)), "/api/access/audit/", "get"),
        (
            api_client.post(reverse("access_api:grant-revoke", args=[created.json()["id"]])),
            revoke,
            "post",
        ),
        (api_client.post(reverse("access_api:grant-revoke", args=[999999])), revoke, "post"),
    ]
    assert [response.status_code for response, _, _ in checks] == [201, 200, 200, 200, 404]
    for response, path, method in checks:
        assert _matches(spec, path, method, response) == [], (path, method)
