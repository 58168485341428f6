"""Reads of apps, service accounts and end users."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from agents_app.models import App, EndUser, ServiceAccountKey


def app_get(*, name: str) -> App | None:
    return App.objects.filter(name=name).first()


def app_usable_by(*, app: App, user: AbstractBaseUser | AnonymousUser) -> bool:
    """Whether ``user`` may chat in ``app`` in the browser: an active signed-in user, and the
    app open to all or the user in one of its groups (a superuser may use every app). End
    users of an app reach it only through its service accounts, never in the browser."""
    if not user.is_authenticated or not user.is_active or hasattr(user, "end_user"):
        return False
    if app.open_to_all or user.is_superuser:
        return True
    return app.allowed_groups.filter(pk__in=user.groups.values("pk")).exists()


def apps_usable_by(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[App]:
    """The apps ``user`` may chat in, by title then name."""
    if not user.is_authenticated or not user.is_active or hasattr(user, "end_user"):
        return App.objects.none()
    apps = App.objects.all()
    if not user.is_superuser:
        apps = apps.filter(Q(open_to_all=True) | Q(allowed_groups__user=user)).distinct()
    return apps.order_by("title", "name")


def end_user_get(*, app: App, external_id: str) -> EndUser | None:
    return EndUser.objects.filter(app=app, external_id=external_id).select_related("user").first()


def end_users_of(*, app: App) -> QuerySet[EndUser]:
    return EndUser.objects.filter(app=app).order_by("external_id", "pk")


def key_from_secret(*, key: str) -> ServiceAccountKey | None:
    """The key that ``key`` (``prefix.secret``) is, with its service account and app; None for
    an unknown or malformed one (a revoked or expired key is returned: the caller says why)."""
    prefix, dot, _ = key.partition(".")
    if not dot:
        return None
    found = (
        ServiceAccountKey.objects.select_related("service_account__app")
        .filter(prefix=prefix)
        .first()
    )
    return found if found is not None and found.is_valid(key) else None
