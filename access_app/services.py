"""Writes of the access layer: audit entries, grants and the staff roles.

Grants are checked here rather than only in forms so that every door (page,
REST API, shell) keeps the same invariants: the grantee is an account other
than the owner, the scope is known, and the expiry lies in the future and within
``GRANT_MAX_DAYS``. A grant reaches data only while its grantee is active staff
(``access_app.selectors``), so a grant to any other account is stored as one to
staff is: what a grant answers never tells which user names are staff.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group, Permission
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from access_app.models import (
    ADMINS_GROUP,
    KEY_MANAGERS_GROUP,
    REVIEWERS_GROUP,
    ROLES,
    AccessGrant,
    AccessScope,
    AccountName,
    AuditAction,
    AuditLogEntry,
    PersonalAccessToken,
    TokenScope,
)
from access_app.selectors import username_skeleton

GRANT_MAX_DAYS = 90


# (app_label, codename) pairs; a reviewer reads memories and their provenance, including the
# conversation turns they came from, and decides on quarantined memories.
REVIEWER_PERMISSIONS = [
    ("memory_app", "view_memory"),
    ("memory_app", "view_memorysource"),
    ("memory_app", "view_memoryrevision"),
    ("memory_app", "view_generationjob"),
    ("memory_app", "view_memorytopic"),
    ("memory_app", "review_quarantine"),
    ("sessions_app", "view_sessionrecord"),
    ("sessions_app", "view_eventrecord"),
]
# A memory admin holds every permission of these apps but the key managers' writes.
ADMIN_PERMISSION_APPS = ["memory_app", "sessions_app", "agents_app", "django_celery_beat"]
# Permissions no role includes: a superuser gives them to an account on purpose.
DEDICATED_PERMISSIONS = ["change_app_state"]
ADMIN_EXTRA_PERMISSIONS = [("access_app", "view_auditlogentry"), ("access_app", "view_accessgrant")]
# Making and changing service accounts and issuing and revoking their keys reaches every end
# user of an app, so it is a role of its own (issue 43): Memory admins only see them. (The
# console deletes neither: an account stays with its revoked keys.)
KEY_WRITE_PERMISSIONS = [
    ("agents_app", f"{verb}_{model}")
    for model in ("serviceaccount", "serviceaccountkey")
    for verb in ("add", "change", "delete")
]
KEY_MANAGER_PERMISSIONS = [
    ("agents_app", f"{verb}_{model}")
    for model in ("serviceaccount", "serviceaccountkey")
    for verb in ("add", "change", "view")
]


def audit_record(
    *,
    actor: AbstractBaseUser,
    subject_user_pk: int | None,
    action: str,
    object_type: str,
    object_id: str | int = "",
    reason: str = "",
    path: str = "",
) -> AuditLogEntry | None:
    """Log that ``actor`` did ``action`` to an object of user ``subject_user_pk``.

    Returns None, logging nothing, when there is no one to tell: an object with
    no owner (app-scope memories) or a user looking at their own data. Only ids
    and kinds are stored, so the log itself never holds the user's content.
    """
    if subject_user_pk is None or actor.pk == subject_user_pk:
        return None
    if action not in AuditAction.values:
        raise ValueError(f"unknown audit action {action!r}")
    return AuditLogEntry.objects.create(
        actor=actor,
        actor_username=actor.get_username(),
        subject_user_id=subject_user_pk,
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        reason=reason,
        path=path[:500],
    )


def staff_action_record(
    *,
    actor: AbstractBaseUser | None,
    action: str,
    object_type: str,
    object_id: str | int,
    reason: str,
) -> AuditLogEntry:
    """Log a staff action that touches no one user's data but reaches many (a service account
    made, a key issued or revoked): an entry of the staff access log with no subject, which
    Memory admins and superusers read in the console and no user's access page lists. A None
    ``actor`` is the command line (``manage.py``), which holds no staff account."""
    if action not in AuditAction.values:
        raise ValueError(f"unknown audit action {action!r}")
    return AuditLogEntry.objects.create(
        actor=actor,
        actor_username=actor.get_username() if actor is not None else "command line",
        subject_user=None,
        action=action,
        object_type=object_type,
        object_id=str(object_id)[:128],
        reason=reason,
    )


class GranteeNotFoundError(ValidationError):
    """No account has the username a grant names."""


def _grantee_resolve(*, grantee: AbstractBaseUser | None, grantee_username: str | None):
    user_model = get_user_model()
    if grantee is None:
        username = (grantee_username or "").strip()
        if not username:
            raise ValidationError({"grantee": "Give the username of a staff account."})
        grantee = user_model._default_manager.filter(
            **{user_model.USERNAME_FIELD: username}
        ).first()
    if grantee is None:
        raise GranteeNotFoundError({"grantee": "No account has this username."})
    return grantee


def access_grant_create(
    *,
    owner: AbstractBaseUser,
    scope: str,
    expires_at: datetime,
    grantee: AbstractBaseUser | None = None,
    grantee_username: str | None = None,
) -> AccessGrant:
    """Let a staff account read ``scope`` of the owner's data until ``expires_at``.

    The grant applies while the grantee is an active staff account; one to any other
    account is made alike and applies to nothing. Raises ``ValidationError`` (keyed by
    field) for an unknown grantee (``GranteeNotFoundError``), the owner themself, an
    unknown scope, or an expiry that is past or more than ``GRANT_MAX_DAYS`` ahead. A
    still-active grant to the same grantee for the same scope is revoked and replaced, so
    at most one applies.
    """
    grantee = _grantee_resolve(grantee=grantee, grantee_username=grantee_username)
    errors: dict[str, str] = {}
    if grantee.pk == owner.pk:
        errors["grantee"] = "You cannot grant access to yourself."
    if scope not in AccessScope.values:
        errors["scope"] = "Choose what the grant covers."
    now = timezone.now()
    if expires_at is None or timezone.is_naive(expires_at):
        errors["expires_at"] = "Give a date and time, with its time zone."
    elif expires_at <= now:
        errors["expires_at"] = "The end of the grant must lie in the future."
    elif expires_at > now + timedelta(days=GRANT_MAX_DAYS):
        errors["expires_at"] = f"A grant lasts at most {GRANT_MAX_DAYS} days."
    if errors:
        raise ValidationError(errors)
    with transaction.atomic():
        # One owner's grant changes queue on the owner's row, so that two requests at once
        # cannot leave two active grants to the same account for the same scope.
        list(get_user_model()._default_manager.select_for_update().filter(pk=owner.pk).values("pk"))
        AccessGrant.objects.filter(
            owner=owner, grantee=grantee, scope=scope, revoked_at__isnull=True, expires_at__gt=now
        ).update(revoked_at=now)
        return AccessGrant.objects.create(
            owner=owner, grantee=grantee, scope=scope, created_at=now, expires_at=expires_at
        )


def access_grant_revoke(*, owner: AbstractBaseUser, grant_id: int | str) -> AccessGrant:
    """End one of the owner's grants now; revoking an ended grant changes nothing.

    Raises ``AccessGrant.DoesNotExist`` for an unknown id and for another
    user's grant alike, so that callers answer 404 without telling them apart.
    """
    try:
        grant = AccessGrant.objects.get(pk=int(grant_id), owner=owner)
    except (TypeError, ValueError) as error:
        raise AccessGrant.DoesNotExist from error
    if grant.revoked_at is None and grant.expires_at > timezone.now():
        grant.revoked_at = timezone.now()
        grant.save(update_fields=["revoked_at"])
    return grant


def access_data_delete(*, user: AbstractBaseUser) -> None:
    """Delete the grants a user gave or holds, their personal access tokens and what the
    audit log says about them.

    Part of "delete all my data" when the account itself is kept (deleting the
    account cascades to the same rows).
    """
    AccessGrant.objects.filter(Q(owner=user) | Q(grantee=user)).delete()
    PersonalAccessToken.objects.filter(user=user).delete()
    AuditLogEntry.objects.filter(subject_user=user).delete()


def _permissions(pairs: list[tuple[str, str]]) -> list[Permission]:
    query = Q(pk__in=[])
    for app_label, codename in pairs:
        query |= Q(content_type__app_label=app_label, codename=codename)
    return list(Permission.objects.filter(query))


def roles_ensure() -> None:
    """Create or complete the "Memory reviewers", "Memory admins" and "Key managers" groups.

    Idempotent; run after every migrate, once the permissions exist, so a new
    model's permissions join the admin role without a manual step. Permissions
    added to a group by hand are kept, except the key managers' writes, which are
    taken from the Memory admins every time (a database made before the role
    existed gave them to the admins).
    """
    reviewers, _ = Group.objects.get_or_create(name=REVIEWERS_GROUP)
    reviewers.permissions.add(*_permissions(REVIEWER_PERMISSIONS))
    key_writes = _permissions(KEY_WRITE_PERMISSIONS)
    admins, _ = Group.objects.get_or_create(name=ADMINS_GROUP)
    admins.permissions.add(
        *Permission.objects.filter(content_type__app_label__in=ADMIN_PERMISSION_APPS)
        .exclude(codename__in=DEDICATED_PERMISSIONS)
        .exclude(pk__in=[permission.pk for permission in key_writes]),
        *_permissions(ADMIN_EXTRA_PERMISSIONS),
    )
    admins.permissions.remove(*key_writes)
    key_managers, _ = Group.objects.get_or_create(name=KEY_MANAGERS_GROUP)
    key_managers.permissions.add(*_permissions(KEY_MANAGER_PERMISSIONS))


@dataclass(frozen=True)
class StaffUserResult:
    user: AbstractBaseUser
    created: bool
    password: str | None  # the new password when one was set here, else None


def staff_user_create(
    *, username: str, role: str | None, password: str | None = None, reset_password: bool = False
) -> StaffUserResult:
    """Make ``username`` an active staff account holding ``role`` ("reviewer", "admin",
    "keys", or None for staff without a role, who see only what users grant them).

    A new account gets ``password``, or a random one that is returned so it can be shown
    once; an existing account keeps its password unless ``reset_password``. The account's
    other roles are removed, so it ends up holding exactly the role asked for. Raises
    ``ValidationError`` for an empty username or an unknown role.
    """
    username = username.strip()
    if not username:
        raise ValidationError({"username": "Give a username."})
    if role is not None and role not in ROLES:
        raise ValidationError(
            {"role": f"Unknown role {role!r}: choose {', '.join(ROLES)} or none."}
        )
    roles_ensure()
    user_model = get_user_model()
    with transaction.atomic():
        user, created = user_model._default_manager.get_or_create(
            **{user_model.USERNAME_FIELD: username}
        )
        new_password = None
        if created or reset_password:
            new_password = password or secrets.token_urlsafe(12)
            user.set_password(new_password)
        user.is_staff = True
        user.is_active = True
        user.save()
        user.groups.remove(*Group.objects.filter(name__in=ROLES.values()))
        if role is not None:
            user.groups.add(Group.objects.get(name=ROLES[role]))
    return StaffUserResult(user=user, created=created, password=new_password)


def account_name_record(*, user: AbstractBaseUser) -> None:
    """Keep the skeleton of ``user``'s name for the look-alike check of sign-up (called on every
    save of a user, whatever saved it)."""
    AccountName.objects.update_or_create(
        user_id=user.pk, defaults={"skeleton": username_skeleton(user.get_username())}
    )


@dataclass(frozen=True)
class IssuedToken:
    """A new personal access token and its secret, shown once (only its hash is kept)."""

    record: PersonalAccessToken
    token: str


TOKEN_SCOPES = [scope.value for scope in TokenScope]


def access_token_create(
    *,
    user: AbstractBaseUser,
    name: str,
    scopes: list[str],
    expires_in_days: int | None = None,
) -> IssuedToken:
    """A new personal access token of ``user``: ``write`` implies ``read``; an unknown scope,
    an empty name or a non-positive lifetime raise ``ValidationError`` and make nothing."""
    name = " ".join(str(name).split())
    if not name or len(name) > 50:
        raise ValidationError({"name": "Give the token a name of 1 to 50 characters."})
    unknown = sorted(set(scopes) - set(TOKEN_SCOPES))
    if unknown or not scopes:
        raise ValidationError({"scopes": f"Scopes are {' and '.join(TOKEN_SCOPES)}."})
    if expires_in_days is not None and expires_in_days <= 0:
        raise ValidationError({"expires": "A token's lifetime is at least one day."})
    chosen = [TokenScope.READ.value, *([TokenScope.WRITE.value] if "write" in scopes else [])]
    expires_at = (
        timezone.now() + timedelta(days=expires_in_days) if expires_in_days is not None else None
    )
    record, token = PersonalAccessToken.objects.create_key(
        name=name, user=user, scopes=chosen, expiry_date=expires_at
    )
    return IssuedToken(record=record, token=token)


def access_token_revoke(*, user: AbstractBaseUser, token_id: str) -> PersonalAccessToken:
    """Revoke one of ``user``'s tokens now; ``PersonalAccessToken.DoesNotExist`` for any other."""
    token = PersonalAccessToken.objects.get(user=user, pk=token_id)
    if not token.revoked:
        token.revoked = True
        token.save(update_fields=["revoked"])
    return token


def access_token_used(
    *, token: PersonalAccessToken, action: str, what: str, object_id: str = ""
) -> AuditLogEntry:
    """Note that ``token`` was used now and log the use in its owner's audit log: which token,
    what it did (``what``: the tool or resource), on which memory. Only ids are logged."""
    now = timezone.now()
    PersonalAccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
    token.last_used_at = now
    return AuditLogEntry.objects.create(
        actor_id=token.user_id,
        actor_username=f"token {token.name!r} ({token.prefix})",
        subject_user_id=token.user_id,
        action=action,
        object_type="memory_app.memory",
        object_id=object_id,
        reason=f"{what} through your personal access token",
    )
