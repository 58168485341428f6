"""The hand-written SQL of the session store's hot reads, and running it.

Built once from the models' metadata: composing these reads with the ORM cost
more than running them. They run unchanged on PostgreSQL and SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection, models

from sessions_app.event_codec import EVENT_COLUMNS
from sessions_app.models import AppState, EventRecord, SessionRecord, SessionState, UserState
from sessions_app.types import GetSessionConfig

_qn = connection.ops.quote_name


def _columns(model: type[models.Model], *names: str) -> list[str]:
    return [_qn(model._meta.get_field(name).column) for name in names]


def _state_branch(model: type[models.Model], scope: str, where: str, owner: str = "''") -> str:
    table = _qn(model._meta.db_table)
    key, value = _columns(model, "key", "value")
    return f"SELECT '{scope}', {owner}, {key}, {value}, NULL FROM {table} WHERE {where}"


def session_key_sql() -> str:
    """SQL of the surrogate key of the session a user holds under an id in an app (none when
    they hold none); parameters: session id, app name, user pk."""
    session_key, session_id, app_name, user = _columns(
        SessionRecord, "key", "session_id", "app_name", "user"
    )
    return (
        f"SELECT {session_key} FROM {_qn(SessionRecord._meta.db_table)} "
        f"WHERE {session_id} = %s AND {app_name} = %s AND {user} = %s"
    )


def scoped_states_sql(session_keys: str | None) -> str:
    """Rows (scope, session id, key, value, NULL) of the states of the sessions whose keys
    ``session_keys`` lists (SQL: placeholders or a subquery; None for no session), then of a
    user's and an app's; parameters: those of ``session_keys``, user pk, app name, app name."""
    (state_session,) = _columns(SessionState, "session")
    user, user_app = _columns(UserState, "user", "app_name")
    (app,) = _columns(AppState, "app_name")
    branches = [
        _state_branch(UserState, "u", f"{user} = %s AND {user_app} = %s"),
        _state_branch(AppState, "a", f"{app} = %s"),
    ]
    if session_keys:
        sessions = _qn(SessionRecord._meta.db_table)
        session_key, session_id = _columns(SessionRecord, "key", "session_id")
        key, value = _columns(SessionState, "key", "value")
        states = _qn(SessionState._meta.db_table)
        branches.insert(
            0,
            f"SELECT 's', {sessions}.{session_id}, {states}.{key}, {states}.{value}, NULL "
            f"FROM {states} JOIN {sessions} ON {sessions}.{session_key} = {states}.{state_session}"
            f" WHERE {states}.{state_session} IN ({session_keys})",
        )
    return " UNION ALL ".join(branches)


def _session_and_states_sql() -> str:
    """A row ('r', id, NULL, NULL, last_update_time) if the user has the session, then the
    rows of ``scoped_states_sql`` for it; parameters: session id, app name, user pk, twice,
    then user pk, app name, app name."""
    table = _qn(SessionRecord._meta.db_table)
    session_id, app_name, user, last_update_time = _columns(
        SessionRecord, "session_id", "app_name", "user", "last_update_time"
    )
    return (
        f"SELECT 'r', {session_id}, NULL, NULL, {last_update_time} FROM {table} "
        f"WHERE {session_id} = %s AND {app_name} = %s AND {user} = %s "
        f"UNION ALL {scoped_states_sql(session_key_sql())}"
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
# The columns of a stored event as the chat and the REST API send it.
STORED_EVENT_COLUMNS = ("sequence", "rewound", *EVENT_COLUMNS)


def _has_key(column: str, key: str) -> str:
    """SQL true when the JSON object in ``column`` has ``key``, as the ORM's ``has_key``."""
    if connection.vendor == "postgresql":
        return f"{column} ? '{key}'"
    return f"JSON_TYPE({column}, '$.\"{key}\"') IS NOT NULL"


def _stored_events_sql(of_session: str) -> dict[str, str]:
    """Reads of single stored events and of one turn's, as ``STORED_EVENT_COLUMNS``, of the
    session ``of_session`` gives the key of (SQL; its parameters written "the session" below).

    ``by_id``: parameters the session, event id. ``of_turn``: every event of the invocation
    that the event of that id began, in order; parameters the session, twice, event id.
    ``latest_compaction``: the newest visible compaction event as ``EVENT_COLUMNS``;
    parameters the session, ``False``.
    """
    table = _qn(EventRecord._meta.db_table)
    session_key, event_id, invocation_id, sequence, rewound, actions = _columns(
        EventRecord, "session", "event_id", "invocation_id", "sequence", "rewound", "actions"
    )
    of_session = f"{session_key} = {of_session}"
    stored = f"SELECT {_select_list(EventRecord, STORED_EVENT_COLUMNS)} FROM {table}"
    return {
        "by_id": f"{stored} WHERE {of_session} AND {event_id} = %s",
        "of_turn": (
            f"{stored} WHERE {of_session} AND {invocation_id} = (SELECT {invocation_id}"
            f" FROM {table} WHERE {of_session} AND {event_id} = %s) ORDER BY {sequence}"
        ),
        "latest_compaction": (
            f"SELECT {_EVENT_SELECT_LIST} FROM {table} WHERE {of_session}"
            f" AND {rewound} = %s AND {_has_key(actions, 'compaction')}"
            f" ORDER BY {sequence} DESC LIMIT 1"
        ),
    }


# By the session row's key (the session: its key), and by the id a user holds it under in
# an app (the session: session id, app name, user pk).
STORED_EVENTS_SQL = _stored_events_sql("%s")
STORED_EVENTS_OF_ID_SQL = _stored_events_sql(f"({session_key_sql()})")


def _compaction_end_sql() -> str:
    """SQL of the time the newest visible compaction of a session ends (its summary stands in
    for the events before), NULL when it has none; parameters: session id, app name, user pk,
    ``False``."""
    session_key, sequence, rewound, actions = _columns(
        EventRecord, "session", "sequence", "rewound", "actions"
    )
    if connection.vendor == "postgresql":
        end = f"({actions} -> 'compaction' ->> 'end_timestamp')::double precision"
    else:
        end = f"JSON_EXTRACT({actions}, '$.compaction.end_timestamp')"
    return (
        f"SELECT {end} FROM {_qn(EventRecord._meta.db_table)} "
        f"WHERE {session_key} = ({session_key_sql()}) AND {rewound} = %s"
        f" AND {_has_key(actions, 'compaction')} ORDER BY {sequence} DESC LIMIT 1"
    )


def _events_sql(
    *, include_rewound: bool, after_timestamp: bool, recent: bool, after_compaction: bool = False
) -> str:
    """The events of a session, as ``EVENT_COLUMNS``, if the user has it (none otherwise);
    parameters: session id, app name and user pk, ``False`` unless ``include_rewound``, the
    timestamp if ``after_timestamp``, those of ``_compaction_end_sql`` if ``after_compaction``
    (then only the events from the newest compaction's end on); if ``recent`` the newest come
    first, and the caller appends the LIMIT."""
    session_key, sequence, rewound, timestamp = _columns(
        EventRecord, "session", "sequence", "rewound", "timestamp"
    )
    sql = (
        f"SELECT {_EVENT_SELECT_LIST} "
        f"FROM {_qn(EventRecord._meta.db_table)} WHERE {session_key} = ({session_key_sql()})"
    )
    if not include_rewound:
        sql += f" AND {rewound} = %s"
    if after_timestamp:
        sql += f" AND {timestamp} >= %s"
    if after_compaction:
        sql += f" AND {timestamp} >= COALESCE(({_compaction_end_sql()}), {timestamp})"
    if recent:
        return sql + f" ORDER BY {sequence} DESC"
    return sql + f" ORDER BY {sequence}"


def _session_page_sql(*, after: bool) -> str:
    """Rows ('r', id, NULL, NULL, last_update_time) of a page of a user's sessions of an app,
    newest first, mixed with the rows of ``scoped_states_sql`` for them (which come in no
    particular place); parameters: user pk, app name, the last (time, id) of the previous
    page if ``after``, the row count, then those of the states."""
    table = _qn(SessionRecord._meta.db_table)
    session_key, session_id, app_name, user, last_update_time, memory_only = _columns(
        SessionRecord, "key", "session_id", "app_name", "user", "last_update_time", "memory_only"
    )
    page = (
        f"SELECT {session_key}, {session_id}, {last_update_time} FROM {table} "
        f"WHERE {user} = %s AND {app_name} = %s AND NOT {memory_only}"
    )
    if after:
        page += f" AND ({last_update_time}, {session_id}) < (%s, %s)"
    page += f" ORDER BY {last_update_time} DESC, {session_id} DESC LIMIT %s"
    return (
        f"WITH page AS ({page}) SELECT 'r', {session_id}, NULL, NULL, {last_update_time} "
        f"FROM page UNION ALL {scoped_states_sql(f'SELECT {session_key} FROM page')} "
        "ORDER BY 5 DESC, 2 DESC"
    )


SESSION_AND_STATES_SQL = _session_and_states_sql()
_EVENTS_SQL = {
    (include_rewound, after_timestamp, recent): _events_sql(
        include_rewound=include_rewound, after_timestamp=after_timestamp, recent=recent
    )
    for include_rewound in (False, True)
    for after_timestamp in (False, True)
    for recent in (False, True)
}
SESSION_PAGE_SQL = {after: _session_page_sql(after=after) for after in (False, True)}


def fetch(sql: str, params: list[Any]) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def fetch_each(statements: Sequence[tuple[str, list[Any]]]) -> list[list[tuple]]:
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


def session_events_statement(
    *, app_name: str, user_pk: int, session_id: str, config: GetSessionConfig
) -> tuple[str, list[Any]] | None:
    """The statement reading the session's events as ``config`` asks, or None when it asks
    for none.

    ``num_recent_events=0`` asks for none (ADK would return all of them, which
    is never what a caller asking for zero wants). The count is written into
    the statement, not passed as a parameter: with a LIMIT it can see,
    PostgreSQL settles on one plan for a prepared statement, where a LIMIT
    parameter had it plan every execution anew (a third of the statement's
    time). A statement a count, then; callers use a handful of counts.
    """
    recent = config.num_recent_events is not None
    if recent and config.num_recent_events <= 0:
        return None
    params: list[Any] = [session_id, app_name, user_pk]
    if not config.include_rewound:
        params.append(False)
    if config.after_timestamp is not None:
        params.append(config.after_timestamp)
    sql = _EVENTS_SQL[(config.include_rewound, config.after_timestamp is not None, recent)]
    if recent:
        sql += f" LIMIT {int(config.num_recent_events)}"
    return sql, params


_EVENTS_SINCE_COMPACTION_SQL = _events_sql(
    include_rewound=False, after_timestamp=False, recent=True, after_compaction=True
)


def session_events_since_compaction_statement(
    *, app_name: str, user_pk: int, session_id: str, max_events: int
) -> tuple[str, list[Any]] | None:
    """The statement reading the newest ``max_events`` visible events of the session from its
    newest compaction's end on (all of them when it has none), or None for ``max_events`` 0:
    a turn's history, with no wait for the compaction to be read first."""
    if max_events <= 0:
        return None
    sql = _EVENTS_SINCE_COMPACTION_SQL + f" LIMIT {int(max_events)}"
    return sql, [session_id, app_name, user_pk, False, session_id, app_name, user_pk, False]
