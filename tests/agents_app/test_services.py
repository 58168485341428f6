"""Writes of service accounts and keys: only Key managers (or the command line) make them, and
each is in the staff access log, about no user (issue 43)."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.core.management import call_command

from access_app.models import AuditAction, AuditLogEntry
from access_app.services import ADMINS_GROUP, KEY_MANAGERS_GROUP
from agents_app.models import ServiceAccount, ServiceAccountKey
from agents_app.services import (
    app_ensure,
    service_account_create,
    service_key_create,
    service_key_revoke,
)
from tests.factories import StaffFactory

pytestmark = pytest.mark.django_db


def _member(group: str):
    account = StaffFactory()
    account.groups.add(Group.objects.get(name=group))
    return account


def test_a_memory_admin_makes_no_service_account_or_key_by_any_door():
    admin = _member(ADMINS_GROUP)
    app, _ = app_ensure(name="support")
    issued = service_account_create(app=app, name="backend")

    with pytest.raises(PermissionDenied):
        service_account_create(app=app, name="theirs", actor=admin)
    with pytest.raises(PermissionDenied):
        service_key_create(service_account=issued.record.service_account, actor=admin)
    with pytest.raises(PermissionDenied):
        service_key_revoke(key=issued.record, actor=admin)

    assert list(ServiceAccount.objects.values_list("name", flat=True)) == ["backend"]
    assert list(ServiceAccountKey.objects.values_list("revoked", flat=True)) == [False]
    assert not AuditLogEntry.objects.filter(actor=admin).exists()


def test_a_key_manager_who_lost_staff_status_makes_nothing():
    manager = _member(KEY_MANAGERS_GROUP)
    manager.is_staff = False
    manager.save()
    app, _ = app_ensure(name="support")

    with pytest.raises(PermissionDenied):
        service_account_create(app=app, name="backend", actor=manager)
    assert not ServiceAccount.objects.exists()


def test_each_account_key_and_revocation_is_logged_once_with_its_scopes_about_no_user():
    manager = _member(KEY_MANAGERS_GROUP)
    app, _ = app_ensure(name="support")

    issued = service_account_create(app=app, name="backend", scopes=["memory:read"], actor=manager)
    service_key_revoke(key=issued.record, actor=manager)
    service_key_revoke(key=issued.record, actor=manager)

    entries = list(AuditLogEntry.objects.order_by("pk"))
    assert [(entry.action, entry.object_type) for entry in entries] == [
        (AuditAction.ADD, "agents_app.serviceaccount"),
        (AuditAction.ADD, "agents_app.serviceaccountkey"),
        (AuditAction.REVOKE, "agents_app.serviceaccountkey"),
    ]
    assert {(entry.actor, entry.subject_user) for entry in entries} == {(manager, None)}
    prefix = issued.record.prefix
    assert entries[1].reason == (
        f"Issued the key {prefix} (memory:read; no expiry) of the service account support/backend."
    )
    assert entries[2].object_id == prefix
    assert issued.key not in " ".join(entry.reason for entry in entries)


def test_a_key_made_on_the_command_line_is_logged_as_the_command_lines():
    call_command("app_key_create", "--app", "support", stdout=io.StringIO(), stderr=io.StringIO())

    actions = AuditLogEntry.objects.order_by("pk").values_list("actor_username", "action")
    assert list(actions) == [("command line", AuditAction.ADD), ("command line", AuditAction.ADD)]
