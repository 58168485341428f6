"""Session titles in the REST API: listed, shown, and renamed with PATCH."""

import pytest

from sessions_app import services

APP = "chat"


def _session(user, session_id=None):
    return services.session_create(app_name=APP, user_id=str(user.pk), session_id=session_id)


def test_rename_answers_the_stored_title_and_keeps_the_list_order(api_client, user):
    older = _session(user, "older")
    _session(user, "newer")

    response = api_client.patch(
        f"/api/sessions/{older.id}/", {"title": "  Trip   plans "}, format="json"
    )

    assert response.status_code == 200
    assert response.json()["title"] == "Trip plans"
    listed = api_client.get("/api/sessions/").json()["results"]
    assert [(item["id"], item["title"]) for item in listed] == [
        ("newer", ""),
        ("older", "Trip plans"),
    ]
    assert api_client.get("/api/sessions/older/").json()["title"] == "Trip plans"


def test_an_empty_title_clears_it(api_client, user):
    session = _session(user)
    api_client.patch(f"/api/sessions/{session.id}/", {"title": "Named"}, format="json")

    response = api_client.patch(f"/api/sessions/{session.id}/", {"title": " "}, format="json")

    assert response.status_code == 200
    assert response.json()["title"] == ""


@pytest.mark.parametrize(
    "body",
    [{}, {"title": None}, {"title": ["x"]}, {"title": "x" * 201}],
    ids=["missing", "null", "list", "too-long"],
)
def test_a_bad_title_is_refused_and_nothing_changes(api_client, user, body):
    session = _session(user)
    api_client.patch(f"/api/sessions/{session.id}/", {"title": "Kept"}, format="json")

    response = api_client.patch(f"/api/sessions/{session.id}/", body, format="json")

    assert response.status_code == 400
    assert "title" in response.json()
    assert api_client.get(f"/api/sessions/{session.id}/").json()["title"] == "Kept"


def test_another_users_session_cannot_be_renamed(api_client, other_user):
    theirs = _session(other_user, "theirs")
    services.session_rename(user_pk=other_user.pk, session_id=theirs.id, title="Private")

    response = api_client.patch("/api/sessions/theirs/", {"title": "Mine now"}, format="json")

    assert response.status_code == 404
    assert "Private" not in response.content.decode()
    assert api_client.patch("/api/sessions/nope/", {"title": "x"}, format="json").status_code == 404


def test_a_new_session_has_an_empty_title(api_client):
    assert api_client.post("/api/sessions/", {}, format="json").json()["title"] == ""
