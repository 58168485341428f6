"""A database outage answers 503 with a clear message (DatabaseUnavailableMiddleware).

The outage itself is played by the selector the view calls raising what psycopg raises when
the server is down; tests/multiprocess/test_faults.py stops a real PostgreSQL.
"""

import pytest
from django.db import IntegrityError, OperationalError
from django.test import Client

from sessions_app import selectors

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
