"""The staff console's home page says which of its parts a role leaves out, and for whom."""

from __future__ import annotations

import pytest

from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

APPS = "Apps, their service accounts, keys and end users: for Memory admins."
STAFF = "Staff accounts and groups: for superusers."


def _home(client, account) -> str:
    client.force_login(account)
    response = client.get("/admin/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_reviewer_is_told_what_their_role_leaves_out(client, reviewer):
    page = _home(client, reviewer)

    assert "Your role does not show these parts of the console" in page
    assert APPS in page
    assert "Periodic tasks: for Memory admins." in page
    assert STAFF in page


def test_a_memory_admin_misses_only_what_superusers_keep(client, memory_admin):
    page = _home(client, memory_admin)

    assert APPS not in page
    assert "Periodic tasks" in page, "listed among the console's apps"
    assert "Periodic tasks: for" not in page
    assert STAFF in page


def test_a_superuser_is_told_nothing_is_left_out(client):
    page = _home(client, UserFactory(is_staff=True, is_superuser=True))

    assert "Your role does not show" not in page
