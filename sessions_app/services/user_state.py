"""The ``user:`` state of a person as they manage it themselves: the profile the agent keeps
about them (the name it saved, any profile key), corrected or deleted from their Memory page.

These writes come from the person, not from a turn, so they change the rows directly (as
deleting all of one's data does); turns read the new values from their next step on.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from sessions_app.models import UserState


def user_state_correct(*, app_name: str, user_pk: int, key: str, value: Any) -> bool:
    """Replace the value of the user's existing ``user:`` key (given without its prefix);
    False when they have no such key."""
    with transaction.atomic():
        return bool(
            UserState.objects.filter(app_name=app_name, user_id=user_pk, key=key).update(
                value=value
            )
        )


def user_state_delete(*, app_name: str, user_pk: int, key: str | None = None) -> int:
    """Delete one ``user:`` key of the user in the app (``key``, without its prefix), or all of
    them; returns how many went."""
    rows = UserState.objects.filter(app_name=app_name, user_id=user_pk)
    if key is not None:
        rows = rows.filter(key=key)
    return rows.delete()[0]


def user_state_put(
    *,
    app_name: str,
    user_pk: int,
    values: dict[str, Any],
    removed: list[str],
    create: bool = True,
) -> None:
    """Set the user's ``user:`` keys of ``values`` (without their prefix) and delete those of
    ``removed``: the keys another store is the source of (the profile memories). With
    ``create`` False, only keys the user already has are set (nothing is added for a user
    whose rows are being deleted)."""
    with transaction.atomic():
        for key, value in values.items():
            rows = UserState.objects.filter(app_name=app_name, user_id=user_pk, key=key)
            if not rows.update(value=value) and create:
                UserState.objects.create(app_name=app_name, user_id=user_pk, key=key, value=value)
        if removed:
            UserState.objects.filter(app_name=app_name, user_id=user_pk, key__in=removed).delete()
