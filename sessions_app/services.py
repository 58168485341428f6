"""Writes of the session store, and ``SessionService``, its ADK-shaped async facade.

State changes only through events: ``event_append`` stores an event and applies
its ``state_delta`` to the three stored scopes in one short transaction. The
transaction starts by bumping the session's ``last_sequence`` with an UPDATE,
which takes the session row lock; concurrent appends to one session therefore
queue on that lock and get contiguous sequence numbers, and no caller ever sees
a "stale session" error. State rows are then upserted key by key (so writers
never overwrite each other's keys) in a fixed order: session, user, app, keys
sorted, so two sessions of one user cannot deadlock on shared ``user:`` keys.
The statements themselves live in ``sessions_app.storage``; on PostgreSQL an
append is all of that in a single statement, one round trip to the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from chatapp import async_database
from sessions_app import selectors, storage
from sessions_app.errors import (
    DuplicateEventError,
    InvalidEventError,
    InvalidStateError,
    InvocationNotFoundError,
    SessionAlreadyExistsError,
    SessionNotFoundError,
    SessionStoreError,
)
from sessions_app.event_codec import event_to_record_fields
from sessions_app.events import Event, EventActions, new_event_id, new_invocation_id
from sessions_app.models import EventRecord, SessionRecord, SessionState
from sessions_app.state import (
    APP_PREFIX,
    TEMP_PREFIX,
    USER_PREFIX,
    ScopedState,
    state_merge,
    state_split,
)
from sessions_app.types import GetSessionConfig, ListSessionsResponse, Session

IDENTIFIER_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
MAX_NAME_LENGTH = 128
MAX_BRANCH_LENGTH = 512


def identifier_validate(*, value: Any, what: str) -> str:
    if not isinstance(value, str) or not IDENTIFIER_PATTERN.fullmatch(value):
        raise SessionStoreError(
            f"{what} must be 1-128 characters of letters, digits and . _ : @ -, "
            f"starting with a letter or digit; got {str(value)[:60]!r}."
        )
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
) -> Session:
    """Create a session; ``user:`` and ``app:`` keys of ``state`` go to their shared scopes.

    ``temp:`` keys are dropped, as nothing outlives an invocation. A
    ``session_id`` already in use (by anyone) is refused. A ``temporary``
    session is a chat that neither reads nor writes long-term memory.
    """
    identifier_validate(value=app_name, what="app_name")
    if session_id is None:
        session_id = new_event_id()
    identifier_validate(value=session_id, what="session_id")
    scoped = state_split(state)
    scoped.temp.clear()
    user_pk = _user_pk_require(user_id)
    now = time.time()
    try:
        with transaction.atomic():
            SessionRecord.objects.create(
                id=session_id,
                app_name=app_name,
                user_id=user_pk,
                last_update_time=now,
                initial_state=scoped.session,
                temporary=temporary,
            )
            storage.state_rows_upsert(
                session_id=session_id, user_pk=user_pk, app_name=app_name, scoped=scoped
            )
    except IntegrityError:
        raise SessionAlreadyExistsError(
            f"A session with id {session_id!r} already exists."
        ) from None
    by_session, user_state, app_state = selectors.scoped_states_get(
        session_ids=[session_id], app_name=app_name, user_pk=user_pk
    )
    return Session(
        id=session_id,
        app_name=app_name,
        user_id=str(user_pk),
        state=state_merge(session=by_session.get(session_id, {}), user=user_state, app=app_state),
        last_update_time=now,
    )


def _event_validate(event: Event) -> dict[str, Any]:
    """The record fields of an event, or InvalidEventError; writes nothing."""
    if not event.author or len(event.author) > MAX_NAME_LENGTH:
        raise InvalidEventError("An event needs an author of 1-128 characters.")
    if len(event.invocation_id) > MAX_NAME_LENGTH or len(event.id) > MAX_NAME_LENGTH:
        raise InvalidEventError("Event and invocation ids are at most 128 characters.")
    if len(event.branch or "") > MAX_BRANCH_LENGTH or len(event.error_code or "") > MAX_NAME_LENGTH:
        raise InvalidEventError("branch is at most 512 characters and error_code at most 128.")
    if not math.isfinite(event.timestamp):
        raise InvalidEventError("The event timestamp must be a finite number of seconds.")
    plain_texts = (
        event.id,
        event.invocation_id,
        event.author,
        event.branch,
        event.error_code,
        event.error_message,
    )
    if any("\x00" in text for text in plain_texts if text):
        raise InvalidEventError("Event fields cannot contain NUL characters.")
    fields = event_to_record_fields(event)
    try:
        encoded = json.dumps(
            [fields["content"], fields["actions"], fields["custom_metadata"]], allow_nan=False
        )
    except (TypeError, ValueError) as error:
        raise InvalidEventError(f"The event is not JSON-serialisable: {error}.") from None
    if "\\u0000" in encoded:
        raise InvalidEventError("Event content cannot contain NUL characters.")
    size = len(encoded.encode())
    if size > settings.MAX_EVENT_BYTES:
        raise InvalidEventError(
            f"The event is {size} bytes; events are limited to {settings.MAX_EVENT_BYTES} bytes."
        )
    return fields


class _PendingAppend(NamedTuple):
    """An event checked for storing: its record fields, its delta split by scope."""

    fields: dict[str, Any]
    scoped: ScopedState
    user_pk: int
    original_delta: dict[str, Any]


def _append_begin(*, session: Session, event: Event) -> _PendingAppend:
    """Check ``event`` for ``session`` and strip its ``temp:`` keys from the delta it will be
    stored with; raises (the event as it was) if it cannot be stored."""
    delta = event.actions.state_delta
    scoped = state_split(delta)
    event.actions.state_delta = {
        key: value for key, value in delta.items() if not key.startswith(TEMP_PREFIX)
    }
    try:
        fields = _event_validate(event)
        user_pk = selectors.user_pk_from_id(session.user_id)
        if user_pk is None:
            raise SessionNotFoundError(f"Session {session.id!r} not found.")
    except SessionStoreError:
        event.actions.state_delta = delta
        raise
    return _PendingAppend(fields=fields, scoped=scoped, user_pk=user_pk, original_delta=delta)


@contextlib.contextmanager
def _append_storing(*, event: Event, pending: _PendingAppend) -> Iterator[None]:
    """Around storing a pending append: if it fails, however it fails, the event gets its
    whole delta back; an event id the session already has reads as ``DuplicateEventError``."""
    try:
        yield
    except IntegrityError:
        event.actions.state_delta = pending.original_delta
        raise DuplicateEventError(
            f"An event with id {event.id!r} is already stored in this session."
        ) from None
    except BaseException:
        event.actions.state_delta = pending.original_delta
        raise


def _append_end(
    *, session: Session, event: Event, pending: _PendingAppend, last_update_time: float
) -> Event:
    for key, value in pending.scoped.temp.items():
        session.state[TEMP_PREFIX + key] = value
    session.state.update(event.actions.state_delta)
    session.events.append(event)
    session.last_update_time = last_update_time
    return event


def event_append(*, session: Session, event: Event) -> Event:
    """Store ``event`` in ``session`` and apply its state delta, atomically.

    Partial events are returned untouched and not stored. ``temp:`` keys are
    applied to ``session.state`` (the rest of the invocation sees them) and
    removed from the event before it is stored. On success ``session`` is
    updated in place like ADK's: state, events, last_update_time.
    """
    if event.partial:
        return event
    pending = _append_begin(session=session, event=event)
    with _append_storing(event=event, pending=pending):
        last_update_time = storage.event_store(
            session_id=session.id,
            app_name=session.app_name,
            user_pk=pending.user_pk,
            fields=pending.fields,
            scoped=pending.scoped,
        )
    return _append_end(
        session=session, event=event, pending=pending, last_update_time=last_update_time
    )


async def _event_append_async(*, session: Session, event: Event) -> Event:
    """``event_append`` from an event loop, its one statement on the loop's own connection
    (PostgreSQL)."""
    if event.partial:
        return event
    pending = _append_begin(session=session, event=event)
    with _append_storing(event=event, pending=pending):
        last_update_time = await storage.event_store_async(
            session_id=session.id,
            app_name=session.app_name,
            user_pk=pending.user_pk,
            fields=pending.fields,
            scoped=pending.scoped,
        )
    return _append_end(
        session=session, event=event, pending=pending, last_update_time=last_update_time
    )


def session_delete(*, app_name: str, user_id: str, session_id: str) -> bool:
    """Delete the user's session with its events and session state; False if there was none."""
    user_pk = selectors.user_pk_from_id(user_id)
    if user_pk is None:
        return False
    deleted, _ = SessionRecord.objects.filter(
        pk=session_id, app_name=app_name, user_id=user_pk
    ).delete()
    return deleted > 0


def session_rename(*, user_pk: int, session_id: str, title: str) -> bool:
    """Set the title shown in the session list; False if the user has no such session.

    The title is presentation only, so renaming does not count as activity
    (``last_update_time`` is left alone and the list order does not change).
    """
    title = " ".join(str(title).split())
    if len(title) > 200:
        raise SessionStoreError("A session title is at most 200 characters.")
    return SessionRecord.objects.filter(pk=session_id, user_id=user_pk).update(title=title) > 0


def _session_state_replay(
    *, initial_state: dict[str, Any], actions_list: list[dict]
) -> dict[str, Any]:
    """Session-scope state after the given events' actions, from the creation state.

    A rewind event's ``None`` means "the key did not exist", so it deletes;
    any other event's ``None`` is a value like the others.
    """
    state = dict(initial_state)
    for actions in actions_list:
        is_rewind = bool(actions.get("rewind_before_invocation_id"))
        for key, value in (actions.get("state_delta") or {}).items():
            if key.startswith((APP_PREFIX, USER_PREFIX)):
                continue
            if value is None and is_rewind:
                state.pop(key, None)
            else:
                state[key] = value
    return state


def session_rewind(
    *, app_name: str, user_id: str, session_id: str, rewind_before_invocation_id: str
) -> Event:
    """Revert the session to just before an invocation, in one transaction.

    Session-scope state becomes what it was before the invocation's first
    event (``user:`` and ``app:`` state is shared with other sessions and is
    left alone, as in ADK). That event and every later one stay stored but are
    marked rewound, out of the history. The rewind is itself stored as an event
    whose ``state_delta`` records the restoring changes (``None`` for a key
    that did not exist then).
    """
    user_pk = selectors.user_pk_from_id(user_id)
    if user_pk is None:
        raise SessionNotFoundError(f"Session {session_id!r} not found.")
    with transaction.atomic():
        sequence, last_update_time = storage.sequence_claim(
            session_id=session_id, app_name=app_name, user_pk=user_pk, now=time.time()
        )
        visible = EventRecord.objects.filter(session_id=session_id, rewound=False)
        first = (
            visible.filter(invocation_id=rewind_before_invocation_id)
            .order_by("sequence")
            .values_list("sequence", flat=True)
            .first()
        )
        if first is None:
            raise InvocationNotFoundError(
                f"No invocation {rewind_before_invocation_id!r} in the session's history."
            )
        initial_state = SessionRecord.objects.filter(pk=session_id).values_list(
            "initial_state", flat=True
        )[0]
        target = _session_state_replay(
            initial_state=initial_state,
            actions_list=list(
                visible.filter(sequence__lt=first)
                .order_by("sequence")
                .values_list("actions", flat=True)
            ),
        )
        current = dict(
            SessionState.objects.filter(session_id=session_id).values_list("key", "value")
        )
        missing = object()
        delta = {key: value for key, value in target.items() if current.get(key, missing) != value}
        removed = sorted(key for key in current if key not in target)
        delta.update({key: None for key in removed})
        visible.filter(sequence__gte=first).update(rewound=True)
        if removed:
            SessionState.objects.filter(session_id=session_id, key__in=removed).delete()
        changed = ScopedState(session={key: target[key] for key in delta if key in target})
        storage.state_rows_upsert(
            session_id=session_id, user_pk=user_pk, app_name=app_name, scoped=changed
        )
        event = Event(
            invocation_id=new_invocation_id(),
            author="user",
            actions=EventActions(
                state_delta=delta, rewind_before_invocation_id=rewind_before_invocation_id
            ),
            timestamp=last_update_time,
        )
        EventRecord.objects.create(
            session_id=session_id, sequence=sequence, **event_to_record_fields(event)
        )
    return event


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


# Rows a read may bring back for its answer to be built on the event loop. Building
# a long history is milliseconds of CPU (about 10 ms for 2,000 events): on the
# loop it would hold up every other socket of the process, so it goes to a thread.
ROWS_ASSEMBLED_ON_LOOP = 200


async def _store_read(read: selectors.StoreRead) -> Any:
    """The answer of ``read``, from async code: without a thread on PostgreSQL."""
    if not read.statements:
        return read.assemble([])
    if not async_database.available():
        return await sync_to_async(selectors.store_read_run)(read)
    results = await async_database.fetch_each(read.statements)
    if sum(len(rows) for rows in results) > ROWS_ASSEMBLED_ON_LOOP:
        return await asyncio.to_thread(read.assemble, results)
    return read.assemble(results)


class SessionService:
    """ADK's ``BaseSessionService`` API over the Django store: same names, same arguments.

    On PostgreSQL reads and appends go from the event loop itself
    (``chatapp.async_database``); every other call, and every call on SQLite,
    runs its whole database work in one ``sync_to_async`` hop.
    Errors are ``SessionStoreError`` subclasses (``ValueError``s).
    """

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        return await sync_to_async(session_create)(
            app_name=app_name, user_id=user_id, state=state, session_id=session_id
        )

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        return await _store_read(
            selectors.session_get_read(
                app_name=app_name, user_id=user_id, session_id=session_id, config=config
            )
        )

    async def list_sessions(
        self,
        *,
        app_name: str,
        user_id: str,
        page_size: int = selectors.DEFAULT_PAGE_SIZE,
        page_token: str | None = None,
    ) -> ListSessionsResponse:
        return await _store_read(
            selectors.session_list_read(
                app_name=app_name, user_id=user_id, page_size=page_size, page_token=page_token
            )
        )

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await sync_to_async(session_delete)(
            app_name=app_name, user_id=user_id, session_id=session_id
        )

    async def append_event(self, session: Session, event: Event) -> Event:
        if async_database.available():
            return await _event_append_async(session=session, event=event)
        return await sync_to_async(event_append)(session=session, event=event)

    async def rewind_session(
        self, *, app_name: str, user_id: str, session_id: str, rewind_before_invocation_id: str
    ) -> Event:
        return await sync_to_async(session_rewind)(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            rewind_before_invocation_id=rewind_before_invocation_id,
        )


__all__ = [
    "GetSessionConfig",
    "InvalidStateError",
    "ListSessionsResponse",
    "SessionService",
    "event_append",
    "session_create",
    "session_delete",
    "session_rewind",
    "sessions_expire_idle",
]
