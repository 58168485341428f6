"""A database outage answers 503 with a clear message (DatabaseUnavailableMiddleware), and text
no store can hold is refused at the edge (UnstorableTextMiddleware).

The outage itself is played by the selector the view calls raising what psycopg raises when
the server is down; tests/multiprocess/test_faults.py stops a real PostgreSQL. A NUL character
(``%00``) in a path answers 404 as an unknown id does, in a query string or a form 400, on every
door, before any view or the database reads it (PostgreSQL answered a DataError, a 500).
"""

import re

import pytest
from django.db import IntegrityError, OperationalError
from django.test import Client

from agents_app.services import app_ensure, end_user_ensure, service_account_create
from chatapp.routing import websocket_urlpatterns
from memory_app.selectors import user_profile
from sessions_app import selectors, services
from tests.access_app.test_acl_matrix import ALL_ROUTES, _routes
from tests.chatapp.test_csrf import _admin_urls, _page_urls, _post_forms
from tests.factories import UserFactory
from tests.hostile_text import hostile_form_bodies

REFUSED = OperationalError('connection to server at "127.0.0.1", port 5432 failed: refused')


@pytest.fixture
def signed_in(user):
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _database_down(monkeypatch, error=REFUSED):
    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(selectors, "session_list", fail)
    monkeypatch.setattr(selectors, "session_record_get", fail)


def test_the_api_answers_503_with_a_json_error(signed_in, monkeypatch):
    _database_down(monkeypatch)

    response = signed_in.get("/api/sessions/")

    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert response.json() == {
        "detail": "The database is unavailable right now; try again in a moment.",
        "code": "database_unavailable",
    }


def test_a_page_answers_503_with_a_short_page(signed_in, monkeypatch):
    _database_down(monkeypatch)

    response = signed_in.get("/chat/some-session/")

    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    assert b"The database is unavailable right now" in response.content
    assert b"Traceback" not in response.content


def test_other_database_errors_are_not_reported_as_an_outage(signed_in, monkeypatch):
    _database_down(monkeypatch, IntegrityError("duplicate key"))

    response = signed_in.get("/api/sessions/")

    assert response.status_code == 500


APP = "edge-app"
END_USER = "ada"


@pytest.fixture
def key_client(db) -> Client:
    app, _ = app_ensure(name=APP)
    end_user_ensure(app=app, external_id=END_USER)
    issued = service_account_create(app=app, name="edge-bot")
    return Client(HTTP_AUTHORIZATION=f"Bearer {issued.key}")


@pytest.fixture
def superuser_client(db) -> Client:
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


SESSIONS = f"/api/v1/apps/{APP}/users/{END_USER}/sessions"


def test_every_text_id_of_a_route_is_an_id():
    """Every route of the project, HTTP and WebSocket, names its text ids ``<id:...>``
    (core.converters), which matches no NUL character or lone surrogate; only Django's admin
    keeps its own ``<path:...>`` ids, which UnstorableTextMiddleware guards."""
    routes = ALL_ROUTES + _routes(websocket_urlpatterns)

    assert [route for route in routes if re.search(r"<(str|slug|path):", route)] == [
        route for route in routes if route.startswith("admin/") and "<path:" in route
    ]


@pytest.mark.parametrize("path", ["/api/v1/apps/%00/state/", "/api/v1/apps/a%00b/state/"])
def test_a_nul_in_an_app_name_without_credentials_is_an_unknown_path(db, client, path):
    response = client.get(path)

    assert response.status_code == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", f"{SESSIONS}/%00/"),
        ("delete", f"{SESSIONS}/%00/"),
        ("post", f"{SESSIONS}/%00/events/"),
        ("post", f"{SESSIONS}/%00/rewind/"),
        ("get", f"/api/v1/apps/{APP}/users/a%00/sessions/"),
    ],
)
def test_a_nul_in_a_service_path_id_is_an_unknown_id(key_client, method, path):
    response = getattr(key_client, method)(
        path, data={"author": "user", "invocation_id": "i"}, content_type="application/json"
    )

    assert response.status_code == 404
    assert response.json()["detail"]


@pytest.mark.parametrize(
    "path", ["/api/memory-pending/%00/", "/chat/%00/", "/api/sessions/%00/", "/memory/%00/delete/"]
)
def test_a_nul_in_a_signed_in_path_is_an_unknown_id(signed_in, path):
    response = signed_in.get(path)

    assert response.status_code == 404


def test_a_nul_in_a_profile_key_changes_nothing(signed_in, user):
    services.session_create(app_name="chat", user_id=str(user.pk), state={"user:name": "Ada"})

    response = signed_in.post(
        "/memory/profile/",
        "key=a%00b&action=correct&value=x",
        content_type="application/x-www-form-urlencoded",
    )

    assert response.status_code == 400
    assert user_profile(app_name="chat", user_pk=user.pk) == [("name", "Ada")]


@pytest.mark.parametrize(
    "path",
    [
        "/admin/sessions_app/sessionrecord/%00/change/",
        "/admin/memory_app/memory/?status=%00",
        "/admin/memory_app/memory/?q=%00",
    ],
)
def test_a_nul_in_the_staff_console_is_refused(superuser_client, path):
    response = superuser_client.get(path)

    assert response.status_code in (400, 404)


def test_a_nul_in_a_query_string_is_refused_with_a_reason(signed_in):
    response = signed_in.get("/api/sessions/?page_token=%00", HTTP_ACCEPT="application/json")

    assert response.status_code == 400
    assert "NUL" in response.json()["detail"]


FIELD_NAME = re.compile(r'<(?:input|textarea|select)\b[^>]*\bname="([^"]+)"', re.IGNORECASE)


@pytest.mark.django_db
def test_every_form_refuses_a_nul_in_every_encoding_without_a_500(staff_user_with_data):
    """Every POST form of the site and the staff console (walked as the CSRF test walks them),
    sent a NUL in each encoding of ``hostile_form_bodies``: a multipart one was read by the
    view and could reach PostgreSQL (a 500)."""
    user, values = staff_user_with_data
    browser = Client()
    browser.force_login(user)
    forms: dict[str, list[str]] = {}
    for url in _page_urls(values) + _admin_urls():
        response = browser.get(url, follow=True)
        if response.status_code != 200 or "text/html" not in response.get("Content-Type", ""):
            continue
        page_url = response.redirect_chain[-1][0] if response.redirect_chain else url
        for action, body in _post_forms(response.content.decode(), page_url):
            forms.setdefault(action, sorted(set(FIELD_NAME.findall(body))))
    forms["/accounts/login/"] = ["username", "password"]

    answers = {
        (action, label): browser.generic("POST", action, body, content_type=content_type)
        for action, names in sorted(forms.items())
        for label, content_type, body in hostile_form_bodies(names)
    }

    assert len(forms) >= 10
    assert {key: answer.status_code for key, answer in answers.items()} == dict.fromkeys(
        answers, 400
    )
