"""Object permissions over users' data, as ``rules`` predicates.

``user.has_perm("memory_app.view_memory", memory)`` answers through
``rules.permissions.ObjectPermissionBackend`` (first in
``AUTHENTICATION_BACKENDS``): the owner may; an active staff account may when
its role holds the model permission, or, for reads only, when it holds an
active grant of the matching scope from the owner. Django's ``ModelBackend``
still answers the model-level questions (``has_perm`` without an object).
"""

from __future__ import annotations

import rules
from django.contrib.auth.backends import ModelBackend
from django.db import models

from access_app.models import AccessGrant, AccessScope, AuditLogEntry
from access_app.selectors import grant_active_exists
from access_app.services import ADMINS_GROUP, REVIEWERS_GROUP
from memory_app.models import GenerationJob, Memory, MemoryRevision, MemorySettings, MemorySource
from sessions_app.models import EventRecord, SessionRecord

_model_backend = ModelBackend()


def owner_pk_of(obj: models.Model | None) -> int | None:
    """The primary key of the user whose data ``obj`` is; None for an app's own data."""
    match obj:
        case Memory() | SessionRecord() | GenerationJob() | MemorySettings():
            return obj.user_id
        case MemorySource() | MemoryRevision():
            return obj.memory.user_id
        case EventRecord():
            return obj.session.user_id
        case AccessGrant():
            return obj.owner_id
        case AuditLogEntry():
            return obj.subject_user_id
    return None


@rules.predicate
def is_owner(user, obj) -> bool:
    return obj is not None and user.is_authenticated and owner_pk_of(obj) == user.pk


@rules.predicate
def is_active_staff(user) -> bool:
    return user.is_authenticated and user.is_active and user.is_staff


def has_active_grant_for(scope: str) -> rules.Predicate:
    """Predicate: the user holds an unexpired, unrevoked ``scope`` grant from the object's owner."""

    def predicate(user, obj) -> bool:
        owner_pk = owner_pk_of(obj)
        if owner_pk is None or not (user.is_authenticated and user.is_active and user.is_staff):
            return False
        return grant_active_exists(grantee_pk=user.pk, owner_pk=owner_pk, scope=scope)

    return rules.Predicate(predicate, name=f"has_active_grant:{scope}")


def has_model_permission(perm: str) -> rules.Predicate:
    """Predicate: the user's groups or own permissions hold ``perm`` (superusers hold all)."""
    return rules.Predicate(
        lambda user: _model_backend.has_perm(user, perm), name=f"has_model_permission:{perm}"
    )


has_active_grant = has_active_grant_for(AccessScope.MEMORIES)
has_conversations_grant = has_active_grant_for(AccessScope.CONVERSATIONS)
is_memory_reviewer = rules.is_group_member(REVIEWERS_GROUP)
is_memory_admin = rules.is_superuser | rules.is_group_member(ADMINS_GROUP)


def _read(perm: str, grant: rules.Predicate) -> rules.Predicate:
    return is_owner | (is_active_staff & (has_model_permission(perm) | grant))


def _write(perm: str) -> rules.Predicate:
    return is_owner | (is_active_staff & has_model_permission(perm))


RULES: dict[str, rules.Predicate] = {
    "memory_app.view_memory": _read("memory_app.view_memory", has_active_grant),
    "memory_app.view_memorysource": _read("memory_app.view_memorysource", has_active_grant),
    "memory_app.view_memoryrevision": _read("memory_app.view_memoryrevision", has_active_grant),
    "memory_app.view_generationjob": _read("memory_app.view_generationjob", has_active_grant),
    "memory_app.change_memory": _write("memory_app.change_memory"),
    "memory_app.delete_memory": _write("memory_app.delete_memory"),
    "memory_app.review_quarantine": is_active_staff
    & has_model_permission("memory_app.review_quarantine"),
    "sessions_app.view_sessionrecord": _read(
        "sessions_app.view_sessionrecord", has_conversations_grant
    ),
    "sessions_app.view_eventrecord": _read(
        "sessions_app.view_eventrecord", has_conversations_grant
    ),
    "sessions_app.change_sessionrecord": _write("sessions_app.change_sessionrecord"),
    "sessions_app.delete_sessionrecord": _write("sessions_app.delete_sessionrecord"),
}


def rules_register() -> None:
    """Register the object permissions with ``rules`` (once, at app start)."""
    for name, predicate in RULES.items():
        rules.set_perm(name, predicate)
