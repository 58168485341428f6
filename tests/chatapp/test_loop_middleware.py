"""Django's middlewares as ``chatapp.loop_middleware`` runs them in an async chain (daphne's,
here Django's async test client): their hooks on the event loop, in a thread when they may do
I/O. What a browser sees is what Django's own classes give it in a sync chain: the same
security headers, the HTTPS redirect, a form posted without its CSRF token refused, the
session saved and its cookie set at sign-in, and both ended at sign-out."""

import re

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient, Client
from django.urls import reverse

from tests.factories import UserFactory

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(120)]

PASSWORD = "correct horse battery staple"
SECURITY_HEADERS = (
    "X-Frame-Options",
    "X-Content-Type-Options",
    "Referrer-Policy",
    "Cross-Origin-Opener-Policy",
    "Content-Security-Policy",
    "Vary",
)
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture
def account():
    return UserFactory()


async def test_a_page_has_the_security_headers_a_sync_chain_gives():
    in_sync_chain = await sync_to_async(Client().get)(reverse("login"))
    in_async_chain = await AsyncClient().get(reverse("login"))

    assert in_async_chain.status_code == in_sync_chain.status_code == 200
    for header in SECURITY_HEADERS:
        assert in_async_chain[header] == in_sync_chain[header], header
    assert in_async_chain["X-Frame-Options"] == "DENY"
    assert in_async_chain.cookies["csrftoken"]["samesite"] == "Lax"


async def test_plain_http_is_redirected_and_https_gets_hsts(settings):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600

    plain = await AsyncClient().get(reverse("login"))
    secure = await AsyncClient().get(reverse("login"), secure=True)

    assert plain.status_code == 301
    assert plain["Location"] == "https://testserver/accounts/login/"
    assert secure.status_code == 200
    assert secure["Strict-Transport-Security"] == "max-age=3600"


async def test_a_form_posted_without_its_token_is_refused_and_with_it_signs_in(account):
    client = AsyncClient(enforce_csrf_checks=True)
    form = (await client.get(reverse("login"))).content.decode()
    token = CSRF_INPUT.search(form).group(1)
    credentials = {"username": account.username, "password": PASSWORD}

    refused = await client.post(reverse("login"), credentials)
    signed_in = await client.post(reverse("login"), {**credentials, "csrfmiddlewaretoken": token})

    assert refused.status_code == 403
    assert "sessionid" not in refused.cookies
    assert signed_in.status_code == 302
    assert signed_in.cookies["sessionid"]["httponly"]
    home = await client.get(reverse("home"))
    assert home.status_code == 200
    assert account.username in home.content.decode()


async def test_signing_out_ends_the_session_and_its_cookie(account):
    client = AsyncClient(enforce_csrf_checks=True)
    await sync_to_async(client.force_login)(account)
    form = (await client.get(reverse("home"))).content.decode()
    token = CSRF_INPUT.search(form).group(1)

    signed_out = await client.post(reverse("logout"), {"csrfmiddlewaretoken": token})

    assert signed_out.status_code == 200
    assert signed_out.cookies["sessionid"].value == ""
    after = await client.get(reverse("home"))
    assert after.status_code == 302
    assert after["Location"].startswith(reverse("login"))
