"""Signing up, in and out in the browser, and the demo user of ``make run``."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from sessions_app.management.commands.ensure_demo_user import DEMO_PASSWORD, DEMO_USERNAME

PASSWORD = "correct horse battery staple"


@pytest.fixture
def csrf_client():
    """A browser-like client: CSRF tokens are enforced as for a real form post."""
    return Client(enforce_csrf_checks=True)


def form_post(client: Client, url: str, data: dict):
    """Load the page, then post the form with the CSRF token it handed out."""
    page = client.get(url)
    assert page.status_code == 200
    return client.post(url, {**data, "csrfmiddlewaretoken": page.context["csrf_token"]})


@pytest.mark.django_db
def test_signup_creates_the_user_and_signs_them_in(csrf_client):
    response = form_post(
        csrf_client,
        reverse("signup"),
        {
            "username": "ada",
            "password1": "an-unusual-passphrase",
            "password2": "an-unusual-passphrase",
        },
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("home")
    user = get_user_model().objects.get(username="ada")
    assert user.check_password("an-unusual-passphrase")
    home = csrf_client.get(reverse("home"))
    assert home.status_code == 200
    assert home.context["user"] == user


@pytest.mark.django_db
def test_signup_shows_why_a_weak_password_is_refused(client):
    response = client.post(
        reverse("signup"), {"username": "bob", "password1": "12345678", "password2": "12345678"}
    )

    assert response.status_code == 200
    assert "This password is too common." in response.content.decode()
    assert not get_user_model().objects.filter(username="bob").exists()


def test_signed_in_users_are_sent_home_from_signup(client, user):
    client.force_login(user)

    assert client.get(reverse("signup"))["Location"] == reverse("home")


def test_login_with_the_right_password_signs_in(csrf_client, user):
    response = form_post(
        csrf_client, reverse("login"), {"username": user.username, "password": PASSWORD}
    )

    assert response.status_code == 302
    assert response["Location"] == reverse("home")
    assert csrf_client.get(reverse("home")).status_code == 200


def test_login_with_a_wrong_password_says_so(csrf_client, user):
    response = form_post(
        csrf_client, reverse("login"), {"username": user.username, "password": "wrong"}
    )

    assert response.status_code == 200
    assert "Wrong username or password." in response.content.decode()
    assert csrf_client.get(reverse("home")).status_code == 302


def test_login_returns_to_the_page_asked_for(client, user):
    response = client.post(
        reverse("login") + "?next=/admin/",
        {"username": user.username, "password": PASSWORD, "next": "/admin/"},
    )

    assert response["Location"] == "/admin/"


def test_logout_is_a_post_from_the_header_and_ends_the_session(csrf_client, user):
    csrf_client.force_login(user)
    home = csrf_client.get(reverse("home"))
    assert f'action="{reverse("logout")}"' in home.content.decode()

    response = csrf_client.post(
        reverse("logout"), {"csrfmiddlewaretoken": home.context["csrf_token"]}
    )

    assert response.status_code == 200
    assert "You have signed out" in response.content.decode()
    assert csrf_client.get(reverse("home")).status_code == 302


def test_logout_by_get_is_refused(client, user):
    client.force_login(user)

    assert client.get(reverse("logout")).status_code == 405
    assert client.get(reverse("home")).status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["home", "password_change"])
def test_pages_need_a_signed_in_user(client, name):
    url = reverse(name)

    response = client.get(url)

    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={url}"


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["login", "signup"])
def test_forms_carry_a_csrf_token(client, name):
    page = client.get(reverse(name)).content.decode()

    assert 'name="csrfmiddlewaretoken"' in page


def test_the_header_logout_form_carries_a_csrf_token(client, user):
    client.force_login(user)
    page = client.get(reverse("home")).content.decode()

    logout_form = page[page.index(f'action="{reverse("logout")}"') :]
    assert 'name="csrfmiddlewaretoken"' in logout_form[: logout_form.index("</form>")]


@pytest.mark.django_db
def test_a_post_without_csrf_token_is_refused(csrf_client):
    response = csrf_client.post(
        reverse("signup"), {"username": "eve", "password1": "x-y-z-w-q", "password2": "x-y-z-w-q"}
    )

    assert response.status_code == 403
    assert not get_user_model().objects.filter(username="eve").exists()


@pytest.mark.django_db
def test_ensure_demo_user_creates_the_user_once_and_prints_credentials(client):
    first, second = StringIO(), StringIO()

    call_command("ensure_demo_user", stdout=first)
    call_command("ensure_demo_user", stdout=second)

    assert get_user_model().objects.filter(username=DEMO_USERNAME).count() == 1
    assert DEMO_USERNAME in first.getvalue()
    assert DEMO_PASSWORD in first.getvalue()
    assert "already existed" in second.getvalue()
    signed_in = client.post(
        reverse("login"), {"username": DEMO_USERNAME, "password": DEMO_PASSWORD}
    )
    assert signed_in.status_code == 302
