"""Reads of stored events page by page, by id, by turn: what the REST API and the chat
send back, with each event's place in its session."""

from __future__ import annotations

from typing import NamedTuple

from django.db.models import Subquery

from sessions_app.event_codec import EVENT_COLUMNS, event_from_row
from sessions_app.events import Event
from sessions_app.models import EventRecord


class StoredEvent(NamedTuple):
    """An event as stored: its place in the session and whether a rewind hid it."""

    sequence: int
    rewound: bool
    event: Event


class StoredEventsPage(NamedTuple):
    """One page of stored events; ``next_after_sequence`` is None on the last page."""

    events: list[StoredEvent]
    next_after_sequence: int | None


_STORED_EVENT_COLUMNS = ("sequence", "rewound", *EVENT_COLUMNS)


def _stored_event_from_row(row: tuple) -> StoredEvent:
    return StoredEvent(sequence=row[0], rewound=row[1], event=event_from_row(row[2:]))


def stored_events_page(
    *, session_id: str, after_sequence: int, page_size: int, include_rewound: bool = False
) -> StoredEventsPage:
    """Up to ``page_size`` of the session's events after ``after_sequence``, in order.

    Events hidden by a rewind are left out unless ``include_rewound`` is set.
    Pass ``next_after_sequence`` back to get the next page.
    """
    queryset = EventRecord.objects.filter(session_id=session_id, sequence__gt=after_sequence)
    if not include_rewound:
        queryset = queryset.filter(rewound=False)
    rows = list(queryset.order_by("sequence").values_list(*_STORED_EVENT_COLUMNS)[: page_size + 1])
    next_after_sequence = rows[page_size - 1][0] if len(rows) > page_size else None
    return StoredEventsPage(
        events=[_stored_event_from_row(row) for row in rows[:page_size]],
        next_after_sequence=next_after_sequence,
    )


def stored_events_recent(*, session_id: str, limit: int) -> list[StoredEvent]:
    """The session's last ``limit`` events of its history (rewound ones left out), in order."""
    if limit <= 0:
        return []
    rows = list(
        EventRecord.objects.filter(session_id=session_id, rewound=False)
        .order_by("-sequence")
        .values_list(*_STORED_EVENT_COLUMNS)[:limit]
    )
    rows.reverse()
    return [_stored_event_from_row(row) for row in rows]


def stored_event_get(*, session_id: str, event_id: str) -> StoredEvent | None:
    """The session's stored event with this id, or None."""
    row = (
        EventRecord.objects.filter(session_id=session_id, event_id=event_id)
        .values_list(*_STORED_EVENT_COLUMNS)
        .first()
    )
    return _stored_event_from_row(row) if row is not None else None


def session_latest_compaction(*, session_id: str) -> Event | None:
    """The newest visible compaction event of the session, however far back it lies."""
    row = (
        EventRecord.objects.filter(
            session_id=session_id, rewound=False, actions__has_key="compaction"
        )
        .order_by("-sequence")
        .values_list(*EVENT_COLUMNS)
        .first()
    )
    return event_from_row(row) if row else None


def stored_events_of_turn(*, session_id: str, user_event_id: str) -> list[StoredEvent]:
    """Every stored event of the invocation that the user event ``user_event_id`` began,
    in order (those a rewind hid included): what a client that missed the turn is sent
    again. Empty when the session has no such event."""
    invocation = EventRecord.objects.filter(session_id=session_id, event_id=user_event_id).values(
        "invocation_id"
    )[:1]
    rows = (
        EventRecord.objects.filter(session_id=session_id, invocation_id=Subquery(invocation))
        .order_by("sequence")
        .values_list(*_STORED_EVENT_COLUMNS)
    )
    return [_stored_event_from_row(row) for row in rows]
