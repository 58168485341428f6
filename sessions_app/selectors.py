"""Reads of the session store. Every function takes the owner, so a caller can
never read another user's session by id alone: such a session reads as absent."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, NamedTuple

from django.db import connection, models
from django.db.models import Subquery

from sessions_app.event_codec import EVENT_COLUMNS, event_from_row, events_from_rows
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


# The hot reads below are plain SQL, built once from the models' metadata:
# composing them with the ORM cost more than running them. They run unchanged
# on PostgreSQL and SQLite.
_qn = connection.ops.quote_name


def _columns(model: type[models.Model], *names: str) -> list[str]:
    return [_qn(model._meta.get_field(name).column) for name in names]


def _state_branch(model: type[models.Model], scope: str, where: str, owner: str = "''") -> str:
    table = _qn(model._meta.db_table)
    key, value = _columns(model, "key", "value")
    return f"SELECT '{scope}', {owner}, {key}, {value}, NULL FROM {table} WHERE {where}"


def _scoped_states_sql(session_ids: str | None) -> str:
    """Rows (scope, session id, key, value, NULL) of the states of the sessions whose ids
    ``session_ids`` lists (SQL: placeholders or a subquery; None for no session), then of a
    user's and an app's; parameters: those of ``session_ids``, user pk, app name, app name."""
    (session_id,) = _columns(SessionState, "session")
    user, user_app = _columns(UserState, "user", "app_name")
    (app,) = _columns(AppState, "app_name")
    branches = [
        _state_branch(UserState, "u", f"{user} = %s AND {user_app} = %s"),
        _state_branch(AppState, "a", f"{app} = %s"),
    ]
    if session_ids:
        branches.insert(
            0, _state_branch(SessionState, "s", f"{session_id} IN ({session_ids})", session_id)
        )
    return " UNION ALL ".join(branches)


def _session_and_states_sql() -> str:
    """A row ('r', id, NULL, NULL, last_update_time) if the user has the session, then the
    rows of ``_scoped_states_sql`` for it; parameters: session id, app name, user pk, then
    those of the states."""
    table = _qn(SessionRecord._meta.db_table)
    pk, app_name, user, last_update_time = _columns(
        SessionRecord, "id", "app_name", "user", "last_update_time"
    )
    return (
        f"SELECT 'r', {pk}, NULL, NULL, {last_update_time} FROM {table} "
        f"WHERE {pk} = %s AND {app_name} = %s AND {user} = %s "
        f"UNION ALL {_scoped_states_sql('%s')}"
    )


def _select_list(model: type[models.Model], names: Sequence[str]) -> str:
    """The columns ``names`` of ``model`` as the ORM selects them (some fields cast)."""
    compiler = model.objects.none().query.get_compiler(connection=connection)
    expressions = []
    for name, column in zip(names, _columns(model, *names), strict=True):
        sql, _ = model._meta.get_field(name).select_format(compiler, column, [])
        expressions.append(sql)
    return ", ".join(expressions)


_EVENT_SELECT_LIST = _select_list(EventRecord, EVENT_COLUMNS)


def _events_sql(*, include_rewound: bool, after_timestamp: bool, recent: bool) -> str:
    """The events of a session, as ``EVENT_COLUMNS``, if the user has it (none otherwise);
    parameters: session id, then session id, app name and user pk for the owner check,
    ``False`` unless ``include_rewound``, the timestamp if ``after_timestamp``, the count if
    ``recent`` (the newest first then)."""
    session_id, sequence, rewound, timestamp = _columns(
        EventRecord, "session", "sequence", "rewound", "timestamp"
    )
    sessions = _qn(SessionRecord._meta.db_table)
    pk, app_name, user = _columns(SessionRecord, "id", "app_name", "user")
    sql = (
        f"SELECT {_EVENT_SELECT_LIST} "
        f"FROM {_qn(EventRecord._meta.db_table)} WHERE {session_id} = %s "
        f"AND EXISTS (SELECT 1 FROM {sessions} "
        f"WHERE {pk} = %s AND {app_name} = %s AND {user} = %s)"
    )
    if not include_rewound:
        sql += f" AND {rewound} = %s"
    if after_timestamp:
        sql += f" AND {timestamp} >= %s"
    if recent:
        return sql + f" ORDER BY {sequence} DESC LIMIT %s"
    return sql + f" ORDER BY {sequence}"


def _session_page_sql(*, after: bool) -> str:
    """Rows ('r', id, NULL, NULL, last_update_time) of a page of a user's sessions of an app,
    newest first, mixed with the rows of ``_scoped_states_sql`` for them (which come in no
    particular place); parameters: user pk, app name, the last (time, id) of the previous
    page if ``after``, the row count, then those of the states."""
    table = _qn(SessionRecord._meta.db_table)
    pk, app_name, user, last_update_time = _columns(
        SessionRecord, "id", "app_name", "user", "last_update_time"
    )
    page = f"SELECT {pk}, {last_update_time} FROM {table} WHERE {user} = %s AND {app_name} = %s"
    if after:
        page += f" AND ({last_update_time}, {pk}) < (%s, %s)"
    page += f" ORDER BY {last_update_time} DESC, {pk} DESC LIMIT %s"
    return (
        f"WITH page AS ({page}) SELECT 'r', {pk}, NULL, NULL, {last_update_time} FROM page "
        f"UNION ALL {_scoped_states_sql(f'SELECT {pk} FROM page')} ORDER BY 5 DESC, 2 DESC"
    )


_SESSION_AND_STATES_SQL = _session_and_states_sql()
_EVENTS_SQL = {
    (include_rewound, after_timestamp, recent): _events_sql(
        include_rewound=include_rewound, after_timestamp=after_timestamp, recent=recent
    )
    for include_rewound in (False, True)
    for after_timestamp in (False, True)
    for recent in (False, True)
}
_SESSION_PAGE_SQL = {after: _session_page_sql(after=after) for after in (False, True)}

# JSON columns of a raw row of EVENT_COLUMNS arrive as text (booleans as
# integers on SQLite, which event_from_row accepts).
_EVENT_FIELDS = [EventRecord._meta.get_field(name) for name in EVENT_COLUMNS]
_EVENT_JSON_INDEXES = [i for i, f in enumerate(_EVENT_FIELDS) if isinstance(f, models.JSONField)]


_raw_decode = json.JSONDecoder().raw_decode


def _json_value(value: Any) -> Any:
    """A JSON column's value as the ORM would give it (SQL NULL is None).

    ``raw_decode`` skips ``json.loads``'s whitespace handling, which costs more
    than decoding a small document; text it does not consume whole (stored
    with surrounding whitespace) goes through ``json.loads``.
    """
    if not isinstance(value, str):
        return value
    try:
        decoded, end = _raw_decode(value)
    except json.JSONDecodeError:
        return json.loads(value)
    return decoded if end == len(value) else json.loads(value)


def _fetch(sql: str, params: list[Any]) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _fetch_each(statements: Sequence[tuple[str, list[Any]]]) -> list[list[tuple]]:
    """The rows of each statement, in order.

    On PostgreSQL the statements travel in one round trip, which is most of
    what reading a short session costs: with psycopg's client-side binding
    (Django's default) several statements can go as one query. Server-side
    binding takes one statement at a time, and SQLite runs in-process, so
    there they run one after the other.
    """
    with connection.cursor() as cursor:
        if (
            len(statements) > 1
            and connection.vendor == "postgresql"
            and connection.settings_dict["OPTIONS"].get("server_side_binding") is not True
        ):
            cursor.execute(
                "; ".join(sql for sql, _ in statements),
                [param for _, params in statements for param in params],
            )
            results = [cursor.fetchall()]
            while cursor.nextset():
                results.append(cursor.fetchall())
            return results
        results = []
        for sql, params in statements:
            cursor.execute(sql, params)
            results.append(cursor.fetchall())
        return results


def _json_column(values: tuple) -> Sequence[Any]:
    """A JSON column's values, from many rows, as ``_json_value`` gives each.

    The stored texts are joined into one JSON array and decoded in a single
    call: the decoder's per-call cost, not the parsing, is what a column of
    small documents spends its time on.
    """
    if values.count(None) == len(values):
        return values
    try:
        text = ",".join([value if value is not None else "null" for value in values])
    except TypeError:  # the driver already decoded some
        return [_json_value(value) for value in values]
    try:
        decoded = json.loads(f"[{text}]")
    except json.JSONDecodeError:
        decoded = None
    if decoded is None or len(decoded) != len(values):
        return [_json_value(value) for value in values]
    return decoded


def _events_from_raw_rows(rows: list[tuple]) -> list[Event]:
    """Events from raw rows of ``EVENT_COLUMNS``, JSON decoded column by column."""
    if not rows:
        return []
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True))
    for index in _EVENT_JSON_INDEXES:
        columns[index] = _json_column(columns[index])
    return events_from_rows(zip(*columns, strict=True))


def _scoped_states_fold(
    rows: Iterable[tuple],
) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, Any], list[tuple[str, float]]]:
    """Session states by session id, the user's state, the app's, and the (id,
    last_update_time) of the session rows ('r'), in the order they came."""
    by_session: dict[str, dict[str, Any]] = {}
    user_state: dict[str, Any] = {}
    app_state: dict[str, Any] = {}
    records = []
    rows = list(rows)
    values = _json_column(tuple(row[3] for row in rows))
    for (scope, session_id, key, _, last_update_time), value in zip(rows, values, strict=True):
        if scope == "s":
            by_session.setdefault(session_id, {})[key] = value
        elif scope == "u":
            user_state[key] = value
        elif scope == "a":
            app_state[key] = value
        else:
            records.append((session_id, last_update_time))
    return by_session, user_state, app_state, records


def scoped_states_get(
    *, session_ids: Iterable[str], app_name: str, user_pk: int
) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Session states of the given sessions, the user's state and the app's, in one query."""
    session_ids = list(session_ids)
    placeholders = ", ".join(["%s"] * len(session_ids))
    rows = _fetch(_scoped_states_sql(placeholders), [*session_ids, user_pk, app_name, app_name])
    by_session, user_state, app_state, _ = _scoped_states_fold(rows)
    return by_session, user_state, app_state


def _events_statement(
    *, app_name: str, user_pk: int, session_id: str, config: GetSessionConfig
) -> tuple[str, list[Any]] | None:
    """The statement reading the session's events as ``config`` asks, or None when it asks
    for none.

    ``num_recent_events=0`` asks for none (ADK would return all of them, which
    is never what a caller asking for zero wants).
    """
    recent = config.num_recent_events is not None
    if recent and config.num_recent_events <= 0:
        return None
    params: list[Any] = [session_id, session_id, app_name, user_pk]
    if not config.include_rewound:
        params.append(False)
    if config.after_timestamp is not None:
        params.append(config.after_timestamp)
    if recent:
        params.append(config.num_recent_events)
    return _EVENTS_SQL[(config.include_rewound, config.after_timestamp is not None, recent)], params


class StoreRead(NamedTuple):
    """A read of the session store: its statements, and how their rows make the answer.

    The same read runs from sync code (``store_read_run``) or straight from an
    event loop (``SessionService``, through ``chatapp.async_database``).
    ``assemble`` touches no database. A read with no statements answers
    without asking the database.
    """

    statements: list[tuple[str, list[Any]]]
    assemble: Callable[[list[list[tuple]]], Any]


def store_read_run(read: StoreRead) -> Any:
    """The answer of ``read``, its statements run on Django's connection."""
    return read.assemble(_fetch_each(read.statements) if read.statements else [])


def _no_answer(results: list[list[tuple]]) -> None:
    return None


def _session_assemble(
    results: list[list[tuple]],
    *,
    app_name: str,
    user_pk: int,
    session_id: str,
    with_events: bool,
    newest_first: bool,
) -> Session | None:
    by_session, user_state, app_state, records = _scoped_states_fold(results[0])
    if not records:
        return None
    events: list[Event] = []
    if with_events:
        event_rows = results[1]
        if newest_first:
            event_rows.reverse()
        events = _events_from_raw_rows(event_rows)
    # Every value is already of its field's type; validating the session would
    # check each of possibly thousands of events again.
    return Session.model_construct(
        id=session_id,
        app_name=app_name,
        user_id=str(user_pk),
        state=state_merge(session=by_session.get(session_id, {}), user=user_state, app=app_state),
        events=events,
        last_update_time=records[0][1],
    )


def session_get_read(
    *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
) -> StoreRead:
    """The read behind ``session_get``: two statements, one round trip on PostgreSQL (the
    session row with every state it sees, then its events, read only if the user has the
    session)."""
    user_pk = user_pk_from_id(user_id)
    if user_pk is None:
        return StoreRead([], _no_answer)
    config = config or GetSessionConfig()
    statements = [
        (
            _SESSION_AND_STATES_SQL,
            [session_id, app_name, user_pk, session_id, user_pk, app_name, app_name],
        )
    ]
    events_statement = _events_statement(
        app_name=app_name, user_pk=user_pk, session_id=session_id, config=config
    )
    if events_statement is not None:
        statements.append(events_statement)
    return StoreRead(
        statements,
        partial(
            _session_assemble,
            app_name=app_name,
            user_pk=user_pk,
            session_id=session_id,
            with_events=events_statement is not None,
            newest_first=config.num_recent_events is not None,
        ),
    )


def session_get(
    *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None
) -> Session | None:
    """The session with its merged state and events, or None if the user has no such session."""
    return store_read_run(
        session_get_read(app_name=app_name, user_id=user_id, session_id=session_id, config=config)
    )


def _page_token_encode(last_update_time: float, session_id: str) -> str:
    raw = json.dumps([last_update_time, session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _page_token_decode(token: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        last_update_time, session_id = json.loads(raw)
        if not isinstance(session_id, str) or "\x00" in session_id:
            raise TypeError
        return float(last_update_time), session_id
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise InvalidPageTokenError("The page token is not one this service issued.") from None


def _session_page_assemble(
    results: list[list[tuple]], *, app_name: str, user_pk: int, page_size: int
) -> ListSessionsResponse:
    by_session, user_state, app_state, records = _scoped_states_fold(results[0])
    next_token = None
    if len(records) > page_size:
        records = records[:page_size]
        next_token = _page_token_encode(records[-1][1], records[-1][0])
    if not records:
        return ListSessionsResponse()
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
        for session_id, last_update_time in records
    ]
    return ListSessionsResponse(sessions=sessions, next_page_token=next_token)


def _empty_page(results: list[list[tuple]]) -> ListSessionsResponse:
    return ListSessionsResponse()


def session_list_read(
    *,
    app_name: str,
    user_id: str,
    page_size: int = DEFAULT_PAGE_SIZE,
    page_token: str | None = None,
) -> StoreRead:
    """The read behind ``session_list``: one statement a page.

    Raises ``InvalidPageTokenError`` for a token this service did not issue.
    """
    user_pk = user_pk_from_id(user_id)
    if user_pk is None:
        return StoreRead([], _empty_page)
    page_size = max(1, min(int(page_size), MAX_PAGE_SIZE))
    params: list[Any] = [user_pk, app_name]
    if page_token:
        params.extend(_page_token_decode(page_token))
    statement = (
        _SESSION_PAGE_SQL[bool(page_token)],
        [*params, page_size + 1, user_pk, app_name, app_name],
    )
    return StoreRead(
        [statement],
        partial(_session_page_assemble, app_name=app_name, user_pk=user_pk, page_size=page_size),
    )


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
    return store_read_run(
        session_list_read(
            app_name=app_name, user_id=user_id, page_size=page_size, page_token=page_token
        )
    )


def session_record_get(*, user_pk: int, session_id: str) -> SessionRecord | None:
    """The user's session row by id alone (any app), for the REST and WebSocket doors."""
    return SessionRecord.objects.filter(pk=session_id, user_id=user_pk).first()


def session_titles(*, user_pk: int, session_ids: Iterable[str]) -> dict[str, str]:
    """The titles of the user's sessions among ``session_ids`` that have one, by session id."""
    rows = SessionRecord.objects.filter(user_id=user_pk, pk__in=list(session_ids)).exclude(title="")
    return dict(rows.values_list("id", "title"))


def sessions_temporary(*, user_pk: int, session_ids: Iterable[str]) -> set[str]:
    """The ids among ``session_ids`` of the user's temporary chats (no long-term memory)."""
    rows = SessionRecord.objects.filter(user_id=user_pk, pk__in=list(session_ids), temporary=True)
    return set(rows.values_list("id", flat=True))


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
