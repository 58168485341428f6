"""Password guessing and account farming, door by door (issue 11).

Wrong passwords are limited per account and per client address on every door that takes one
(the sign-in form, the admin's, HTTP Basic on the API, the delete-my-data confirmation): past
the limit each answers 429 with a clear message and nothing is hashed, and the account's audit
log says so. Sign-up is limited per address and refuses names that look like existing ones.
"""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from axes.models import AccessAttempt, AccessFailureLog
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from access_app.models import AuditAction, AuditLogEntry
from tests.chatapp.test_settings_production import PRODUCTION_ENVIRONMENT, run_django
from tests.factories import StaffFactory, UserFactory

PASSWORD = "correct horse battery staple"
LIMIT = 3

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def small_limit(settings):
    settings.SIGNIN_FAILURE_LIMIT = LIMIT
    settings.AXES_FAILURE_LIMIT = LIMIT


def _sign_in(client: Client, username: str, password: str, *, path: str = "/accounts/login/"):
    return client.post(path, {"username": username, "password": password})


def _basic(username: str, password: str) -> APIClient:
    client = APIClient()
    token = base64.b64encode(f"{username}:{password}".encode()).decode()
    client.credentials(HTTP_AUTHORIZATION=f"Basic {token}")
    return client


def test_the_sign_in_form_counts_down_then_locks_an_account_and_audits_it():
    user = UserFactory(username="ada")
    client = Client()
    said = [_sign_in(client, "ada", "wrong") for _ in range(LIMIT - 1)]

    assert [response.status_code for response in said] == [200] * (LIMIT - 1)
    assert "2 tries left, then signing in is locked for 15 minutes" in said[0].content.decode()
    assert (
        "One try left: after one more wrong password, signing in is locked for 15 minutes"
        in said[1].content.decode()
    )
    locked = _sign_in(client, "ada", "wrong")
    right_password_too = _sign_in(Client(REMOTE_ADDR="203.0.113.9"), "ada", PASSWORD)

    for response in (locked, right_password_too):
        assert response.status_code == 429
        assert "Too many wrong passwords" in response.content.decode()
        assert int(response["Retry-After"]) == 15 * 60
    entry = AuditLogEntry.objects.get(subject_user=user, action=AuditAction.LOCKOUT)
    assert entry.actor is None and "127.0.0.1" in entry.reason
    # The limit's failures, and the attempt refused while locked.
    assert AccessFailureLog.objects.filter(username="ada").count() == LIMIT + 1


def test_the_sign_in_form_locks_an_address_guessing_many_accounts():
    for name in ("ada", "bob", "cy", "dee"):
        UserFactory(username=name)
    client = Client(REMOTE_ADDR="198.51.100.7")
    for name in ("ada", "bob", "cy"):
        _sign_in(client, name, "wrong")

    from_there = _sign_in(client, "dee", PASSWORD)
    from_elsewhere = _sign_in(Client(REMOTE_ADDR="198.51.100.8"), "dee", PASSWORD)

    assert from_there.status_code == 429
    assert from_elsewhere.status_code == 302


def test_behind_a_trusted_proxy_forged_addresses_neither_escape_nor_name_the_lockout(settings):
    """Rotating the left-most X-Forwarded-For entry once kept an address from ever locking,
    and the lockout's audit entry named the forged address."""
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    user = UserFactory(username="ada")
    proxy = Client(REMOTE_ADDR="10.0.0.1")
    for n in range(LIMIT):
        proxy.post(
            "/accounts/login/",
            {"username": "ada", "password": "wrong"},
            HTTP_X_FORWARDED_FOR=f"6.6.6.{n}, 198.51.100.7",
        )

    again = proxy.post(
        "/accounts/login/",
        {"username": "someone-else", "password": "wrong"},
        HTTP_X_FORWARDED_FOR="6.6.6.99, 198.51.100.7",
    )

    assert again.status_code == 429
    reason = AuditLogEntry.objects.get(subject_user=user, action=AuditAction.LOCKOUT).reason
    assert "198.51.100.7" in reason and "6.6.6" not in reason


def test_a_success_resets_the_count():
    UserFactory(username="ada")
    client = Client()
    for _ in range(LIMIT - 1):
        _sign_in(client, "ada", "wrong")
    assert _sign_in(client, "ada", PASSWORD).status_code == 302
    client.logout()

    assert _sign_in(client, "ada", "wrong").status_code == 200
    assert not AccessAttempt.objects.filter(username="ada", failures_since_start__gte=LIMIT)


def test_the_admin_sign_in_locks_too():
    StaffFactory(username="root-admin")
    client = Client()
    for _ in range(LIMIT):
        _sign_in(client, "root-admin", "wrong", path="/admin/login/")

    response = _sign_in(client, "root-admin", PASSWORD, path="/admin/login/")

    assert response.status_code == 429
    assert "Too many wrong passwords" in response.content.decode()


@pytest.mark.parametrize("path", ["/accounts/login/", "/admin/login/"])
def test_a_user_name_too_long_to_record_is_counted_and_locked_like_any_other(path):
    """It was a DataError (500) where django-axes records the attempt, on PostgreSQL, and so
    never counted: a guesser could hash passwords for ever."""
    name = "n" * 300
    client = Client()
    said = [_sign_in(client, name, "wrong", path=path) for _ in range(LIMIT)]

    assert [response.status_code for response in said] == [200] * (LIMIT - 1) + [429]
    assert AccessAttempt.objects.get(username=name[:255]).failures_since_start == LIMIT


def test_basic_auth_with_a_nul_or_a_long_name_answers_401():
    UserFactory(username="ada")
    answers = [
        _basic("a\x00da", "wrong").get("/api/sessions/"),
        _basic("ada", "wr\x00ong").get("/api/sessions/"),
        _basic("n" * 300, "wrong").get("/api/sessions/"),
    ]

    assert [answer.status_code for answer in answers] == [401, 401, 401]


def test_basic_auth_answers_401_with_a_challenge_then_429():
    UserFactory(username="ada")

    wrong = _basic("ada", "wrong").get("/api/sessions/")
    assert wrong.status_code == 401
    assert wrong["WWW-Authenticate"] == 'Basic realm="api"'
    for _ in range(LIMIT - 1):
        _basic("ada", "wrong").get("/api/sessions/")
    locked = _basic("ada", PASSWORD).get("/api/sessions/")

    assert locked.status_code == 429
    assert locked.json()["detail"].startswith("Too many wrong passwords")
    assert int(locked["Retry-After"]) == 15 * 60
    assert AuditLogEntry.objects.filter(action=AuditAction.LOCKOUT).count() == 1


def test_basic_auth_with_the_right_password_works():
    UserFactory(username="ada")

    assert _basic("ada", PASSWORD).get("/api/sessions/").status_code == 200


def test_a_request_without_credentials_gets_no_password_dialog():
    response = APIClient().get("/api/sessions/")

    assert response.status_code == 403
    assert "WWW-Authenticate" not in response


def _authentication_classes(**environment: str) -> list[str]:
    script = (
        "import json; from django.conf import settings; "
        "print(json.dumps(settings.REST_FRAMEWORK['DEFAULT_AUTHENTICATION_CLASSES']))"
    )
    result = run_django(["-c", script], **environment)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.django_db(transaction=False)
def test_basic_auth_is_off_in_production_unless_asked_for():
    basic = "access_app.authentication.GuardedBasicAuthentication"

    assert basic not in _authentication_classes(**PRODUCTION_ENVIRONMENT)
    assert basic in _authentication_classes(**PRODUCTION_ENVIRONMENT, API_BASIC_AUTH="true")
    assert basic in _authentication_classes()


def test_the_delete_my_data_confirmation_is_counted_and_locks_the_account():
    user = UserFactory(username="ada")
    client = Client()
    client.force_login(user)
    for _ in range(LIMIT - 1):
        response = client.post(reverse("data-delete"), {"password": "wrong"})
        assert "That is not your password." in response.content.decode()

    locked = client.post(reverse("data-delete"), {"password": "wrong"})
    right = client.post(reverse("data-delete"), {"password": PASSWORD})

    assert locked.status_code == 429
    assert "Too many wrong passwords" in right.content.decode()
    assert get_user_model().objects.filter(pk=user.pk).exists()
    assert _sign_in(Client(REMOTE_ADDR="203.0.113.9"), "ada", PASSWORD).status_code == 429


def _sign_up(client: Client, username: str):
    return client.post(
        reverse("signup"),
        {
            "username": username,
            "password1": "an-unusual-passphrase",
            "password2": "an-unusual-passphrase",
        },
    )


def test_sign_up_is_limited_per_address(settings):
    settings.SIGNUP_PER_ADDRESS_PER_HOUR = 2
    # Counters of its own: on Redis an earlier run's sign-ups from these addresses still count.
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
    }
    first, second, third = (
        _sign_up(Client(REMOTE_ADDR="192.0.2.1"), name) for name in ("farm1", "farm2", "farm3")
    )
    elsewhere = _sign_up(Client(REMOTE_ADDR="192.0.2.2"), "farm4")

    assert (first.status_code, second.status_code, third.status_code) == (302, 302, 429)
    assert "Too many accounts" in third.content.decode()
    assert elsewhere.status_code == 302
    names = set(get_user_model().objects.values_list("username", flat=True))
    assert {"farm1", "farm2", "farm4"} <= names and "farm3" not in names


def test_behind_a_trusted_proxy_forged_addresses_buy_no_sign_ups(settings):
    settings.SIGNUP_PER_ADDRESS_PER_HOUR = 2
    settings.TRUSTED_PROXIES = ["10.0.0.1"]
    settings.CACHES = {
        "default": {**settings.CACHES["default"], "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}
    }
    proxy = Client(REMOTE_ADDR="10.0.0.1")
    statuses = []
    for n in range(3):
        proxy.cookies.clear()
        statuses.append(
            proxy.post(
                reverse("signup"),
                {
                    "username": f"farm{n}",
                    "password1": "an-unusual-passphrase",
                    "password2": "an-unusual-passphrase",
                },
                HTTP_X_FORWARDED_FOR=f"6.6.6.{n}, 192.0.2.1",
            ).status_code
        )

    assert statuses == [302, 302, 429]


@pytest.mark.parametrize(
    ("existing", "look_alike"),
    [
        ("alice", "\u0430lice"),  # Cyrillic a
        ("root", "r\u043eot"),  # Cyrillic o
        ("alice", "Alice"),
        ("larry", "Iarry"),  # capital I for l
        ("bob", "b0b"),
        ("paypal", "\uff50aypal"),  # full-width p
    ],
)
def test_sign_up_refuses_a_name_that_looks_like_an_existing_one(existing, look_alike):
    UserFactory(username=existing)

    response = _sign_up(Client(), look_alike)

    assert response.status_code == 200
    page = response.content.decode()
    # Django refuses the same name in another case (or NFKC form) itself.
    assert "looks too much like an existing account" in page or "already exists" in page
    assert get_user_model().objects.count() == 1


def test_sign_up_accepts_a_name_unlike_any_other():
    UserFactory(username="alice")

    assert _sign_up(Client(), "alicia").status_code == 302
