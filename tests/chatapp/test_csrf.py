"""CSRF on every form: every HTML page of the site (walked from the URL patterns, with the
admin walked from its registry) is rendered for a signed-in staff user with data in place;
each POST form must carry the CSRF token, and a POST to it without the token is refused.
The REST API's session-authenticated writes need the token too.

A new page whose URL takes a parameter this test cannot fill fails the walk, so a page
cannot be added without being covered.
"""

from __future__ import annotations

import re
from urllib.parse import urljoin

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

pytestmark = pytest.mark.django_db

NOT_HTML_PAGES = ("admin/", "api/")  # the admin is walked from its registry; the API is JSON
FORM = re.compile(r"<form\b(?P<attributes>[^>]*)>(?P<body>.*?)</form>", re.DOTALL | re.IGNORECASE)
ATTRIBUTE = re.compile(r'(\w[\w-]*)\s*=\s*"([^"]*)"')
CSRF_INPUT = re.compile(r'<input\b[^>]*name="csrfmiddlewaretoken"[^>]*>', re.IGNORECASE)
PARAMETER = re.compile(r"<(?:\w+:)?(\w+)>")


def _site_routes(patterns, prefix: str = ""):
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _site_routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern):
            yield route


def _page_urls(values: dict[str, str]) -> list[str]:
    urls = []
    for route in _site_routes(get_resolver().url_patterns):
        if route.startswith(NOT_HTML_PAGES):
            continue
        names = PARAMETER.findall(route)
        missing = [name for name in names if name not in values]
        assert not missing, f"{route}: no value for {missing}; add one to the fixture"
        urls.append("/" + PARAMETER.sub(lambda match: values[match.group(1)], route))
    return urls


def _admin_urls() -> list[str]:
    urls = [reverse("admin:index"), reverse("admin:password_change")]
    for model in admin.site._registry:
        info = (model._meta.app_label, model._meta.model_name)
        urls.append(reverse("admin:app_list", args=[model._meta.app_label]))
        urls.append(reverse("admin:{}_{}_changelist".format(*info)))
        urls.append(reverse("admin:{}_{}_add".format(*info)))
        first = model._default_manager.order_by("pk").first()
        if first is not None:
            for action in ("change", "delete", "history"):
                urls.append(reverse(f"admin:{info[0]}_{info[1]}_{action}", args=[first.pk]))
    return urls


def _post_forms(html: str, page_url: str) -> list[tuple[str, str]]:
    """(action URL, form body) of each POST form of the page."""
    forms = []
    for match in FORM.finditer(html):
        attributes = {name.lower(): value for name, value in ATTRIBUTE.findall(match["attributes"])}
        if attributes.get("method", "get").lower() != "post":
            continue
        forms.append((urljoin(page_url, attributes.get("action") or page_url), match["body"]))
    return forms


def test_every_post_form_carries_the_token_and_refuses_a_post_without_it(staff_user_with_data):
    user, values = staff_user_with_data
    browser = Client()
    browser.force_login(user)
    forgery = Client(enforce_csrf_checks=True)
    forgery.force_login(user)

    rendered, actions = [], set()
    for url in _page_urls(values) + _admin_urls():
        response = browser.get(url, follow=True)
        if response.status_code == 405 or "text/html" not in response.get("Content-Type", ""):
            continue  # a POST-only action or a download: no form is rendered there
        if response.status_code == 403 and url.startswith("/admin/"):
            continue  # an admin view turned off for everyone (adding memories, say)
        assert response.status_code == 200, url
        page_url = response.redirect_chain[-1][0] if response.redirect_chain else url
        html = response.content.decode()
        rendered.append(url)
        for action, body in _post_forms(html, page_url):
            assert CSRF_INPUT.search(body), f"a POST form on {url} has no CSRF token"
            actions.add(action)

    assert reverse("memory") in rendered and reverse("settings") in rendered
    assert len(actions) >= 10, sorted(actions)
    for action in sorted(actions):
        refused = forgery.post(action, {"confirm": "yes", "text": "forged"})
        assert refused.status_code == 403, f"POST {action} without a CSRF token was accepted"


def test_the_forms_of_signed_out_pages_carry_the_token_too(db):
    client = Client()
    for name in ("login", "signup", "password_reset"):
        html = client.get(reverse(name)).content.decode()
        forms = _post_forms(html, reverse(name))
        assert forms, name
        assert all(CSRF_INPUT.search(body) for _, body in forms), name


def test_session_authenticated_api_writes_need_the_csrf_token(user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)

    refused = client.post(
        "/api/sessions/", {"session_id": "forged"}, content_type="application/json"
    )
    client.get(reverse("home"))  # the page's forms hand out the token cookie
    token = client.cookies["csrftoken"].value
    accepted = client.post(
        "/api/sessions/",
        {"session_id": "genuine"},
        content_type="application/json",
        headers={"X-CSRFToken": token},
    )

    assert refused.status_code == 403
    assert "CSRF" in refused.json()["detail"]
    assert accepted.status_code == 201
    assert client.get("/api/sessions/forged/").status_code == 404
