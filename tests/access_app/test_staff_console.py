"""The staff console's home page says which of its parts a role leaves out, and for whom."""

from __future__ import annotations

import html
import re

import pytest

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

APPS = "Apps, their end users and the service API's requests: for Memory admins"
KEYS = "Making service accounts and issuing or revoking their API keys: for Key managers"
STAFF = "Staff accounts and groups: for superusers."


def _home(client, account) -> str:
    client.force_login(account)
    response = client.get("/admin/")
    assert response.status_code == 200
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", response.content.decode())).split())


def test_a_reviewer_is_told_what_their_role_leaves_out(client, reviewer):
    page = _home(client, reviewer)

    assert "Your role does not show these parts of the console" in page
    assert f"{APPS} (--role admin)." in page
    assert f"{KEYS} (--role keys)." in page
    assert "Periodic tasks: for Memory admins (--role admin)." in page
    assert STAFF in page


def test_a_memory_admin_is_told_keys_are_for_key_managers(client, memory_admin):
    page = _home(client, memory_admin)

    assert APPS not in page
    assert f"{KEYS} (--role keys)." in page
    assert "Periodic tasks" in page, "listed among the console's apps"
    assert "Periodic tasks: for" not in page
    assert STAFF in page


def test_a_key_manager_is_told_the_rest_of_the_apps_is_for_memory_admins(client, key_manager):
    page = _home(client, key_manager)

    assert "Service accounts" in page and "API keys" in page, "listed among the console's apps"
    assert KEYS not in page
    assert f"{APPS} (--role admin)." in page
    assert "The audit log and access grants: for Memory admins" in page
    assert STAFF in page


def test_a_superuser_is_told_nothing_is_left_out(client):
    page = _home(client, UserFactory(is_staff=True, is_superuser=True))

    assert "Your role does not show" not in page
