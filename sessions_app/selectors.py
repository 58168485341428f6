"""Reads of the session store. Every function takes the owner, so a caller can
never read another user's session by id alone: such a session reads as absent."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from django.db.models import F, Q, Subquery, Value

from sessions_app.event_codec import EVENT_COLUMNS, event_from_row
from sessions_app.events import Event
from sessions_app.models import AppState, EventRecord, SessionRecord, SessionState, UserState
from sessions_app.state import ScopedState, state_merge
from sessions_app.types import GetSessionConfig, ListSessionsResponse, Session

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


class InvalidPageTokenError(ValueError):
    pass


def user_pk_from_id(user_id: str | int) -> int | None:
    """The user primary key an ADK ``user_id`` string names, or None if it names none."""
    text = str(user_id)
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        return None
    return int(text)


def scoped_states_get(
    *, session_ids: Iterable[str], app_name: str, user_pk: int
) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Session states of the given sessions, the user's state and the app's, in one query."""
    session_rows = SessionState.objects.filter(session_id__in=list(session_ids)).values_list(
        Value("s"), F("session_id"), "key", "value"
    )
    user_rows = UserState.objects.filter(user_id=user_pk, app_name=app_name).values_list(
        Value("u"), Value(""), "key", "value"
    )
    app_rows = AppState.objects.filter(app_name=app_name).values_list(
        Value("a"), Value(""), "key", "value"
    )
    by_session: dict[str, dict[str, Any]] = {}
    user_state: dict[str, Any] = {}
    app_state: dict[str, Any] = {}
    for scope, session_id, key, value in session_rows.union(user_rows, app_rows, all=True):
        if scope == "s":
            by_session.setdefault(session_id, {})[key] = value
        elif scope == "u":
            user_state[key] = value
        else:
            app_state[key] = value
    return by_session, user_state, app_state


def session_merged_state(*, app_name: str, user_pk: int, session_id: str) -> dict[str, Any]:
    by_session, user_state, app_state = scoped_states_get(
        session_ids=[session_id], app_name=app_name, user_pk=user_pk
    )
    return state_merge(session=by_session.get(session_id, {}), user=user_state, app=app_state)


def session_events(*, session_id: str, config: GetSessionConfig | None = None) -> list[Event]:
    """The session's events in order, filtered as ``config`` asks.

    ``num_recent_events=0`` returns no events (ADK would return all of them,
    which is never what a caller asking for zero wants).
    """
    config = config or GetSessionConfig()
    queryset = EventRecord.objects.filter(session_id=session_id)
    if not config.include_rewound:
        queryset = queryset.filter(rewound=False)
    if config.after_timestamp is not None:
        queryset = queryset.filter(timestamp__gte=config.after_timestamp)
    if config.num_recent_events is not None:
        if config.num_recent_events <= 0:
            return []
        rows = list(
            queryset.order_by("-sequence").values_list(*EVENT_COLUMNS)[: config.num_recent_events]
        )
        rows.reverse()
    else:
        rows = list(queryset.order_by("sequence").values_list(*EVENT_COLUMNS))
    return [event_from_row(row) for row in rows]


def session_get(
    *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
) -> Session | None:
    """The session with its merged state and events, or None if the user has no such session."""
    user_pk = user_pk_from_id(user_id)
    if user_pk is None:
        return None
    found = list(
        SessionRecord.objects.filter(pk=session_id, app_name=app_name, user_id=user_pk).values_list(
            "last_update_time", flat=True
        )[:1]
    )
    if not found:
        return None
    return Session(
        id=session_id,
        app_name=app_name,
        user_id=str(user_pk),
        state=session_merged_state(app_name=app_name, user_pk=user_pk, session_id=session_id),
        events=session_events(session_id=session_id, config=config),
        last_update_time=found[0],
    )


def _page_token_encode(last_update_time: float, session_id: str) -> str:
    raw = json.dumps([last_update_time, session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _page_token_decode(token: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        last_update_time, session_id = json.loads(raw)
        if not isinstance(session_id, str):
            raise TypeError
        return float(last_update_time), session_id
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise InvalidPageTokenError("The page token is not one this service issued.") from None


def session_list(
    *,
    app_name: str,
    user_id: str,
    page_size: int = DEFAULT_PAGE_SIZE,
    page_token: str | None = None,
) -> ListSessionsResponse:
    """One page of the user's sessions of an app, most recently updated first.

    Keyset pagination on (last_update_time, id): a page costs the same however
    deep it is, and sessions updated between pages are neither skipped nor
    repeated within the pages already handed out. Sessions carry their merged
    state but no events.
    """
    user_pk = user_pk_from_id(user_id)
    if user_pk is None:
        return ListSessionsResponse()
    page_size = max(1, min(int(page_size), MAX_PAGE_SIZE))
    queryset = SessionRecord.objects.filter(user_id=user_pk, app_name=app_name)
    if page_token:
        after_time, after_id = _page_token_decode(page_token)
        queryset = queryset.filter(
            Q(last_update_time__lt=after_time) | Q(last_update_time=after_time, id__lt=after_id)
        )
    rows = list(
        queryset.order_by("-last_update_time", "-id").values_list("id", "last_update_time")[
            : page_size + 1
        ]
    )
    next_token = None
    if len(rows) > page_size:
        rows = rows[:page_size]
        next_token = _page_token_encode(rows[-1][1], rows[-1][0])
    if not rows:
        return ListSessionsResponse()
    by_session, user_state, app_state = scoped_states_get(
        session_ids=[session_id for session_id, _ in rows], app_name=app_name, user_pk=user_pk
    )
    sessions = [
        Session(
            id=session_id,
            app_name=app_name,
            user_id=str(user_pk),
            state=state_merge(
                session=by_session.get(session_id, {}), user=user_state, app=app_state
            ),
            last_update_time=last_update_time,
        )
        for session_id, last_update_time in rows
    ]
    return ListSessionsResponse(sessions=sessions, next_page_token=next_token)


def session_record_get(*, user_pk: int, session_id: str) -> SessionRecord | None:
    """The user's session row by id alone (any app), for the REST and WebSocket doors."""
    return SessionRecord.objects.filter(pk=session_id, user_id=user_pk).first()


def session_records_for_user(*, user_pk: int, app_name: str | None = None):
    queryset = SessionRecord.objects.filter(user_id=user_pk)
    if app_name:
        queryset = queryset.filter(app_name=app_name)
    return queryset


def session_titles(*, user_pk: int, session_ids: Iterable[str]) -> dict[str, str]:
    """The titles of the user's sessions among ``session_ids`` that have one, by session id."""
    rows = SessionRecord.objects.filter(user_id=user_pk, pk__in=list(session_ids)).exclude(title="")
    return dict(rows.values_list("id", "title"))


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


def session_scoped_state(*, app_name: str, user_pk: int, session_id: str) -> ScopedState:
    """The state a session sees, split by scope (keys stored without their prefix)."""
    by_session, user_state, app_state = scoped_states_get(
        session_ids=[session_id], app_name=app_name, user_pk=user_pk
    )
    return ScopedState(session=by_session.get(session_id, {}), user=user_state, app=app_state)


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
