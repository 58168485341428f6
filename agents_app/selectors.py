"""Reads of apps, service accounts and end users."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection
from django.db.models import Count, IntegerField, Q, QuerySet, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from access_app.selectors import AuditSubject
from agents_app import key_cache
from agents_app.models import App, EndUser, EndUserLinkProposal, ServiceAccountKey
from sessions_app.models import EventRecord, SessionRecord
from sessions_app.selectors import StoreRead
from sessions_app.selectors.model_calls import ModelUsage

_qn = connection.ops.quote_name


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


# The fields of an app that its agent and the browser's access rule read.
_APP_FIELDS = (
    "id",
    "name",
    "open_to_all",
    "agent_name",
    "provider",
    "model",
    "instruction",
    "tools",
    "output_key",
    "preload_memories",
    "memory_tools",
    "max_steps",
    "keep_last_invocations",
    "token_budget",
    "summarize_after_invocations",
    "max_events_loaded",
    "pii_redaction",
    "model_traits",
)


def _app_for_user_sql() -> str:
    """The app named by the first parameter, its fields (``_APP_FIELDS``, JSON as text), then
    whether the user of the second parameter is an end user of any app, and whether one of
    their groups may use this app (parameters: name, user pk, user pk)."""
    columns = [
        f"CAST(a.{_qn(field.column)} AS TEXT)"
        if field.get_internal_type() == "JSONField"
        else f"a.{_qn(field.column)}"
        for field in (App._meta.get_field(name) for name in _APP_FIELDS)
    ]
    groups = App.allowed_groups.through
    app_column = _qn(groups._meta.get_field("app").column)
    group_column = _qn(groups._meta.get_field("group").column)
    user_groups = App.allowed_groups.field.related_model.user_set.through
    member_user = _qn(user_groups._meta.get_field("user").column)
    member_group = _qn(user_groups._meta.get_field("group").column)
    end_user_column = _qn(EndUser._meta.get_field("user").column)
    return (
        f"SELECT {', '.join(columns)},"
        f" EXISTS (SELECT 1 FROM {_qn(EndUser._meta.db_table)} e"
        f" WHERE e.{end_user_column} = %s),"
        f" EXISTS (SELECT 1 FROM {_qn(groups._meta.db_table)} g"
        f" JOIN {_qn(user_groups._meta.db_table)} m ON m.{member_group} = g.{group_column}"
        f" WHERE g.{app_column} = a.{_qn(App._meta.pk.column)} AND m.{member_user} = %s)"
        f" FROM {_qn(App._meta.db_table)} a WHERE a.{_qn(App._meta.get_field('name').column)} = %s"
    )


_APP_FOR_USER_SQL = _app_for_user_sql()


def _app_from_row(row: tuple[Any, ...]) -> App:
    values = dict(zip(_APP_FIELDS, row, strict=True))
    values["tools"] = json.loads(values["tools"]) if values["tools"] is not None else []
    values["model_traits"] = json.loads(values["model_traits"] or "{}")
    for name in ("open_to_all", "preload_memories", "memory_tools"):
        values[name] = bool(values[name])
    if values["pii_redaction"] is not None:
        values["pii_redaction"] = bool(values["pii_redaction"])
    return App(**values)


def app_for_user_read(*, app_name: str, user: AbstractBaseUser) -> StoreRead:
    """The app named ``app_name`` (None when there is none) and whether ``user`` may chat in it
    (the rule of ``app_usable_by``), in one statement: for the chat socket, which reads it
    before every turn, from the event loop on PostgreSQL (``store_read_async``). The app is an
    unsaved copy holding the fields its agent is made of, for ``agent_from_app``."""

    def assemble(results: list[list[tuple]]) -> tuple[App, bool] | None:
        if not results[0]:
            return None
        row = results[0][0]
        app = _app_from_row(row[: len(_APP_FIELDS)])
        end_user, in_group = (bool(value) for value in row[len(_APP_FIELDS) :])
        usable = (
            user.is_authenticated
            and user.is_active
            and not end_user
            and (app.open_to_all or user.is_superuser or in_group)
        )
        return app, bool(usable)

    return StoreRead([(_APP_FOR_USER_SQL, [user.pk, user.pk, app_name])], assemble)


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


async def end_user_account_async(
    *, app: App, external_id: str, afresh: bool = False
) -> tuple[int, str] | None:
    """The account id and username of the app's end user ``external_id``, None for an unknown
    one; kept for ``SERVICE_KEY_CACHE_SECONDS`` unless ``afresh`` (a caller that found nothing
    of a kept account looks again afresh: it may have been deleted and made anew). The
    username tells an account the app made from a person's own (``end_user_app_made``)."""
    if not afresh:
        kept = key_cache.end_user_kept(app_pk=app.pk, external_id=external_id)
        if kept is not None:
            return kept
    account = (
        await EndUser.objects.filter(app=app, external_id=external_id)
        .values_list("user_id", "user__username")
        .afirst()
    )
    if account is None:
        key_cache.end_user_forget(app_pk=app.pk, external_id=external_id)
        return None
    key_cache.end_user_keep(
        app_pk=app.pk, external_id=external_id, user_pk=account[0], username=account[1]
    )
    return account[0], account[1]


def end_user_proposals_waiting(*, user: AbstractBaseUser) -> QuerySet[EndUserLinkProposal]:
    """The proposals to link ``user``'s account to an app that wait for their answer."""
    return EndUserLinkProposal.objects.filter(
        user=user, status=EndUserLinkProposal.Status.PROPOSED
    ).select_related("app", "proposed_by")


def link_proposals_describe(
    user: AbstractBaseUser, object_ids: set[str]
) -> dict[str, AuditSubject]:
    """How the access log names the proposals to link ``user``'s account to an app: the app
    and the id it would know them by (one waiting is answered on the Settings page)."""
    ids = [int(each) for each in object_ids if each.isdigit()]
    described = {}
    for proposal in EndUserLinkProposal.objects.filter(user=user, pk__in=ids).select_related("app"):
        described[str(proposal.pk)] = AuditSubject(
            f"the app {proposal.app.name} acting for you as its user {proposal.external_id!r}"
        )
    return described


def app_model_usage(*, app_name: str, since: datetime) -> ModelUsage:
    """The app's chat turns' model usage since ``since``, summed from their events (each model
    call's event keeps the server's counts in ``usage_metadata``, empty when the server
    reported none: ``unreported``). The app's sessions touched since then are found by their
    update time's index, their events by (session, timestamp)."""
    after = since.timestamp()
    sessions = SessionRecord.objects.filter(app_name=app_name, last_update_time__gte=after)
    events = EventRecord.objects.filter(
        session__in=sessions, timestamp__gte=after, usage_metadata__isnull=False
    )
    totals = events.aggregate(
        calls=Count("pk"),
        unreported=Count("pk", filter=~Q(usage_metadata__has_key="prompt_token_count")),
        prompt=Sum(Cast(KT("usage_metadata__prompt_token_count"), IntegerField())),
        completion=Sum(Cast(KT("usage_metadata__candidates_token_count"), IntegerField())),
    )
    return ModelUsage(
        calls=totals["calls"],
        prompt_tokens=totals["prompt"] or 0,
        completion_tokens=totals["completion"] or 0,
        unreported=totals["unreported"],
    )
