"""Session ids are unique within an (app, user) only: the same id held by two end users in two
apps is four conversations, none of which another can see, reserve or learn of."""

import pytest

from sessions_app.models import SessionRecord
from tests.agents_app.test_service_api import Api, key_for, said

pytestmark = pytest.mark.django_db

SESSION_ID = "first-chat"


@pytest.fixture
def apis() -> dict[str, Api]:
    return {app: Api(key_for(app), app) for app in ("shop", "travel")}


def _create(api: Api, user: str):
    return api.post(f"users/{user}/sessions/", {"session_id": SESSION_ID, "state": {"who": user}})


def test_the_same_id_for_two_users_in_two_apps_is_four_separate_conversations(apis):
    for app, api in apis.items():
        for user in ("ana", "ben"):
            created = _create(api, user)
            assert created.status_code == 201 and created.json()["id"] == SESSION_ID
            appended = api.post(
                f"users/{user}/sessions/{SESSION_ID}/events/", said(f"{app} {user}")
            )
            assert appended.status_code == 201

    for app, api in apis.items():
        for user in ("ana", "ben"):
            body = api.get(f"users/{user}/sessions/{SESSION_ID}/").json()
            assert body["state"] == {"who": user}
            texts = [e["content"]["parts"][0]["text"] for e in body["events"]]
            assert texts == [f"{app} {user}"]
    assert SessionRecord.objects.filter(session_id=SESSION_ID).count() == 4


def test_an_id_the_user_has_in_the_app_is_a_conflict_and_writes_nothing(apis):
    api = apis["shop"]
    assert _create(api, "ana").status_code == 201

    again = _create(api, "ana")

    assert again.status_code == 409
    assert "already exists" in again.json()["detail"]
    assert SessionRecord.objects.filter(session_id=SESSION_ID).count() == 1


def test_another_users_or_apps_session_is_unknown_and_leaves_no_trace(apis):
    shop, travel = apis["shop"], apis["travel"]
    assert _create(shop, "ana").status_code == 201
    shop.post(f"users/ana/sessions/{SESSION_ID}/events/", said("my card ends 4242"))

    for api, user in ((shop, "ben"), (travel, "ana")):
        answer = api.get(f"users/{user}/sessions/{SESSION_ID}/")
        assert answer.status_code == 404 and "4242" not in answer.content.decode()
        appended = api.post(f"users/{user}/sessions/{SESSION_ID}/events/", said("hello"))
        assert appended.status_code == 404
        listed = api.get(f"users/{user}/sessions/")
        assert listed.status_code in (200, 404) and "4242" not in listed.content.decode()
        assert api.delete(f"users/{user}/sessions/{SESSION_ID}/").status_code in (204, 404)

    kept = shop.get(f"users/ana/sessions/{SESSION_ID}/").json()
    assert [e["content"]["parts"][0]["text"] for e in kept["events"]] == ["my card ends 4242"]


def test_a_wrong_app_names_the_app_and_says_it_is_the_app(apis):
    answer = apis["shop"].client.get("/api/v1/apps/no-such-app/users/ana/sessions/first-chat/")

    assert answer.status_code == 404
    assert answer.json()["code"] == "app_not_found"
    assert "no-such-app" in answer.json()["detail"]
