"""Error pages: the site's own 404, 403 and 500 pages for people, JSON for the API."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import path

from chatapp.urls import handler404, handler500
from chatapp.urls import urlpatterns as site_urlpatterns


def _fail(request):
    raise RuntimeError("a bug in a view")


# A URL configuration with the site's routes and handlers plus views that fail.
urlpatterns = [*site_urlpatterns, path("fails/", _fail), path("api/fails/", _fail)]
__all__ = ["handler404", "handler500", "urlpatterns"]


def site_page(response) -> str:
    """The page's HTML, after checking it is one of the site's pages (header, stylesheet)."""
    html = response.content.decode()
    assert response["Content-Type"].startswith("text/html")
    assert 'class="site-header"' in html
    assert "/static/css/app.css" in html
    assert "Skip to main content" in html
    return html


@pytest.mark.django_db
def test_a_deleted_chat_answers_the_site_404_page(client, user):
    client.force_login(user)

    response = client.get("/chat/no-such-chat/")

    assert response.status_code == 404
    html = site_page(response)
    assert "We couldn\u2019t find that page" in html
    assert 'href="/"' in html
    assert "URLconf" not in html
    # Signed in: the navigation is the signed-in one.
    assert user.username in html
    assert "Sign out" in html


@pytest.mark.django_db
def test_an_unknown_page_answers_the_site_404_page_when_signed_out(client):
    response = client.get("/chat/")

    assert response.status_code == 404
    html = site_page(response)
    assert "We couldn\u2019t find that page" in html
    assert "Sign in" in html


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_a_failing_page_answers_the_site_500_page_naming_no_one(user):
    client = Client(raise_request_exception=False)
    client.force_login(user)

    response = client.get("/fails/")

    assert response.status_code == 500
    html = site_page(response)
    assert "Something went wrong on our side" in html
    assert "a bug in a view" not in html
    assert user.username not in html
    assert "Traceback" not in html


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_a_failing_api_call_answers_json_500(user):
    client = Client(raise_request_exception=False)
    client.force_login(user)

    response = client.get("/api/fails/")

    assert response.status_code == 500
    assert response["Content-Type"] == "application/json"
    assert response.json() == {
        "detail": "Something went wrong on our side. Please try again.",
        "code": "server_error",
    }


@pytest.mark.django_db
def test_a_form_sent_without_its_csrf_token_answers_the_site_403_page(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    response = client.post("/settings/", {"create_enabled": "on"})

    assert response.status_code == 403
    html = site_page(response)
    assert "That form could not be sent" in html
    assert "CSRF verification failed" not in html
