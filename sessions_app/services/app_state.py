"""Staff writes of ``app:`` state, the state every user of an app shares (and its agent's
instruction may template in): one door, the staff console, for staff holding
``sessions_app.change_app_state``; each change is audited. End users never write it
(``sessions_app.end_user``); the agent's own code and the app's service accounts write it
through events, like any state.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import transaction

from access_app.models import AuditAction, AuditLogEntry
from sessions_app.models import AppState
from sessions_app.services.sessions import identifier_validate
from sessions_app.state import APP_PREFIX, state_key_validate, state_value_validate

APP_STATE_PERMISSION = "sessions_app.change_app_state"


def _allowed(actor: AbstractBaseUser) -> None:
    if not (actor.is_active and actor.is_staff and actor.has_perm(APP_STATE_PERMISSION)):
        raise PermissionDenied("Changing app state needs the change_app_state permission.")


def _audit(*, actor: AbstractBaseUser | None, action: str, app_name: str, key: str, reason: str):
    AuditLogEntry.objects.create(
        actor=actor,
        actor_username=actor.get_username() if actor else "migration",
        subject_user=None,
        action=action,
        object_type=AppState._meta.label_lower,
        object_id=f"{app_name}/{APP_PREFIX}{key}"[:128],
        reason=reason,
    )


def app_state_set(
    *, actor: AbstractBaseUser, app_name: str, key: str, value: Any, reason: str
) -> AppState:
    """Set ``app:key`` (``key`` without its prefix) of ``app_name`` to ``value``, audited.

    Raises ``PermissionDenied`` for an actor without the permission and ``SessionStoreError``
    (a ``ValueError``) for a key or value the store refuses.
    """
    _allowed(actor)
    identifier_validate(value=app_name, what="app_name")
    state_key_validate(APP_PREFIX + key)
    state_value_validate(APP_PREFIX + key, value)
    with transaction.atomic():
        row, created = AppState.objects.update_or_create(
            app_name=app_name, key=key, defaults={"value": value}
        )
        _audit(
            actor=actor,
            action=AuditAction.CHANGE,
            app_name=app_name,
            key=key,
            reason=reason or ("Set" if created else "Changed"),
        )
    return row


def app_state_delete(*, actor: AbstractBaseUser, app_name: str, key: str, reason: str) -> bool:
    """Remove ``app:key`` of ``app_name``, audited; False if there was none."""
    _allowed(actor)
    with transaction.atomic():
        deleted, _ = AppState.objects.filter(app_name=app_name, key=key).delete()
        if deleted:
            _audit(
                actor=actor, action=AuditAction.DELETE, app_name=app_name, key=key, reason=reason
            )
    return bool(deleted)
