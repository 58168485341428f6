"""Reads of the access layer, and the one answer to "may this staff user see that user's data?".

Staff pages, admin and APIs ask ``staff_may_view_user_data`` for one user's
data and narrow their querysets with ``memories_visible_to_staff`` or
``sessions_visible_to_staff``; the object permissions in
``access_app.permissions`` give the same answers for single objects. Staff see
a user's data through a model permission of their role (global) or through an
active grant from that user (that user only, read-only, until it ends).
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.contrib.sessions.models import Session as DjangoSession
from django.db import connection
from django.db.models import Model, Q, QuerySet
from django.utils import timezone

from access_app.models import (
    ROLES,
    AccessGrant,
    AccessScope,
    AccountName,
    AuditLogEntry,
    PersonalAccessToken,
)
from core.async_database import StoreRead
from core.text import confusable_skeleton

# The model permission that lets a staff role read every user's data of a scope.
GLOBAL_VIEW_PERMISSION = {
    AccessScope.MEMORIES: "memory_app.view_memory",
    AccessScope.CONVERSATIONS: "sessions_app.view_sessionrecord",
}


def _active(now: datetime | None = None) -> Q:
    return Q(revoked_at__isnull=True, expires_at__gt=now or timezone.now())


def grants_active_for(
    *, grantee: AbstractBaseUser, scope: str | None = None
) -> QuerySet[AccessGrant]:
    """The unrevoked, unexpired grants a user holds (of one scope, if given), with owners."""
    grants = AccessGrant.objects.filter(_active(), grantee_id=grantee.pk)
    if scope is not None:
        grants = grants.filter(scope=scope)
    return grants.select_related("owner")


def grants_of_owner(*, owner: AbstractBaseUser) -> QuerySet[AccessGrant]:
    """Every grant a user gave, active or ended, newest first, with grantees."""
    return AccessGrant.objects.filter(owner_id=owner.pk).select_related("grantee")


def grant_active_exists(*, grantee_pk: int, owner_pk: int, scope: str) -> bool:
    return AccessGrant.objects.filter(
        _active(), grantee_id=grantee_pk, owner_id=owner_pk, scope=scope
    ).exists()


def audit_entries_for_subject(*, user: AbstractBaseUser) -> QuerySet[AuditLogEntry]:
    """What staff did with a user's data, newest first."""
    return AuditLogEntry.objects.filter(subject_user_id=user.pk)


def _is_active_staff(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    return bool(user is not None and user.is_authenticated and user.is_active and user.is_staff)


def staff_has_global_view(*, staff: AbstractBaseUser, scope: str) -> bool:
    """Whether a staff account's role lets it read every user's data of ``scope``."""
    return _is_active_staff(staff) and staff.has_perm(GLOBAL_VIEW_PERMISSION[scope])


def staff_may_view_user_data(
    *, staff: AbstractBaseUser | AnonymousUser, subject_user_pk: int | None, scope: str
) -> bool:
    """May ``staff`` read user ``subject_user_pk``'s data of ``scope`` (memories, conversations)?

    True for one's own data, for an active staff account whose role holds the
    scope's global view permission, and for one holding an active grant of that
    scope from the user. A grant is checked at every call, so a revoked or
    expired one stops working at once. Callers that show the data also record
    it with ``access_app.services.audit_record``.
    """
    if not staff.is_authenticated or not staff.is_active or subject_user_pk is None:
        return False
    if staff.pk == subject_user_pk:
        return True
    if not staff.is_staff:
        return False
    if staff_has_global_view(staff=staff, scope=scope):
        return True
    return grant_active_exists(grantee_pk=staff.pk, owner_pk=subject_user_pk, scope=scope)


def user_data_visible_to_staff(
    *, staff: AbstractBaseUser | AnonymousUser, queryset: QuerySet, scope: str, owner_field: str
) -> QuerySet:
    """``queryset`` narrowed to the rows a staff account may read.

    ``owner_field`` is the lookup to the owning user (``"user"``,
    ``"memory__user"``, ``"session__user"``). Global view permission: every
    row; otherwise one's own rows and those of users who granted ``scope``.
    Rows with no owner (app-scope memories) need the global permission.
    """
    if not staff.is_authenticated or not staff.is_active:
        return queryset.none()
    if staff_has_global_view(staff=staff, scope=scope):
        return queryset
    visible = Q(**{f"{owner_field}_id": staff.pk})
    if staff.is_staff:
        owners = AccessGrant.objects.filter(_active(), grantee_id=staff.pk, scope=scope)
        visible |= Q(**{f"{owner_field}_id__in": owners.values("owner_id")})
    return queryset.filter(visible)


def memories_visible_to_staff(*, staff: AbstractBaseUser, queryset: QuerySet) -> QuerySet:
    """A ``Memory`` queryset narrowed to what ``staff`` may read.

    See ``user_data_visible_to_staff``.
    """
    return user_data_visible_to_staff(
        staff=staff, queryset=queryset, scope=AccessScope.MEMORIES, owner_field="user"
    )


def sessions_visible_to_staff(*, staff: AbstractBaseUser, queryset: QuerySet) -> QuerySet:
    """A ``SessionRecord`` queryset narrowed to the conversations ``staff`` may read."""
    return user_data_visible_to_staff(
        staff=staff, queryset=queryset, scope=AccessScope.CONVERSATIONS, owner_field="user"
    )


@dataclass(frozen=True)
class AuditSubject:
    """What an audit entry was about, as its user reads it: words, and a link when it still
    exists among the user's own things."""

    label: str
    url: str = ""


# Describes the objects of one model that audit entries name, for the user they are about:
# (user, object ids) -> {object id: AuditSubject}, for the objects still among the user's own.
AuditSubjectDescriber = Callable[[AbstractBaseUser, set[str]], dict[str, AuditSubject]]
_audit_describers: dict[str, AuditSubjectDescriber] = {}


def audit_subject_describer_register(model: type[Model], describe: AuditSubjectDescriber) -> None:
    """Declare how the audit log names ``model``'s objects to their user (a data app does so
    for its models when it starts; the access layer names none of them itself)."""
    _audit_describers[model._meta.label_lower] = describe


def audit_subjects_describe(
    *, user: AbstractBaseUser, entries: list[AuditLogEntry]
) -> dict[int, AuditSubject]:
    """Describe each entry's object for the user it is about (by entry id).

    Each model's objects are named by the describer its app registered (a memory by its
    current text, a conversation by its title with a link to its chat page), read from the
    user's own rows only; an object since deleted, one of a model without a describer, or a
    list page, is named by its kind.
    """
    ids_by_type: dict[str, set[str]] = {}
    for entry in entries:
        if entry.object_id:
            ids_by_type.setdefault(entry.object_type, set()).add(entry.object_id)
    found = {
        object_type: _audit_describers[object_type](user, object_ids)
        for object_type, object_ids in ids_by_type.items()
        if object_type in _audit_describers
    }
    described = {}
    for entry in entries:
        try:
            meta = apps.get_model(entry.object_type)._meta
        except (LookupError, ValueError):
            described[entry.pk] = AuditSubject(entry.object_type)
            continue
        if not entry.object_id:
            described[entry.pk] = AuditSubject(f"a list of {meta.verbose_name_plural}")
            continue
        subject = found.get(entry.object_type, {}).get(entry.object_id)
        described[entry.pk] = subject or AuditSubject(f"a {meta.verbose_name} since deleted")
    return described


def username_skeleton(username: str) -> str:
    """What a username looks like, for telling look-alikes apart: the UTS #39 skeleton of its
    NFKC form, case folded, then skeletonised again (so "Alice", "alice" and "alice" with a
    Cyrillic a meet, and so do "Iarry" and "larry")."""
    shape = confusable_skeleton(unicodedata.normalize("NFKC", username))
    return confusable_skeleton(shape.casefold())


def username_confusable_taken(username: str) -> bool:
    """Whether an existing account's name looks like ``username`` (the same name included)."""
    return AccountName.objects.filter(skeleton=username_skeleton(username)).exists()


def access_tokens_of(*, user: AbstractBaseUser) -> QuerySet[PersonalAccessToken]:
    """The user's personal access tokens, revoked and expired ones included, newest first."""
    return PersonalAccessToken.objects.filter(user=user).order_by("-created", "-pk")


def access_token_of(*, user: AbstractBaseUser, token_id: str) -> PersonalAccessToken | None:
    """One of the user's personal access tokens by its id; None for another user's."""
    return PersonalAccessToken.objects.filter(user=user, pk=token_id).first()


def access_token_from_secret(*, token: str) -> PersonalAccessToken | None:
    """The token that ``token`` (``prefix.secret``) is, with its user; None for an unknown or
    malformed one (a revoked or expired token is returned: the caller says why)."""
    prefix, dot, _ = token.partition(".")
    if not dot:
        return None
    found = PersonalAccessToken.objects.select_related("user").filter(prefix=prefix).first()
    return found if found is not None and found.is_valid(token) else None


def _signin_state(results: list[list[tuple]]) -> tuple[str, bool] | None:
    rows = results[0]
    return (rows[0][0], bool(rows[0][1])) if rows else None


@functools.cache
def _signin_state_sql() -> str:
    user_model = get_user_model()
    qn = connection.ops.quote_name

    def column(model: type[Model], name: str) -> str:
        return qn(model._meta.get_field(name).column)

    return (
        f"SELECT {column(user_model, 'password')}, {column(user_model, 'is_active')} "
        f"FROM {qn(user_model._meta.db_table)} "
        f"WHERE {column(user_model, user_model._meta.pk.name)} = %s AND EXISTS ("
        f"SELECT 1 FROM {qn(DjangoSession._meta.db_table)} "
        f"WHERE {column(DjangoSession, 'session_key')} = %s "
        f"AND {column(DjangoSession, 'expire_date')} > CURRENT_TIMESTAMP)"
    )


def signin_state_read(*, user_pk: int, session_key: str) -> StoreRead:
    """The user's password hash and whether the account is active, while the Django session
    ``session_key`` exists and has not expired (else None): what a sign-in of that session
    rests on, in one statement, for a socket to see its sign-in still holds without loading
    and decoding the session."""
    return StoreRead([(_signin_state_sql(), [user_pk, session_key])], _signin_state)


@dataclass(frozen=True)
class ConsoleSection:
    """A part of the staff console, the permission that shows it, and the
    ``staff_user_create --role`` that gives it ("" when only superusers hold it)."""

    label: str
    permission: str
    role: str = ""

    @property
    def holders(self) -> str:
        """Who holds the permission: the role's group, or superusers alone."""
        return ROLES[self.role] if self.role else "superusers"


CONSOLE_SECTIONS = (
    ConsoleSection(
        "Apps, their end users and the service API's requests", "agents_app.view_app", "admin"
    ),
    ConsoleSection(
        "Making service accounts and issuing or revoking their API keys",
        "agents_app.add_serviceaccountkey",
        "keys",
    ),
    ConsoleSection("Periodic tasks", "django_celery_beat.view_periodictask", "admin"),
    ConsoleSection("The audit log and access grants", "access_app.view_auditlogentry", "admin"),
    ConsoleSection("Staff accounts and groups", "auth.view_user"),
)


def console_sections_withheld(*, user: AbstractBaseUser) -> list[ConsoleSection]:
    """The console's sections ``user`` does not see, so the console can say so: a part that
    is simply missing reads as a fault, not as a role's limit."""
    return [section for section in CONSOLE_SECTIONS if not user.has_perm(section.permission)]
