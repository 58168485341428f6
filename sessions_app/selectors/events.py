"""Reads of stored events page by page, by id, by turn: what the REST API and the chat
send back, with each event's place in its session."""

from __future__ import annotations

from typing import NamedTuple

from core.async_database import store_reads_joined
from sessions_app.event_codec import event_from_row
from sessions_app.events import Event
from sessions_app.models import EventRecord
from sessions_app.selectors.rows import events_from_raw_rows
from sessions_app.selectors.sessions import (
    StoreRead,
    session_with_events_read,
    store_read_run,
    user_pk_from_id,
)
from sessions_app.selectors.statements import (
    STORED_EVENT_COLUMNS,
    STORED_EVENTS_OF_ID_SQL,
    STORED_EVENTS_SQL,
    session_events_since_compaction_statement,
)


class StoredEvent(NamedTuple):
    """An event as stored: its place in the session and whether a rewind hid it."""

    sequence: int
    rewound: bool
    event: Event


class StoredEventsPage(NamedTuple):
    """One page of stored events; ``next_after_sequence`` is None on the last page."""

    events: list[StoredEvent]
    next_after_sequence: int | None


def _stored_event_from_row(row: tuple) -> StoredEvent:
    return StoredEvent(sequence=row[0], rewound=row[1], event=event_from_row(row[2:]))


def stored_events_page(
    *,
    session_key: str,
    after_sequence: int,
    page_size: int,
    include_rewound: bool = False,
    for_memory: bool = False,
) -> StoredEventsPage:
    """Up to ``page_size`` of the events of the session row ``session_key`` after
    ``after_sequence``, in order.

    Events hidden by a rewind are left out unless ``include_rewound`` is set. With
    ``for_memory``, so are the events kept from long-term memory when they were stored
    (``EventRecord.memory_excluded``) and every event of a turn whose user message was.
    Pass ``next_after_sequence`` back to get the next page.
    """
    queryset = EventRecord.objects.filter(session_id=session_key, sequence__gt=after_sequence)
    if not include_rewound:
        queryset = queryset.filter(rewound=False)
    if for_memory:
        excluded_turns = EventRecord.objects.filter(
            session_id=session_key, author="user", memory_excluded=True
        ).exclude(invocation_id="")
        queryset = queryset.exclude(memory_excluded=True).exclude(
            invocation_id__in=excluded_turns.values("invocation_id")
        )
    rows = list(queryset.order_by("sequence").values_list(*STORED_EVENT_COLUMNS)[: page_size + 1])
    next_after_sequence = rows[page_size - 1][0] if len(rows) > page_size else None
    return StoredEventsPage(
        events=[_stored_event_from_row(row) for row in rows[:page_size]],
        next_after_sequence=next_after_sequence,
    )


def stored_events_before(
    *, session_key: str, before_sequence: int, limit: int, for_memory: bool = False
) -> list[StoredEvent]:
    """The last ``limit`` events of the history of the session row ``session_key`` up to
    ``before_sequence`` included (rewound ones left out; with ``for_memory``, those
    ``stored_events_page`` leaves out for memory too), in order."""
    if limit <= 0:
        return []
    queryset = EventRecord.objects.filter(
        session_id=session_key, sequence__lte=before_sequence, rewound=False
    )
    if for_memory:
        excluded_turns = EventRecord.objects.filter(
            session_id=session_key, author="user", memory_excluded=True
        ).exclude(invocation_id="")
        queryset = queryset.exclude(memory_excluded=True).exclude(
            invocation_id__in=excluded_turns.values("invocation_id")
        )
    rows = list(queryset.order_by("-sequence").values_list(*STORED_EVENT_COLUMNS)[:limit])
    rows.reverse()
    return [_stored_event_from_row(row) for row in rows]


def stored_events_recent(*, session_key: str, limit: int) -> list[StoredEvent]:
    """The last ``limit`` events of the history of the session row ``session_key`` (rewound
    ones left out), in order."""
    if limit <= 0:
        return []
    rows = list(
        EventRecord.objects.filter(session_id=session_key, rewound=False)
        .order_by("-sequence")
        .values_list(*STORED_EVENT_COLUMNS)[:limit]
    )
    rows.reverse()
    return [_stored_event_from_row(row) for row in rows]


def stored_events_of_records(*, user_pk: int, event_pks: list[int]) -> list[StoredEvent]:
    """The stored events of these ``EventRecord`` keys in the user's sessions (rewound ones
    too: the caller decides), in the order they were said; keys of events gone, or of another
    user's, are left out. For a reader that already holds the keys through a relation of its
    own, such as a memory's sources."""
    rows = (
        EventRecord.objects.filter(pk__in=event_pks, session__user_id=user_pk)
        .order_by("timestamp", "session_id", "sequence")
        .values_list(*STORED_EVENT_COLUMNS)
    )
    return [_stored_event_from_row(row) for row in rows]


def _stored_events_from_raw_rows(rows: list[tuple]) -> list[StoredEvent]:
    events = events_from_raw_rows([row[2:] for row in rows])
    return [
        StoredEvent(sequence=row[0], rewound=bool(row[1]), event=event)
        for row, event in zip(rows, events, strict=True)
    ]


def _first_stored_event(results: list[list[tuple]]) -> StoredEvent | None:
    stored = _stored_events_from_raw_rows(results[0])
    return stored[0] if stored else None


def stored_event_get_read(*, session_key: str, event_id: str) -> StoreRead:
    """The read behind ``stored_event_get``: one statement."""
    return StoreRead([(STORED_EVENTS_SQL["by_id"], [session_key, event_id])], _first_stored_event)


def stored_event_get(*, session_key: str, event_id: str) -> StoredEvent | None:
    """The stored event with this id of the session row ``session_key``, or None."""
    return store_read_run(stored_event_get_read(session_key=session_key, event_id=event_id))


def stored_event_of_id_get_read(
    *, app_name: str, user_pk: int, session_id: str, event_id: str
) -> StoreRead:
    """``stored_event_get_read`` of the user's session of this id in the app."""
    return StoreRead(
        [(STORED_EVENTS_OF_ID_SQL["by_id"], [session_id, app_name, user_pk, event_id])],
        _first_stored_event,
    )


def stored_event_of_id_get(
    *, app_name: str, user_pk: int, session_id: str, event_id: str
) -> StoredEvent | None:
    """The stored event with this id of the user's session ``session_id`` in the app, or None."""
    return store_read_run(
        stored_event_of_id_get_read(
            app_name=app_name, user_pk=user_pk, session_id=session_id, event_id=event_id
        )
    )


def _latest_compaction(results: list[list[tuple]]) -> Event | None:
    events = events_from_raw_rows(results[0])
    return events[0] if events else None


def session_latest_compaction_read(*, app_name: str, user_pk: int, session_id: str) -> StoreRead:
    """The read behind ``session_latest_compaction``: one statement."""
    return StoreRead(
        [(STORED_EVENTS_OF_ID_SQL["latest_compaction"], [session_id, app_name, user_pk, False])],
        _latest_compaction,
    )


def session_since_compaction_read(
    *, app_name: str, user_id: str, session_id: str, max_events: int
) -> StoreRead:
    """What a turn reads of its session, in one round trip on PostgreSQL: an answer
    (compaction, session), the newest visible compaction (None without one) and the session
    with its newest ``max_events`` visible events from that compaction's end on (its summary
    stands in for the events before), or (None, None) when the user has no such session."""
    user_pk = user_pk_from_id(user_id)
    if user_pk is None:
        return StoreRead([], lambda results: (None, None))
    return store_reads_joined(
        session_latest_compaction_read(app_name=app_name, user_pk=user_pk, session_id=session_id),
        session_with_events_read(
            app_name=app_name,
            user_pk=user_pk,
            session_id=session_id,
            events_statement=session_events_since_compaction_statement(
                app_name=app_name, user_pk=user_pk, session_id=session_id, max_events=max_events
            ),
            newest_first=True,
        ),
    )


def session_latest_compaction(*, app_name: str, user_pk: int, session_id: str) -> Event | None:
    """The newest visible compaction event of the user's session in the app, however far back
    it lies."""
    return store_read_run(
        session_latest_compaction_read(app_name=app_name, user_pk=user_pk, session_id=session_id)
    )


def _stored_events_of_turn(results: list[list[tuple]]) -> list[StoredEvent]:
    return _stored_events_from_raw_rows(results[0])


def stored_events_of_turn_read(*, session_key: str, user_event_id: str) -> StoreRead:
    """The read behind ``stored_events_of_turn``: one statement."""
    return StoreRead(
        [(STORED_EVENTS_SQL["of_turn"], [session_key, session_key, user_event_id])],
        _stored_events_of_turn,
    )


def stored_events_of_turn(*, session_key: str, user_event_id: str) -> list[StoredEvent]:
    """Every stored event of the invocation that the user event ``user_event_id`` began in the
    session row ``session_key``, in order (those a rewind hid included): what a client that
    missed the turn is sent again. Empty when the session has no such event."""
    return store_read_run(
        stored_events_of_turn_read(session_key=session_key, user_event_id=user_event_id)
    )


def event_ids_stored(*, session_key: str, event_ids: list[str]) -> set[str]:
    """Those of ``event_ids`` the session already stores."""
    return set(
        EventRecord.objects.filter(session_id=session_key, event_id__in=event_ids).values_list(
            "event_id", flat=True
        )
    )
