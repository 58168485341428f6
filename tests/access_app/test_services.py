"""Grants given and revoked through the service, audit entries, the roles and data deletion."""

import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError
from django.db import connection
from django.utils import timezone

from access_app import services
from access_app.models import AccessGrant, AuditLogEntry, PersonalAccessToken
from access_app.selectors import (
    access_token_from_secret,
    audit_entries_for_subject,
    grants_active_for,
    grants_of_owner,
)
from tests.factories import AccessGrantFactory, StaffFactory, UserFactory


def _in(days: float):
    return timezone.now() + timedelta(days=days)


@pytest.mark.django_db
def test_grant_to_a_staff_username(user, staff):
    grant = services.access_grant_create(
        owner=user, grantee_username=f" {staff.username} ", scope="memories", expires_at=_in(3)
    )
    assert (grant.owner, grant.grantee, grant.scope, grant.revoked_at) == (
        user,
        staff,
        "memories",
        None,
    )
    assert list(grants_active_for(grantee=staff)) == [grant]
    assert list(grants_of_owner(owner=user)) == [grant]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("grantee_kind", "scope", "days", "field"),
    [
        ("nobody", "memories", 3, "grantee"),
        ("blank", "memories", 3, "grantee"),
        ("self", "memories", 3, "grantee"),
        ("staff", "everything", 3, "scope"),
        ("staff", "memories", -1, "expires_at"),
        ("staff", "memories", 0, "expires_at"),
        ("staff", "memories", services.GRANT_MAX_DAYS + 1, "expires_at"),
    ],
)
def test_bad_grants_are_refused_with_the_field_at_fault(grantee_kind, scope, days, field):
    owner = StaffFactory() if grantee_kind == "self" else UserFactory()
    username = {
        "nobody": "no-such-account",
        "blank": "   ",
        "self": owner.username,
        "staff": StaffFactory().username,
    }[grantee_kind]
    with pytest.raises(ValidationError) as raised:
        services.access_grant_create(
            owner=owner, grantee_username=username, scope=scope, expires_at=_in(days)
        )
    assert field in raised.value.message_dict
    assert not AccessGrant.objects.exists()


@pytest.mark.django_db
def test_a_naive_expiry_is_refused(user, staff):
    with pytest.raises(ValidationError) as raised:
        services.access_grant_create(
            owner=user, grantee=staff, scope="memories", expires_at=_in(1).replace(tzinfo=None)
        )
    assert "expires_at" in raised.value.message_dict


@pytest.mark.django_db
def test_granting_again_replaces_the_active_grant(user, staff):
    first = services.access_grant_create(
        owner=user, grantee=staff, scope="memories", expires_at=_in(1)
    )
    second = services.access_grant_create(
        owner=user, grantee=staff, scope="memories", expires_at=_in(5)
    )
    first.refresh_from_db()
    assert first.revoked_at is not None
    assert list(grants_active_for(grantee=staff)) == [second]
    assert list(grants_of_owner(owner=user)) == [second, first]


@pytest.mark.django_db
def test_revoke_ends_the_grant_at_once_and_is_idempotent(user, staff):
    grant = AccessGrantFactory(owner=user, grantee=staff)
    revoked = services.access_grant_revoke(owner=user, grant_id=grant.pk)
    assert revoked.revoked_at is not None
    assert not grants_active_for(grantee=staff).exists()
    again = services.access_grant_revoke(owner=user, grant_id=str(grant.pk))
    assert again.revoked_at == revoked.revoked_at


@pytest.mark.django_db
@pytest.mark.parametrize("grant_id", ["other", 999999, "not-a-number", None])
def test_revoking_another_users_grant_or_an_unknown_id_is_not_found(user, other_user, grant_id):
    grant = AccessGrantFactory(owner=other_user)
    with pytest.raises(AccessGrant.DoesNotExist):
        services.access_grant_revoke(
            owner=user, grant_id=grant.pk if grant_id == "other" else grant_id
        )
    grant.refresh_from_db()
    assert grant.revoked_at is None


@pytest.mark.django_db
def test_an_expired_grant_is_no_longer_active(user, expired_staff):
    assert not grants_active_for(grantee=expired_staff).exists()
    assert grants_of_owner(owner=user).count() == 1


@pytest.mark.django_db
def test_audit_record_logs_staff_access_for_the_subject_to_see(user, other_user, staff):
    entry = services.audit_record(
        actor=staff,
        subject_user_pk=user.pk,
        action="view",
        object_type="memory_app.memory",
        object_id="abc",
        reason="support ticket 42",
        path="/admin/memory_app/memory/abc/change/",
    )
    assert entry.actor_username == staff.username
    assert list(audit_entries_for_subject(user=user)) == [entry]
    assert not audit_entries_for_subject(user=other_user).exists()


@pytest.mark.django_db
def test_audit_record_skips_ones_own_data_and_ownerless_objects(staff):
    assert (
        services.audit_record(
            actor=staff, subject_user_pk=staff.pk, action="view", object_type="memory_app.memory"
        )
        is None
    )
    assert (
        services.audit_record(
            actor=staff, subject_user_pk=None, action="view", object_type="memory_app.memory"
        )
        is None
    )
    assert not AuditLogEntry.objects.exists()


@pytest.mark.django_db
def test_audit_record_refuses_an_unknown_action(user, staff):
    with pytest.raises(ValueError, match="unknown audit action"):
        services.audit_record(
            actor=staff, subject_user_pk=user.pk, action="peek", object_type="memory_app.memory"
        )


@pytest.mark.django_db
def test_access_data_delete_leaves_other_users_rows(user, other_user, staff):
    AccessGrantFactory(owner=user, grantee=staff)
    kept = AccessGrantFactory(owner=other_user, grantee=staff)
    services.audit_record(actor=staff, subject_user_pk=user.pk, action="view", object_type="x")
    services.audit_record(
        actor=staff, subject_user_pk=other_user.pk, action="view", object_type="x"
    )
    services.access_data_delete(user=user)
    assert list(AccessGrant.objects.all()) == [kept]
    assert list(AuditLogEntry.objects.values_list("subject_user", flat=True)) == [other_user.pk]


@pytest.mark.django_db
def test_roles_exist_after_migrate_with_their_permissions():
    reviewers = Group.objects.get(name=services.REVIEWERS_GROUP)
    admins = Group.objects.get(name=services.ADMINS_GROUP)
    reviewer_perms = {
        f"{p.content_type.app_label}.{p.codename}" for p in reviewers.permissions.all()
    }
    admin_perms = {f"{p.content_type.app_label}.{p.codename}" for p in admins.permissions.all()}
    assert reviewer_perms == {
        f"{app}.{codename}" for app, codename in services.REVIEWER_PERMISSIONS
    }
    assert {"memory_app.review_quarantine", "memory_app.delete_memory"} <= admin_perms
    assert {"sessions_app.delete_sessionrecord", "django_celery_beat.change_periodictask"} <= (
        admin_perms
    )
    assert "memory_app.delete_memory" not in reviewer_perms


KEY_WRITES = {
    "agents_app.add_serviceaccount",
    "agents_app.change_serviceaccount",
    "agents_app.delete_serviceaccount",
    "agents_app.add_serviceaccountkey",
    "agents_app.change_serviceaccountkey",
    "agents_app.delete_serviceaccountkey",
}


def _held(group: Group) -> set[str]:
    return {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}


@pytest.mark.django_db
def test_only_key_managers_make_service_accounts_and_keys_and_memory_admins_see_them():
    admins = _held(Group.objects.get(name=services.ADMINS_GROUP))
    key_managers = _held(Group.objects.get(name=services.KEY_MANAGERS_GROUP))

    assert not KEY_WRITES & admins
    assert {"agents_app.view_serviceaccount", "agents_app.view_serviceaccountkey"} <= admins
    assert {"agents_app.change_app", "agents_app.view_enduser"} <= admins
    assert key_managers == {
        f"agents_app.{verb}_{model}"
        for verb in ("add", "change", "view")
        for model in ("serviceaccount", "serviceaccountkey")
    }


@pytest.mark.django_db
def test_roles_ensure_takes_the_key_writes_from_memory_admins_of_an_older_database():
    """Before the Key managers' role, Memory admins held every permission of agents_app, and
    groups persist in databases: the upgrade's migrate takes the key writes away."""
    admins = Group.objects.get(name=services.ADMINS_GROUP)
    admins.permissions.add(
        *Permission.objects.filter(
            content_type__app_label="agents_app",
            codename__in=[name.split(".")[1] for name in KEY_WRITES],
        )
    )
    assert _held(admins) >= KEY_WRITES

    services.roles_ensure()

    assert not KEY_WRITES & _held(admins)
    assert "agents_app.view_serviceaccountkey" in _held(admins)


@pytest.mark.django_db
def test_roles_ensure_is_idempotent_and_keeps_added_permissions():
    reviewers = Group.objects.get(name=services.REVIEWERS_GROUP)
    extra = reviewers.permissions.model.objects.get(codename="change_memorytopic")
    reviewers.permissions.add(extra)
    services.roles_ensure()
    services.roles_ensure()
    assert Group.objects.filter(name=services.REVIEWERS_GROUP).count() == 1
    assert reviewers.permissions.filter(pk=extra.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_grants_made_at_once_leave_one_active_grant(requires_postgres):
    owner, staff = UserFactory(), StaffFactory()
    writers = 8
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []

    def grant(days: int) -> None:
        try:
            barrier.wait()
            services.access_grant_create(
                owner=owner, grantee=staff, scope="memories", expires_at=_in(days)
            )
        except BaseException as error:  # collected and asserted on below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=grant, args=(days,)) for days in range(1, writers + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert AccessGrant.objects.filter(owner=owner).count() == writers
    assert grants_active_for(grantee=staff).count() == 1


@pytest.mark.django_db
def test_a_token_is_hashed_at_rest_write_implies_read_and_bad_input_makes_nothing(user):
    issued = services.access_token_create(user=user, name="Cursor", scopes=["write"])

    assert issued.record.scopes == ["read", "write"]
    assert issued.token.partition(".")[2] not in issued.record.hashed_key
    assert access_token_from_secret(token=issued.token) == issued.record
    assert access_token_from_secret(token=issued.token + "x") is None
    for bad in ({"scopes": ["admin"]}, {"scopes": []}, {"name": " "}, {"expires_in_days": 0}):
        with pytest.raises(ValidationError):
            services.access_token_create(user=user, **{"name": "x", "scopes": ["read"], **bad})
    assert PersonalAccessToken.objects.filter(user=user).count() == 1
