"""Reads of apps, service accounts and end users."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet

from agents_app import key_cache
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


def key_verified(*, key: str) -> ServiceAccountKey | None:
    """``key_from_secret``, a verified key kept for ``SERVICE_KEY_CACHE_SECONDS`` by the digest
    of ``key`` (``agents_app.key_cache``)."""
    digest = key_cache.key_digest(key)
    found = key_cache.key_kept(digest=digest)
    if found is None:
        found = key_from_secret(key=key)
        if found is not None:
            key_cache.key_keep(digest=digest, key=found)
    return found


async def key_verified_async(*, key: str) -> ServiceAccountKey | None:
    """``key_verified`` from an event loop: a kept key costs no hop to a thread."""
    digest = key_cache.key_digest(key)
    found = key_cache.key_kept(digest=digest)
    if found is None:
        found = await sync_to_async(key_from_secret)(key=key)
        if found is not None:
            key_cache.key_keep(digest=digest, key=found)
    return found


async def end_user_pk_async(*, app: App, external_id: str, afresh: bool = False) -> int | None:
    """The account id of the app's end user ``external_id``, None for an unknown one; kept for
    ``SERVICE_KEY_CACHE_SECONDS`` unless ``afresh`` (a caller that found nothing of a kept
    account looks again afresh: it may have been deleted and made anew)."""
    if not afresh:
        kept = key_cache.end_user_pk_kept(app_pk=app.pk, external_id=external_id)
        if kept is not None:
            return kept
    user_pk = (
        await EndUser.objects.filter(app=app, external_id=external_id)
        .values_list("user_id", flat=True)
        .afirst()
    )
    if user_pk is None:
        key_cache.end_user_forget(app_pk=app.pk, external_id=external_id)
    else:
        key_cache.end_user_keep(app_pk=app.pk, external_id=external_id, user_pk=user_pk)
    return user_pk
