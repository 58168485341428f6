"""Writes of events: an append (sync, or from an event loop on PostgreSQL) and a rewind.

State changes only through events: ``event_append`` stores an event and applies
its ``state_delta`` to the three stored scopes in one short transaction (one
statement on PostgreSQL, ``sessions_app.storage``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

from asgiref.sync import sync_to_async
from django.db import IntegrityError, transaction
from django.db.models import Q

from core.async_database import StoreRead
from sessions_app import selectors, storage
from sessions_app.errors import (
    DuplicateEventError,
    InvocationNotFoundError,
    SessionNotFoundError,
    SessionStoreError,
)
from sessions_app.event_blobs import PendingBlob, event_blobs_discard, event_blobs_store
from sessions_app.event_codec import event_to_record_fields
from sessions_app.events import (
    Event,
    EventActions,
    new_invocation_id,
)
from sessions_app.models import EventRecord, SessionRecord, SessionState
from sessions_app.services.event_checks import event_validate
from sessions_app.signals import session_rewound
from sessions_app.state import (
    APP_PREFIX,
    TEMP_PREFIX,
    USER_PREFIX,
    ScopedState,
    state_split,
)
from sessions_app.types import Session, SessionRevision


class _PendingAppend(NamedTuple):
    """An event checked for storing: the arguments of ``storage.event_store``, the ``temp:``
    keys it will not store, and the delta the event came with."""

    store_arguments: dict[str, Any]
    temp: dict[str, Any]
    original_delta: dict[str, Any]
    blobs: list[PendingBlob]


def _append_begin(
    *, session: Session, event: Event, revision: SessionRevision | None = None
) -> _PendingAppend:
    """Check ``event`` for ``session`` and strip its ``temp:`` keys from the delta it will be
    stored with; raises (the event as it was) if it cannot be stored."""
    delta = event.actions.state_delta
    scoped = state_split(delta)
    event.actions.state_delta = {
        key: value for key, value in delta.items() if not key.startswith(TEMP_PREFIX)
    }
    try:
        user_pk = selectors.user_pk_from_id(session.user_id)
        if user_pk is None:
            raise SessionNotFoundError(
                f"Session {session.id!r} not found in app {session.app_name!r}."
            )
        fields, blobs = event_validate(event, user_pk=user_pk)
    except SessionStoreError:
        event.actions.state_delta = delta
        raise
    return _PendingAppend(
        store_arguments={
            "session_id": session.id,
            "app_name": session.app_name,
            "user_pk": user_pk,
            "fields": fields,
            "scoped": scoped,
            "revision": revision,
        },
        temp=scoped.temp,
        original_delta=delta,
        blobs=blobs,
    )


def _blobs_arguments(pending: _PendingAppend) -> dict[str, Any]:
    arguments = pending.store_arguments
    return {
        "session_id": arguments["session_id"],
        "app_name": arguments["app_name"],
        "user_pk": arguments["user_pk"],
        "blobs": pending.blobs,
    }


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
    *, session: Session, event: Event, pending: _PendingAppend, place: tuple[int, float]
) -> selectors.StoredEvent:
    sequence, last_update_time = place
    for key, value in pending.temp.items():
        session.state[TEMP_PREFIX + key] = value
    session.state.update(event.actions.state_delta)
    session.events.append(event)
    session.last_update_time = last_update_time
    return selectors.StoredEvent(sequence=sequence, rewound=False, event=event)


def event_append(*, session: Session, event: Event) -> Event:
    """Store ``event`` in ``session`` and apply its state delta, atomically.

    Partial events are returned untouched and not stored. ``temp:`` keys are
    applied to ``session.state`` (the rest of the invocation sees them) and
    removed from the event before it is stored. On success ``session`` is
    updated in place like ADK's: state, events, last_update_time.
    """
    if event.partial:
        return event
    return event_append_stored(session=session, event=event).event


def event_append_stored(
    *, session: Session, event: Event, revision: SessionRevision | None = None
) -> selectors.StoredEvent:
    """``event_append`` of an event that is not partial, answering the event as stored (as
    ``selectors.stored_event_get`` would read it back just after): whoever shows it next
    needs no read of its own. With ``revision``, the writer's copy of the session, a stale
    copy raises StaleSessionError and stores nothing, as ADK's database service does."""
    pending = _append_begin(session=session, event=event, revision=revision)
    with _append_storing(event=event, pending=pending):
        blob_ids = event_blobs_store(**_blobs_arguments(pending)) if pending.blobs else []
        try:
            place = storage.event_store(**pending.store_arguments)
        except BaseException:
            event_blobs_discard(blob_ids)
            raise
    return _append_end(session=session, event=event, pending=pending, place=place)


async def event_append_stored_async(
    *,
    session: Session,
    event: Event,
    then: StoreRead | None = None,
    revision: SessionRevision | None = None,
) -> tuple[selectors.StoredEvent, Any]:
    """``event_append_stored`` from an event loop, its one statement on the loop's own
    connection (PostgreSQL); with the answer of ``then``, whose statements follow in the same
    round trip and transaction (None without)."""
    pending = _append_begin(session=session, event=event, revision=revision)
    with _append_storing(event=event, pending=pending):
        blob_ids = (
            await sync_to_async(event_blobs_store)(**_blobs_arguments(pending))
            if pending.blobs
            else []
        )
        try:
            place, answer = await storage.event_store_async(**pending.store_arguments, then=then)
        except BaseException:
            if blob_ids:
                await sync_to_async(event_blobs_discard)(blob_ids)
            raise
    return _append_end(session=session, event=event, pending=pending, place=place), answer


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


class _HistoryRow(NamedTuple):
    sequence: int
    invocation_id: str
    rewind_before_invocation_id: str | None


def _rewound_sequences(rows: list[_HistoryRow]) -> set[int]:
    """The sequences of the events that rewinds take out of the history, as ADK's runner
    decides which events are live: from the newest event back, a rewind takes out every event
    from the first one of the invocation it names up to itself, and the walk goes on before
    that; a rewind inside a range taken out counts no more. The rewinds themselves stay in
    the history (as markers) unless a later rewind takes them out.

    ``rows`` is the whole session in order; an invocation is named by its first event, rewound
    or not, so rewinding to a later invocation than the last rewind brings back the turns that
    rewind took out, as ADK's services do.
    """
    first_index: dict[str, int] = {}
    for index, row in enumerate(rows):
        if row.invocation_id:
            first_index.setdefault(row.invocation_id, index)
    rewound: set[int] = set()
    index = len(rows) - 1
    while index >= 0:
        target = rows[index].rewind_before_invocation_id
        start = first_index.get(target) if target else None
        if start is not None and start < index:
            rewound.update(row.sequence for row in rows[start:index])
            index = start
        index -= 1
    return rewound


def session_rewind(
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    rewind_before_invocation_id: str,
    sent: Event | None = None,
) -> Event:
    """Revert the session to just before an invocation, in one transaction, as ADK's
    ``Runner.rewind_async`` does.

    The invocation is any the session stored, rewound or not: rewinding to a turn an earlier
    rewind took out brings back the history and the state of that point. Session-scope state
    becomes what it was before the invocation's first event (``user:`` and ``app:`` state is
    shared with other sessions and is left alone, as in ADK). Every event stays stored; each
    event's ``rewound`` mark then says whether the rewinds take it out of the history
    (``_rewound_sequences``). The rewind is itself stored as an event whose ``state_delta``
    records the restoring changes (``None`` for a key that did not exist then).

    ``sent``: the rewind event a client made (ADK's ``Runner.rewind_async`` appends one); its
    id, invocation, author, timestamp and other fields are kept, its state delta replaced by
    the one computed here.

    Sends ``session_rewound`` in the transaction, so long-term memory revises the memories
    the rewound turns made (after commit, in the background) and takes the turns brought
    back as not yet remembered.
    """
    user_pk = selectors.user_pk_from_id(user_id)
    if user_pk is None:
        raise SessionNotFoundError(f"Session {session_id!r} not found in app {app_name!r}.")
    with transaction.atomic():
        session_key, sequence, last_update_time = storage.sequence_claim(
            session_id=session_id, app_name=app_name, user_pk=user_pk, now=time.time()
        )
        stored = EventRecord.objects.filter(session_id=session_key)
        first = (
            stored.filter(invocation_id=rewind_before_invocation_id)
            .order_by("sequence")
            .values_list("sequence", flat=True)
            .first()
        )
        if first is None:
            raise InvocationNotFoundError(
                f"No invocation {rewind_before_invocation_id!r} in the session."
            )
        initial_state = SessionRecord.objects.filter(pk=session_key).values_list(
            "initial_state", flat=True
        )[0]
        target = _session_state_replay(
            initial_state=initial_state,
            actions_list=list(
                stored.filter(sequence__lt=first)
                .order_by("sequence")
                .values_list("actions", flat=True)
            ),
        )
        current = dict(
            SessionState.objects.filter(session_id=session_key).values_list("key", "value")
        )
        missing = object()
        delta = {key: value for key, value in target.items() if current.get(key, missing) != value}
        removed = sorted(key for key in current if key not in target)
        delta.update({key: None for key in removed})
        if removed:
            SessionState.objects.filter(session_id=session_key, key__in=removed).delete()
        changed = ScopedState(session={key: target[key] for key in delta if key in target})
        storage.state_rows_upsert(
            session_key=session_key, user_pk=user_pk, app_name=app_name, scoped=changed
        )
        if sent is None:
            event = Event(
                invocation_id=new_invocation_id(),
                author="user",
                actions=EventActions(
                    state_delta=delta, rewind_before_invocation_id=rewind_before_invocation_id
                ),
                timestamp=last_update_time,
            )
        else:
            event = sent
            event.actions.state_delta = delta
            event.actions.rewind_before_invocation_id = rewind_before_invocation_id
        EventRecord.objects.create(
            session_id=session_key,
            sequence=sequence,
            user_id=user_pk,
            app_name=app_name,
            **event_to_record_fields(event),
        )
        restored_from = _rewound_marks_update(session_key=session_key)
        session_rewound.send(
            sender=EventRecord, session_id=session_key, restored_from_sequence=restored_from
        )
    return event


def _sequence_runs(sequences: set[int]) -> Q:
    """A filter on the given sequences, one range a run of consecutive ones: a rewind marks
    runs, so the filter stays short however long the session."""
    runs = Q(pk__in=[])
    ordered = sorted(sequences)
    start = 0
    for index, sequence in enumerate(ordered):
        if index + 1 == len(ordered) or ordered[index + 1] != sequence + 1:
            runs |= Q(sequence__range=(ordered[start], sequence))
            start = index + 1
    return runs


def _rewound_marks_update(*, session_key: str) -> int | None:
    """Set each stored event's ``rewound`` mark to what the session's rewinds now say; the
    lowest sequence of the events brought back into the history, None if none came back."""
    rows = list(
        EventRecord.objects.filter(session_id=session_key)
        .order_by("sequence")
        .values_list("sequence", "invocation_id", "rewound", "actions__rewind_before_invocation_id")
    )
    rewound = _rewound_sequences([_HistoryRow(row[0], row[1], row[3]) for row in rows])
    marked = {row[0] for row in rows if row[2]}
    stored = EventRecord.objects.filter(session_id=session_key)
    if rewound - marked:
        stored.filter(_sequence_runs(rewound - marked)).update(rewound=True)
    restored = marked - rewound
    if restored:
        stored.filter(_sequence_runs(restored)).update(rewound=False)
    return min(restored, default=None)
