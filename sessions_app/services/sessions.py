"""Writes of sessions themselves: create, rename, delete, expire when idle."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from sessions_app import selectors, storage
from sessions_app.app_policy import app_policy_get
from sessions_app.errors import SessionAlreadyExistsError, SessionStoreError
from sessions_app.events import Event, new_event_id
from sessions_app.models import SessionRecord
from sessions_app.services.events import event_append
from sessions_app.state import state_merge, state_split
from sessions_app.types import Session

# ADK's ids: any non-empty string, up to the 128 characters of ADK's database service's id
# columns; only what no database stores (a NUL character, a lone surrogate) is refused.
IDENTIFIER_PATTERN = re.compile(r"^[^\x00\ud800-\udfff]{1,128}\Z")
IDENTIFIER_MAX_LENGTH = 128
IDENTIFIER_RULE = f"1-{IDENTIFIER_MAX_LENGTH} characters, any but a NUL character"


def identifier_validate(*, value: Any, what: str) -> str:
    if not isinstance(value, str) or not IDENTIFIER_PATTERN.fullmatch(value):
        raise SessionStoreError(f"{what} must be {IDENTIFIER_RULE}; got {str(value)[:60]!r}.")
    return value


def _user_pk_require(user_id: str) -> int:
    user_pk = selectors.user_pk_from_id(user_id)
    if user_pk is None or not get_user_model().objects.filter(pk=user_pk).exists():
        raise SessionStoreError(f"user_id {str(user_id)[:40]!r} does not name a user.")
    return user_pk


def session_create(
    *,
    app_name: str,
    user_id: str,
    state: dict[str, Any] | None = None,
    session_id: str | None = None,
    temporary: bool = False,
    memory_only: bool = False,
) -> Session:
    """Create a session; ``user:`` and ``app:`` keys of ``state`` go to their shared scopes.

    ``temp:`` keys are dropped, as nothing outlives an invocation. Ids are unique within
    the (app, user), as ADK's are: a ``session_id`` the user already has in the app is
    refused (SessionAlreadyExistsError), whoever else holds the same id. A ``temporary``
    session is a chat that neither reads nor writes long-term memory; a ``memory_only``
    one holds events given to long-term memory alone (``memory_events_store``). The state is
    stored as the app lets it be (its PII redaction).
    """
    identifier_validate(value=app_name, what="app_name")
    if session_id is None:
        session_id = new_event_id()
    identifier_validate(value=session_id, what="session_id")
    scoped = state_split(app_policy_get().value_prepare(app_name=app_name, value=state))
    scoped.temp.clear()
    user_pk = _user_pk_require(user_id)
    now = time.time()
    try:
        with transaction.atomic():
            record = SessionRecord.objects.create(
                session_id=session_id,
                app_name=app_name,
                user_id=user_pk,
                last_update_time=now,
                initial_state=scoped.session,
                temporary=temporary,
                memory_only=memory_only,
            )
            storage.state_rows_upsert(
                session_key=record.key, user_pk=user_pk, app_name=app_name, scoped=scoped
            )
    except IntegrityError:
        raise SessionAlreadyExistsError(
            f"Session {session_id!r} already exists in app {app_name!r} for this user."
        ) from None
    by_session, user_state, app_state = selectors.scoped_states_get(
        session_keys=[record.key], app_name=app_name, user_pk=user_pk
    )
    return Session(
        id=session_id,
        app_name=app_name,
        user_id=str(user_pk),
        state=state_merge(session=by_session.get(session_id, {}), user=user_state, app=app_state),
        last_update_time=now,
    )


def memory_events_store(*, app_name: str, user_id: str, events: list[Event]) -> str:
    """The key of the session holding ``events`` for long-term memory only, as ADK's
    ``add_events_to_memory`` means them: a new session of the user that no conversation,
    session list or search shows (``memory_only``), so a memory job reads them and each
    memory links to its event, while the model never sees them in a conversation. Their
    state deltas are not applied: they change no state. One transaction: all are stored, or
    none. Repeated ids are stored once.
    """
    with transaction.atomic():
        session = session_create(
            app_name=app_name,
            user_id=user_id,
            session_id=f"memory-{new_event_id()}",
            memory_only=True,
        )
        seen: set[str] = set()
        for event in events:
            if event.id in seen:
                continue
            seen.add(event.id)
            event = event.model_copy(deep=True)
            event.actions.state_delta = {}
            event_append(session=session, event=event)
    return selectors.session_key_get(app_name=app_name, user_pk=int(user_id), session_id=session.id)


def session_delete(*, app_name: str, user_id: str, session_id: str) -> bool:
    """Delete the user's session with its events and session state; False if there was none."""
    user_pk = selectors.user_pk_from_id(user_id)
    if user_pk is None:
        return False
    deleted, _ = SessionRecord.objects.filter(
        session_id=session_id, app_name=app_name, user_id=user_pk
    ).delete()
    return deleted > 0


def session_rename(
    *, user_pk: int, session_id: str, title: str, app_name: str | None = None
) -> bool:
    """Set the title shown in the session list; False if the user has no such session (in
    ``app_name``, or in the one app where they hold the id when none is named).

    The title is presentation only, so renaming does not count as activity
    (``last_update_time`` is left alone and the list order does not change). It is stored as
    the app lets it be (its PII redaction): the title the chat makes from a first message
    comes here too.
    """
    title = " ".join(str(title).split())
    limit = SessionRecord._meta.get_field("title").max_length
    if len(title) > limit:
        raise SessionStoreError(f"A session title is at most {limit} characters.")
    try:
        record = selectors.session_record_get(
            user_pk=user_pk, session_id=session_id, app_name=app_name
        )
    except selectors.AmbiguousSessionError:
        return False
    if record is None:
        return False
    title = app_policy_get().value_prepare(app_name=record.app_name, value=title)[:limit]
    return SessionRecord.objects.filter(pk=record.pk).update(title=title) > 0


def sessions_temporary_expire(*, now: datetime | None = None) -> int:
    """Delete the temporary chats created longer ago than ``TEMPORARY_CHAT_RETENTION_DAYS``
    (their memories need no settling: a temporary chat makes none), a batch per transaction;
    returns how many went. Safe to run twice or concurrently."""
    days = settings.TEMPORARY_CHAT_RETENTION_DAYS
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    total = 0
    while True:
        with transaction.atomic():
            ids = list(
                SessionRecord.objects.filter(temporary=True, created_at__lt=cutoff)
                .order_by("created_at")
                .values_list("pk", flat=True)[: settings.SESSION_CLEANUP_BATCH_SIZE]
            )
            if not ids:
                return total
            SessionRecord.objects.filter(pk__in=ids, temporary=True).delete()
        total += len(ids)


def sessions_expire_idle(*, now: float | None = None, batch_size: int | None = None) -> int:
    """Delete sessions idle longer than ``SESSION_IDLE_TTL_SECONDS``, a batch per transaction.

    Returns how many were deleted. Short batches keep each transaction (and
    the locks of cascading deletes) brief while the app goes on serving.
    """
    ttl = settings.SESSION_IDLE_TTL_SECONDS
    if ttl <= 0:
        return 0
    cutoff = (now if now is not None else time.time()) - ttl
    batch_size = batch_size or settings.SESSION_CLEANUP_BATCH_SIZE
    total = 0
    while True:
        with transaction.atomic():
            ids = list(
                SessionRecord.objects.filter(last_update_time__lt=cutoff)
                .order_by("last_update_time")
                .values_list("pk", flat=True)[:batch_size]
            )
            if not ids:
                return total
            SessionRecord.objects.filter(pk__in=ids, last_update_time__lt=cutoff).delete()
        total += len(ids)
