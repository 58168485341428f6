"""Object permissions over users' data, as ``rules`` predicates.

``user.has_perm("memory_app.view_memory", memory)`` answers through
``rules.permissions.ObjectPermissionBackend`` (first in
``AUTHENTICATION_BACKENDS``): the owner may; an active staff account may when
its role holds the model permission, or, for reads only, when it holds an
active grant of the matching scope from the owner. Django's ``ModelBackend``
still answers the model-level questions (``has_perm`` without an object).

The access layer sits below the apps whose data it guards, so it names none of
their models: each data app declares, in its ``AppConfig.ready``, who owns each
of its models (``owner_resolver_register``) and its object rules built from the
predicates here (``object_rules_register`` with ``owner_or_staff_read`` and
``owner_or_staff_write``).
"""

from __future__ import annotations

from collections.abc import Callable

import rules
from django.contrib.auth.backends import ModelBackend
from django.db import models

from access_app.models import AccessGrant, AccessScope, AuditLogEntry
from access_app.selectors import grant_active_exists
from access_app.services import ADMINS_GROUP, REVIEWERS_GROUP

OwnerResolver = Callable[[models.Model], int | None]

_model_backend = ModelBackend()
_owner_resolvers: dict[type[models.Model], OwnerResolver] = {}


def owner_resolver_register(model: type[models.Model], resolve: OwnerResolver) -> None:
    """Declare how to find the user whose data an instance of ``model`` is (None: an app's
    own data); each data app does so for its models when it starts."""
    _owner_resolvers[model] = resolve


def owner_pk_of(obj: models.Model | None) -> int | None:
    """The primary key of the user whose data ``obj`` is; None for an app's own data and for
    a model no app declared."""
    if obj is None:
        return None
    resolve = _owner_resolvers.get(type(obj))
    return resolve(obj) if resolve is not None else None


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


_GRANTS = {
    AccessScope.MEMORIES: has_active_grant,
    AccessScope.CONVERSATIONS: has_conversations_grant,
}


def owner_or_staff_read(perm: str, *, scope: str) -> rules.Predicate:
    """Read rule of a user's data: the owner, or active staff whose role holds ``perm`` or
    who holds an active ``scope`` grant from the owner."""
    return is_owner | (is_active_staff & (has_model_permission(perm) | _GRANTS[scope]))


def owner_or_staff_write(perm: str) -> rules.Predicate:
    """Change or delete rule of a user's data: the owner, or active staff whose role holds
    ``perm`` (a grant never lets staff write)."""
    return is_owner | (is_active_staff & has_model_permission(perm))


def staff_with_permission(perm: str) -> rules.Predicate:
    """Rule of a staff-only action: active staff whose role holds ``perm``."""
    return is_active_staff & has_model_permission(perm)


def object_rules_register(object_rules: dict[str, rules.Predicate]) -> None:
    """Register a data app's object permissions with ``rules`` (once, when it starts)."""
    for name, predicate in object_rules.items():
        rules.set_perm(name, predicate)


def rules_register() -> None:
    """Declare the owners of the access layer's own models (a grant is its owner's, an audit
    entry its subject's)."""
    owner_resolver_register(AccessGrant, lambda grant: grant.owner_id)
    owner_resolver_register(AuditLogEntry, lambda entry: entry.subject_user_id)
