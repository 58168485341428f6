"""Invariants the database itself keeps for grants and audit entries."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from access_app.models import AccessGrant, AuditLogEntry
from tests.factories import AccessGrantFactory, StaffFactory


@pytest.mark.django_db
def test_a_grant_cannot_end_before_it_starts(user):
    with pytest.raises(IntegrityError), transaction.atomic():
        AccessGrantFactory(owner=user, expires_at=timezone.now() - timedelta(minutes=1))
    assert not AccessGrant.objects.exists()


@pytest.mark.django_db
def test_a_grant_cannot_be_given_to_oneself(db):
    staff = StaffFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        AccessGrantFactory(owner=staff, grantee=staff)


@pytest.mark.django_db
def test_a_grant_is_active_until_it_expires_or_is_revoked(user):
    grant = AccessGrantFactory(owner=user)
    assert grant.is_active()
    assert not grant.is_active(now=grant.expires_at)
    grant.revoked_at = timezone.now()
    assert not grant.is_active()


@pytest.mark.django_db
def test_deleting_a_user_deletes_their_grants_and_audit_entries_but_not_others(user, other_user):
    staff = StaffFactory()
    AccessGrantFactory(owner=user, grantee=staff)
    AccessGrantFactory(owner=other_user, grantee=staff)
    for subject in (user, other_user):
        AuditLogEntry.objects.create(
            actor=staff,
            actor_username=staff.username,
            subject_user=subject,
            action="view",
            object_type="memory_app.memory",
        )
    user.delete()
    assert list(AccessGrant.objects.values_list("owner", flat=True)) == [other_user.pk]
    assert list(AuditLogEntry.objects.values_list("subject_user", flat=True)) == [other_user.pk]


@pytest.mark.django_db
def test_an_audit_entry_keeps_the_actor_name_when_the_staff_account_is_deleted(user):
    staff = StaffFactory(username="support-ann")
    entry = AuditLogEntry.objects.create(
        actor=staff,
        actor_username=staff.username,
        subject_user=user,
        action="view",
        object_type="memory_app.memory",
        object_id="1",
    )
    staff.delete()
    entry.refresh_from_db()
    assert entry.actor is None
    assert entry.actor_username == "support-ann"
