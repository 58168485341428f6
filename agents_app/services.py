"""Writes of apps, service accounts, API keys and end users."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from access_app.models import AuditAction, AuditLogEntry
from access_app.services import staff_action_record
from agents_app import key_cache
from agents_app.models import (
    ALL_SCOPES,
    App,
    EndUser,
    EndUserLinkProposal,
    MemoryLifetime,
    ServiceAccount,
    ServiceAccountKey,
    ServiceRequest,
)
from agents_app.runtime.agents import model_key
from core import async_database
from core.write_behind import write_behind
from sessions_app.services import IDENTIFIER_PATTERN, IDENTIFIER_RULE

# A key's last use is written at most this often: a write per request would double the
# database work of the API's hottest calls for a time nobody needs to the second.
LAST_USED_RESOLUTION = timedelta(minutes=1)
USERNAME_MAX = 150
END_USER_DIGEST_CHARS = 32


class AppError(ValueError):
    """A request about apps or keys was wrong; nothing was written."""


def app_ensure(*, name: str, title: str = "") -> tuple[App, bool]:
    """The app named ``name``, created (open to every signed-in user) if it does not exist;
    True when it was created."""
    App(name=name, title=title).full_clean(validate_unique=False)
    return App.objects.get_or_create(name=name, defaults={"title": title})


def app_tool_traits_keep(
    *, app_name: str, provider: str, model: str, traits: dict[str, bool]
) -> bool:
    """Keep on the app what was found of its model server's tools (``calls_tools``,
    ``streams_tool_choice``: by Test connection, or a refusal on a turn), so that every
    process, from its first turn, neither offers refused tools nor streams a tool decision the
    server cannot stream, and the chat says memory tools are off. A trait ``traits`` leaves
    out (not found this time) keeps what was found of the same model before. Returns whether
    the app changed; an app with no record (one of ``settings.AGENTS``) keeps nothing."""
    key = model_key(provider=provider, model=model)
    with transaction.atomic():
        app = App.objects.select_for_update().filter(name=app_name).first()
        if app is None:
            return False
        earlier = app.model_traits if (app.model_traits or {}).get("model") == key else {}
        kept = {**earlier, "model": key, **traits}
        if app.model_traits == kept:
            return False
        app.model_traits = kept
        app.save(update_fields=["model_traits"])
    return True


@dataclass(frozen=True)
class IssuedKey:
    """A key as created: ``key`` is the secret, shown once and never stored."""

    record: ServiceAccountKey
    key: str


def app_memory_lifetime_set(*, app: App, lifetime: str) -> App:
    """Choose whether the app's memories follow their sources or outlive their sessions
    (``MemoryLifetime``); applies to sessions deleted from now on (a release decides when its
    session goes, so a change never reaches back into a deletion already made). Raises
    ValueError for any other value."""
    if lifetime not in MemoryLifetime.values:
        raise ValueError(f"memory_lifetime must be one of {', '.join(MemoryLifetime.values)}")
    app.memory_lifetime = lifetime
    app.save(update_fields=["memory_lifetime", "updated_at"])
    return app


def scopes_validate(scopes: Iterable[str]) -> list[str]:
    chosen = list(dict.fromkeys(scopes))
    unknown = sorted(set(chosen) - set(ALL_SCOPES))
    if unknown:
        raise AppError(f"Unknown scopes {unknown}; the scopes are {ALL_SCOPES}.")
    if not chosen:
        raise AppError("A key needs at least one scope.")
    return chosen


def service_key_expiry_validate(*, expires_at: datetime | None) -> None:
    """``AppError`` unless a new key's expiry is None (never) or lies in the future."""
    if expires_at is not None and expires_at <= timezone.now():
        raise AppError("A key's expiry must lie in the future.")


def _key_manager_check(actor: AbstractBaseUser | None, permission: str) -> None:
    """``PermissionDenied`` unless ``actor`` is None (the command line) or active staff holding
    ``permission``: the Key managers' role (issue 43), or a superuser."""
    if actor is not None and not (
        actor.is_active and actor.is_staff and actor.has_perm(f"agents_app.{permission}")
    ):
        raise PermissionDenied("Service accounts and their keys are for Key managers.")


def _key_words(key: ServiceAccountKey) -> str:
    expiry = f"until {key.expiry_date:%Y-%m-%d %H:%M %Z}" if key.expiry_date else "no expiry"
    return f"the key {key.prefix} ({', '.join(key.scopes)}; {expiry})"


def service_key_create(
    *,
    service_account: ServiceAccount,
    name: str = "",
    scopes: Iterable[str] | None = None,
    expires_at: datetime | None = None,
    actor: AbstractBaseUser | None = None,
) -> IssuedKey:
    """A new API key of ``service_account``, with every scope unless narrowed, in the staff
    access log. ``actor``: the staff member issuing it (``PermissionDenied`` without the Key
    managers' permission), None for the command line. ``AppError`` for unknown scopes or an
    expiry that is past; nothing is made then."""
    _key_manager_check(actor, "add_serviceaccountkey")
    chosen = scopes_validate(ALL_SCOPES if scopes is None else scopes)
    service_key_expiry_validate(expires_at=expires_at)
    with transaction.atomic():
        record, key = ServiceAccountKey.objects.create_key(
            name=name or service_account.name,
            service_account=service_account,
            scopes=chosen,
            expiry_date=expires_at,
        )
        staff_action_record(
            actor=actor,
            action=AuditAction.ADD,
            object_type=ServiceAccountKey._meta.label_lower,
            object_id=record.prefix,
            reason=f"Issued {_key_words(record)} of the service account {service_account}.",
        )
    return IssuedKey(record=record, key=key)


def service_account_create(
    *,
    app: App,
    name: str,
    description: str = "",
    scopes: Iterable[str] | None = None,
    expires_at: datetime | None = None,
    actor: AbstractBaseUser | None = None,
) -> IssuedKey:
    """A service account of ``app`` and its first key (every scope unless narrowed), both in
    the staff access log. ``actor`` as for ``service_key_create`` (it needs the permission to
    add service accounts too); ``AppError`` for a name the app's accounts hold already."""
    _key_manager_check(actor, "add_serviceaccount")
    with transaction.atomic():
        try:
            account = ServiceAccount.objects.create(app=app, name=name, description=description)
        except IntegrityError:
            raise AppError(
                f"The app {app.name!r} already has a service account {name!r}."
            ) from None
        staff_action_record(
            actor=actor,
            action=AuditAction.ADD,
            object_type=ServiceAccount._meta.label_lower,
            object_id=account.pk,
            reason=f"Made the service account {account} of the app {app.name}.",
        )
        return service_key_create(
            service_account=account, name=name, scopes=scopes, expires_at=expires_at, actor=actor
        )


def service_account_change(
    *, account: ServiceAccount, actor: AbstractBaseUser, changed: Iterable[str]
) -> ServiceAccount:
    """Save ``account`` as edited (its name or description; its app is fixed once made),
    naming the ``changed`` fields in the staff access log; with none changed, nothing is
    written."""
    _key_manager_check(actor, "change_serviceaccount")
    changed = sorted(changed)
    if not changed:
        return account
    with transaction.atomic():
        account.save()
        staff_action_record(
            actor=actor,
            action=AuditAction.CHANGE,
            object_type=ServiceAccount._meta.label_lower,
            object_id=account.pk,
            reason=f"Changed the {', '.join(changed)} of the service account {account}.",
        )
    return account


def service_key_revoke(*, key: ServiceAccountKey, actor: AbstractBaseUser | None = None) -> None:
    """Revoke ``key`` for good, in the staff access log: the next request with it answers 401
    (in other processes, within ``SERVICE_KEY_CACHE_SECONDS``: ``agents_app.key_cache``).
    ``actor`` as for ``service_key_create``; revoking a revoked key logs nothing."""
    _key_manager_check(actor, "change_serviceaccountkey")
    with transaction.atomic():
        if ServiceAccountKey.objects.filter(pk=key.pk, revoked=False).update(revoked=True):
            staff_action_record(
                actor=actor,
                action=AuditAction.REVOKE,
                object_type=ServiceAccountKey._meta.label_lower,
                object_id=key.prefix,
                reason=f"Revoked {_key_words(key)} of the service account {key.service_account}.",
            )
    key_cache.key_forget(hashed_key=key.hashed_key)


def service_key_use_due(*, key: ServiceAccountKey) -> bool:
    """Whether ``key``'s last use is older than ``LAST_USED_RESOLUTION`` (or never noted)."""
    return key.last_used_at is None or timezone.now() - key.last_used_at >= LAST_USED_RESOLUTION


def service_key_used(*, key: ServiceAccountKey) -> None:
    """Note that ``key`` was used now (at most once per ``LAST_USED_RESOLUTION``)."""
    if not service_key_use_due(key=key):
        return
    now = timezone.now()
    ServiceAccountKey.objects.filter(pk=key.pk).update(last_used_at=now)
    key.last_used_at = now


_SERVICE_REQUEST_COLUMNS = (
    "created_at",
    "app_name",
    "service_account_id",
    "key_prefix",
    "method",
    "route",
    "status_code",
    "detail",
    "end_user_id",
)


def _service_request_insert_sql() -> str:
    table = ServiceRequest._meta.db_table
    columns = ", ".join(
        ServiceRequest._meta.get_field(name).column for name in _SERVICE_REQUEST_COLUMNS
    )
    values = ", ".join(["%s"] * len(_SERVICE_REQUEST_COLUMNS))
    return f"INSERT INTO {table} ({columns}) VALUES ({values}) RETURNING id"


def service_request_record(
    *,
    app_name: str,
    service_account_id: int | None,
    key_prefix: str,
    method: str,
    route: str,
    status_code: int,
    detail: str,
    end_user_id: int | None,
) -> None:
    """The audit row of one request of the service-account API and its outcome."""
    ServiceRequest.objects.create(
        app_name=app_name[:128],
        service_account_id=service_account_id,
        key_prefix=key_prefix[:16],
        method=method[:8],
        route=route[:200],
        status_code=status_code,
        detail=detail[:300],
        end_user_id=end_user_id,
    )


async def service_request_record_async(**fields) -> None:
    """``service_request_record`` from an event loop: on PostgreSQL written behind, with the
    loop's other rows of the next fraction of a second (``core.write_behind``), else a hop to
    a thread."""
    if not async_database.available():
        await sync_to_async(service_request_record)(**fields)
        return
    values = {
        "created_at": timezone.now(),
        **fields,
        "app_name": fields["app_name"][:128],
        "key_prefix": fields["key_prefix"][:16],
        "method": fields["method"][:8],
        "route": fields["route"][:200],
        "detail": fields["detail"][:300],
    }
    await write_behind(
        _service_request_insert_sql(), [values[name] for name in _SERVICE_REQUEST_COLUMNS]
    )


def end_user_username(*, app: App, external_id: str) -> str:
    """The username of the account made for ``app``'s end user ``external_id``: ``app:id``
    cut to fit, for staff to read, then ``~`` and a digest of (app id, external id).

    The digest alone tells end users apart, so no id of one app (``colx`` and ``y:z``) takes
    the account of another's (``colx:y`` and ``z``), however long the names; the ``~`` keeps
    it apart from every account made by sign-up, whose usernames cannot hold one. End users
    are found by (app, external id), never by this name."""
    digest = hashlib.sha256(json.dumps([app.pk, external_id]).encode()).hexdigest()
    digest = digest[:END_USER_DIGEST_CHARS]
    readable = f"{app.name}:{external_id}"[: USERNAME_MAX - len(digest) - 1]
    return f"{readable}~{digest}"


def end_user_app_made(*, end_user: EndUser) -> bool:
    """Whether ``end_user``'s account is the one its app made (``end_user_ensure``), rather
    than a person's own account that staff linked to it."""
    made = end_user_username(app=end_user.app, external_id=end_user.external_id)
    return end_user.user.get_username() == made


def end_user_access_record(
    *, end_user: EndUser, key: ServiceAccountKey, action: str, path: str
) -> AuditLogEntry:
    """Tell the person, in their access log, that an app's service account read or changed
    all of their data (an export, say): who did it, through which key."""
    account = key.service_account
    return AuditLogEntry.objects.create(
        actor=None,
        actor_username=f"service account {account.name} of {end_user.app.name}"[:150],
        subject_user_id=end_user.user_id,
        action=action,
        object_type="auth.user",
        object_id=str(end_user.user_id),
        reason=f"Through the service API with the key {key.prefix}.",
        path=path[:500],
    )


PERSON_ACCESS_ACTIONS = {
    "GET": AuditAction.VIEW,
    "HEAD": AuditAction.VIEW,
    "DELETE": AuditAction.DELETE,
}


def person_access_record(
    *, user_pk: int, app: App, key: ServiceAccountKey, method: str, path: str
) -> AuditLogEntry:
    """Tell a person whose own account is linked to ``app`` that its service account read
    (``GET``), deleted or changed their data through ``path``: an entry of their access log,
    as a staff member's access would be. An account the app made has no person to tell."""
    account = key.service_account
    return AuditLogEntry.objects.create(
        actor=None,
        actor_username=f"service account {account.name} of {app.name}"[:150],
        subject_user_id=user_pk,
        action=PERSON_ACCESS_ACTIONS.get(method, AuditAction.CHANGE),
        object_type="auth.user",
        object_id=str(user_pk),
        reason=f"Through the service API with the key {key.prefix} ({method}).",
        path=path[:500],
    )


def end_user_ensure(*, app: App, external_id: str) -> EndUser:
    """The end user ``external_id`` of ``app``, created with its own account on first use.

    The account has no usable password and is not staff: it can never sign in, and only the
    app's service accounts act for it.
    """
    existing = EndUser.objects.filter(app=app, external_id=external_id).select_related("user")
    found = existing.first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            user = get_user_model().objects.create_user(
                username=end_user_username(app=app, external_id=external_id), password=None
            )
            return EndUser.objects.create(app=app, external_id=external_id, user=user)
    except IntegrityError:
        # A concurrent first write made it.
        return existing.get()


def _link_log(proposal: EndUserLinkProposal, *, actor, action: str, said: str) -> None:
    """An entry of the person's access log about a link of their account to an app."""
    AuditLogEntry.objects.create(
        actor=actor,
        actor_username=(actor.get_username() if actor else "")[:150],
        subject_user_id=proposal.user_id,
        action=action,
        object_type="agents_app.enduserlinkproposal",
        object_id=str(proposal.pk),
        reason=said[:500],
    )


def end_user_link_problem(
    *, app: App, external_id: str, user: AbstractBaseUser, proposed_by: AbstractBaseUser
) -> str:
    """Why the link cannot be proposed ("" when it can): only a superuser proposes, for an id
    the app has no user of, and an account no app acts for yet (staff accounts are not
    linked: an app's key would reach a console account)."""
    if not (proposed_by.is_active and proposed_by.is_superuser):
        return "Only a superuser may propose to link an account to an app."
    if not IDENTIFIER_PATTERN.fullmatch(external_id):
        return f"A user id is {IDENTIFIER_RULE}."
    if user.is_staff or user.is_superuser:
        return "A staff account cannot be linked to an app."
    if EndUser.objects.filter(app=app, external_id=external_id).exists():
        return f"The app {app.name!r} already has a user {external_id!r}."
    if EndUser.objects.filter(user=user).exists():
        return "This account is already an app's end user."
    return ""


def end_user_link_propose(
    *, app: App, external_id: str, user: AbstractBaseUser, proposed_by: AbstractBaseUser
) -> EndUserLinkProposal:
    """Propose to link ``user``'s own account to ``app``'s end user ``external_id``: nothing is
    linked until they approve (``end_user_link_decide``); the proposal is in their access log.
    ``AppError`` saying why it cannot be proposed (``end_user_link_problem``)."""
    problem = end_user_link_problem(
        app=app, external_id=external_id, user=user, proposed_by=proposed_by
    )
    if problem:
        raise AppError(problem)
    with transaction.atomic():
        proposal = EndUserLinkProposal.objects.create(
            app=app, external_id=external_id, user=user, proposed_by=proposed_by
        )
        _link_log(
            proposal,
            actor=proposed_by,
            action=AuditAction.ADD,
            said=f"Proposed to let the app {app.name} act for you as its user "
            f"{external_id!r}; nothing happens unless you approve it in Settings.",
        )
    return proposal


def end_user_link_decide(
    *, user: AbstractBaseUser, proposal_id: int, approve: bool
) -> EndUserLinkProposal | None:
    """The person's answer to a proposal waiting for them: approved, their account becomes the
    app's end user (the app's keys reach their data from then on, every use in their access
    log); declined, nothing is linked. None when they have no such proposal waiting; ``AppError``
    when the id was taken or the account linked since it was proposed."""
    with transaction.atomic():
        proposal = (
            EndUserLinkProposal.objects.select_for_update()
            .select_related("app")
            .filter(pk=proposal_id, user=user, status=EndUserLinkProposal.Status.PROPOSED)
            .first()
        )
        if proposal is None:
            return None
        if approve:
            try:
                with transaction.atomic():
                    EndUser.objects.create(
                        app=proposal.app, external_id=proposal.external_id, user=user
                    )
            except IntegrityError:
                raise AppError(
                    "This cannot be linked any more: the app has a user of that id, or your "
                    "account is linked already."
                ) from None
        proposal.status = (
            EndUserLinkProposal.Status.APPROVED if approve else EndUserLinkProposal.Status.DECLINED
        )
        proposal.decided_at = timezone.now()
        proposal.save(update_fields=["status", "decided_at"])
        _link_log(
            proposal,
            actor=user,
            action=AuditAction.APPROVE if approve else AuditAction.REJECT,
            said=f"You {'approved' if approve else 'declined'} letting the app "
            f"{proposal.app.name} act for you as its user {proposal.external_id!r}.",
        )
    key_cache.end_user_forget(app_pk=proposal.app_id, external_id=proposal.external_id)
    return proposal
