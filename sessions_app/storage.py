"""Hand-written SQL of the session store's hot path (appends), used by ``services``.

The ORM would issue the same statements; building them directly from the
models' metadata saves the per-call cost of composing queries, which on an
append was most of the time spent outside the database. On PostgreSQL an
append is one statement (data-modifying CTEs): one round trip, with row locks
taken in the same fixed order as every other writer (session row, then
session, ``user:`` and ``app:`` keys, keys sorted).
"""

from __future__ import annotations

import contextlib
import functools
import math
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection, models, transaction

from core import async_database
from sessions_app.consent import memory_consent_get
from sessions_app.errors import SessionNotFoundError, SessionStoreError, StaleSessionError
from sessions_app.models import AppState, EventRecord, SessionRecord, SessionState, UserState
from sessions_app.state import ScopedState
from sessions_app.types import SessionRevision


@functools.lru_cache(maxsize=256)
def _insert_sql(
    model: type[models.Model], names: tuple[str, ...], row_count: int, upsert_on: tuple[str, ...]
) -> str:
    """An INSERT of ``row_count`` rows of the fields ``names``, one parameter per value.

    With ``upsert_on`` (the fields of a unique constraint), a row that
    conflicts updates the existing row's ``value`` instead, as
    ``bulk_create(update_conflicts=True, update_fields=["value"])`` does.
    """
    qn = connection.ops.quote_name

    def columns(field_names: tuple[str, ...]) -> str:
        return ", ".join(qn(model._meta.get_field(name).column) for name in field_names)

    row = "(" + ", ".join(["%s"] * len(names)) + ")"
    sql = (
        f"INSERT INTO {qn(model._meta.db_table)} ({columns(names)}) "
        f"VALUES {', '.join([row] * row_count)}"
    )
    if upsert_on:
        value = qn(model._meta.get_field("value").column)
        sql += f" ON CONFLICT ({columns(upsert_on)}) DO UPDATE SET {value} = EXCLUDED.{value}"
    return sql


def _json_param(value: Any) -> Any:
    """A JSONField value as a query parameter (None is SQL NULL, as the ORM stores it)."""
    return None if value is None else connection.ops.adapt_json_value(value, None)


def state_rows_upsert(
    *, session_key: str, user_pk: int, app_name: str, scoped: ScopedState
) -> None:
    """Write each stored scope's keys (the session's, of the session row ``session_key``);
    call inside the caller's transaction.

    One statement per scope, rows in key order, so the row locks of shared
    keys are always taken in the same order.
    """
    scopes = (
        (SessionState, ("session", "key", "value"), (session_key,), scoped.session),
        (UserState, ("user", "app_name", "key", "value"), (user_pk, app_name), scoped.user),
        (AppState, ("app_name", "key", "value"), (app_name,), scoped.app),
    )
    with connection.cursor() as cursor:
        for model, names, owner, values in scopes:
            if not values:
                continue
            params = [
                param
                for key, value in sorted(values.items())
                for param in (*owner, key, _json_param(value))
            ]
            cursor.execute(_insert_sql(model, names, len(values), names[:-1]), params)


_EVENT_RECORD_FIELDS = tuple(
    field for field in EventRecord._meta.concrete_fields if not field.primary_key
)


def _event_record_params(fields: dict[str, Any], names: tuple[str, ...]) -> list[Any]:
    """Query parameters of an EventRecord's fields ``names``, as the ORM would send them.

    Fields not in ``fields`` take their model default.
    """
    params = []
    for name in names:
        field = EventRecord._meta.get_field(name)
        value = fields[field.attname] if field.attname in fields else field.get_default()
        params.append(field.get_db_prep_save(value, connection))
    return params


def event_record_insert(*, session_key: str, sequence: int, fields: dict[str, Any]) -> None:
    """Insert an EventRecord row of the session row ``session_key`` as
    ``EventRecord.objects.create`` would, in one statement.

    Fields not given take their model default; no model signals are sent
    (none are connected to EventRecord).
    """
    names = tuple(field.name for field in _EVENT_RECORD_FIELDS)
    params = _event_record_params(
        {"session_id": session_key, "sequence": sequence, **fields}, names
    )
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(EventRecord, names, 1, ()), params)


def _revision_condition(table: str, key: str) -> str:
    """The claim's condition that the writer's copy is not stale (``SessionRevision``);
    parameters: the copy's last_update_time and newest event id ('' for none)."""
    events = connection.ops.quote_name(EventRecord._meta.db_table)
    event_session = connection.ops.quote_name(EventRecord._meta.get_field("session").column)
    return (
        f"({table}.last_update_time <= %s OR COALESCE((SELECT event_id FROM {events} "
        f"WHERE {events}.{event_session} = {table}.{key} ORDER BY sequence DESC LIMIT 1), '') "
        "= %s)"
    )


def _revision_params(revision: SessionRevision | None) -> list[Any]:
    if revision is None:
        return [math.inf, ""]
    return [revision.last_update_time, revision.last_event_id or ""]


def _stale_or_missing(*, session_id: str, app_name: str, user_pk: int) -> SessionStoreError:
    """Why a claim found no row: the session is missing, or the writer's copy is stale."""
    exists = SessionRecord.objects.filter(
        session_id=session_id, app_name=app_name, user_id=user_pk
    ).exists()
    if exists:
        return StaleSessionError(
            f"Session {session_id!r} was updated since this copy of it was read: read it "
            "again before appending."
        )
    return SessionNotFoundError(f"Session {session_id!r} not found in app {app_name!r}.")


def sequence_claim(
    *,
    session_id: str,
    app_name: str,
    user_pk: int,
    now: float,
    revision: SessionRevision | None = None,
) -> tuple[str, int, float]:
    """Take the session row lock and the next sequence number, in one statement; returns
    the session's key, that number and its last_update_time.

    Must be the first write of the caller's transaction: every writer of a
    session goes through here first, which is what fixes the lock order.
    Raises SessionNotFoundError if the user has no such session, StaleSessionError if
    ``revision`` is stale.
    """
    table = SessionRecord._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET last_sequence = last_sequence + 1, "
            "last_update_time = CASE WHEN last_update_time > %s THEN last_update_time ELSE %s END "
            "WHERE session_id = %s AND app_name = %s AND user_id = %s "
            f"AND {_revision_condition(table, connection.ops.quote_name('key'))} "
            'RETURNING "key", last_sequence, last_update_time',
            [now, now, session_id, app_name, user_pk, *_revision_params(revision)],
        )
        row = cursor.fetchone()
    if row is None:
        raise _stale_or_missing(session_id=session_id, app_name=app_name, user_pk=user_pk)
    return row[0], row[1], row[2]


def _memory_excluded_read(*, session_key: str, user_pk: int) -> bool:
    """Whether what is stored now in the session is kept from long-term memory: the chat is
    temporary or the user does not allow memories from their chats (``consent``)."""
    condition = memory_consent_get()
    table = SessionRecord._meta.db_table
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {qn(SessionRecord._meta.get_field('temporary').column)} "
            f'OR NOT ({condition.sql}) FROM {table} WHERE "key" = %s',
            [user_pk, session_key],
        )
        row = cursor.fetchone()
    return bool(row and row[0])


# The EventRecord fields the one-statement append fills from its parameters;
# the session, its owner (user and app) and the sequence number come from the claimed session
# row, and ``memory_excluded`` from the session and the user's consent (``consent``).
_EVENT_PARAM_NAMES = tuple(
    field.name
    for field in _EVENT_RECORD_FIELDS
    if field.name not in ("session", "sequence", "memory_excluded", "user", "app_name")
)


@functools.lru_cache(maxsize=256)
def _append_sql_postgresql(
    session_keys: int, user_keys: int, app_keys: int, consent_sql: str
) -> str:
    """``event_append``'s writes as one PostgreSQL statement, for deltas of these sizes.

    Data-modifying CTEs, each fed by the previous one, so the row locks are
    taken in the same order as by the other writers: the session row first
    (the claim, whose sequence number and session id every insert selects),
    then session keys, ``user:`` keys, ``app:`` keys, each in the order given
    (the callers give them sorted). An INSERT that reads a CTE's count runs
    only after that CTE has written all its rows. If the claim finds no
    session, nothing is written and no row is returned.

    ``memory_excluded`` is computed in the same statement: the claimed session is
    temporary, or ``consent_sql`` (``consent.ConsentCondition``) does not hold.

    Parameters: now, now, session id, app name, user pk, the ``_revision_params``; the
    event fields
    ``_EVENT_PARAM_NAMES``; user pk (for ``consent_sql``); (key, value) per
    session key; user pk, app name, (key, value) per user key; app name,
    (key, value) per app key. Returns one
    row: the sequence number and the session's last_update_time.
    """
    qn = connection.ops.quote_name

    def column(model: type[models.Model], name: str) -> str:
        return qn(model._meta.get_field(name).column)

    def table(model: type[models.Model]) -> str:
        return qn(model._meta.db_table)

    def values(count: int) -> str:
        rows = ", ".join(f"({n}, %s, CAST(%s AS jsonb))" for n in range(count))
        return f"(VALUES {rows}) AS v(n, key, value)"

    session = SessionRecord
    last_sequence, last_update_time = (
        column(session, "last_sequence"),
        column(session, "last_update_time"),
    )
    event_columns = ", ".join(column(EventRecord, name) for name in _EVENT_PARAM_NAMES)
    event_params = ", ".join(["%s"] * len(_EVENT_PARAM_NAMES))
    ctes = [
        f"claim AS (UPDATE {table(session)} SET {last_sequence} = {last_sequence} + 1, "
        f"{last_update_time} = CASE WHEN {last_update_time} > %s "
        f"THEN {last_update_time} ELSE %s END "
        f"WHERE {column(session, 'session_id')} = %s AND {column(session, 'app_name')} = %s "
        f"AND {column(session, 'user')} = %s "
        f"AND {_revision_condition(table(session), column(session, 'key'))} "
        f"RETURNING {column(session, 'key')} AS id, {last_sequence} AS sequence, "
        f"{last_update_time} AS last_update_time, {column(session, 'temporary')} AS temporary, "
        f"{column(session, 'user')} AS user_pk, {column(session, 'app_name')} AS app_name)",
        f"event_row AS (INSERT INTO {table(EventRecord)} ({column(EventRecord, 'session')}, "
        f"{column(EventRecord, 'sequence')}, {event_columns}, "
        f"{column(EventRecord, 'memory_excluded')}, {column(EventRecord, 'user')}, "
        f"{column(EventRecord, 'app_name')}) "
        f"SELECT claim.id, claim.sequence, {event_params}, "
        f"(claim.temporary OR NOT ({consent_sql})), claim.user_pk, claim.app_name FROM claim)",
    ]
    previous = None
    for name, model, owner_names, owner_values, count in (
        ("session_keys", SessionState, ("session",), ("claim.id",), session_keys),
        ("user_keys", UserState, ("user", "app_name"), ("%s", "%s"), user_keys),
        ("app_keys", AppState, ("app_name",), ("%s",), app_keys),
    ):
        if not count:
            continue
        after = f", (SELECT count(*) FROM {previous}) AS done" if previous else ""
        owners = ", ".join(column(model, owner) for owner in owner_names)
        value = column(model, "value")
        ctes.append(
            f"{name} AS (INSERT INTO {table(model)} ({owners}, {column(model, 'key')}, {value}) "
            f"SELECT {', '.join(owner_values)}, v.key, v.value FROM claim{after}, {values(count)} "
            f"ORDER BY v.n ON CONFLICT ({owners}, {column(model, 'key')}) "
            f"DO UPDATE SET {value} = EXCLUDED.{value} RETURNING 1)"
        )
        previous = name
    return f"WITH {', '.join(ctes)} SELECT sequence, last_update_time FROM claim"


def _append_statement_postgresql(
    *,
    session_id: str,
    app_name: str,
    user_pk: int,
    fields: dict[str, Any],
    scoped: ScopedState,
    now: float,
    revision: SessionRevision | None,
) -> tuple[str, list[Any]]:
    """The one statement of an append on PostgreSQL, with its parameters."""
    params: list[Any] = [now, now, session_id, app_name, user_pk, *_revision_params(revision)]
    params += _event_record_params(fields, _EVENT_PARAM_NAMES)
    params.append(user_pk)
    for owner, values in (
        ((), scoped.session),
        ((user_pk, app_name), scoped.user),
        ((app_name,), scoped.app),
    ):
        if values:
            params += owner
            for key, value in sorted(values.items()):
                params += (key, _json_param(value))
    sql = _append_sql_postgresql(
        len(scoped.session), len(scoped.user), len(scoped.app), memory_consent_get().sql
    )
    return sql, params


def event_store(
    *,
    session_id: str,
    app_name: str,
    user_pk: int,
    fields: dict[str, Any],
    scoped: ScopedState,
    revision: SessionRevision | None = None,
) -> tuple[int, float]:
    """Store an event row and apply its stored scopes' keys, atomically; returns the event's
    sequence number and the session's last_update_time: the event's timestamp, as ADK's
    services set it, unless the session already holds a later one (it never goes back, so
    the stale-session check can compare it).

    Claims the next sequence number first, which takes the session row lock.
    On PostgreSQL all of it is one statement (one round trip when autocommit
    is on; inside a transaction it gets a savepoint like ``atomic`` would).
    Raises SessionNotFoundError if the user has no such session, StaleSessionError if
    ``revision`` is stale (nothing is written either way) and IntegrityError if the event id
    is already in the session.
    """
    now = fields["timestamp"]
    if connection.vendor != "postgresql":
        with transaction.atomic():
            session_key, sequence, last_update_time = sequence_claim(
                session_id=session_id,
                app_name=app_name,
                user_pk=user_pk,
                now=now,
                revision=revision,
            )
            excluded = _memory_excluded_read(session_key=session_key, user_pk=user_pk)
            event_record_insert(
                session_key=session_key,
                sequence=sequence,
                fields={
                    **fields,
                    "memory_excluded": excluded,
                    "user_id": user_pk,
                    "app_name": app_name,
                },
            )
            state_rows_upsert(
                session_key=session_key, user_pk=user_pk, app_name=app_name, scoped=scoped
            )
        return sequence, last_update_time
    sql, params = _append_statement_postgresql(
        session_id=session_id,
        app_name=app_name,
        user_pk=user_pk,
        fields=fields,
        scoped=scoped,
        now=now,
        revision=revision,
    )
    in_transaction = not connection.get_autocommit()
    savepoint = transaction.atomic() if in_transaction else contextlib.nullcontext()
    with savepoint, connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        raise _stale_or_missing(session_id=session_id, app_name=app_name, user_pk=user_pk)
    return row[0], row[1]


async def event_store_async(
    *,
    session_id: str,
    app_name: str,
    user_pk: int,
    fields: dict[str, Any],
    scoped: ScopedState,
    then: async_database.StoreRead | None = None,
    revision: SessionRevision | None = None,
) -> tuple[tuple[int, float], Any]:
    """``event_store`` from an event loop, on PostgreSQL: the same one statement, in
    autocommit on the loop's own connection (``core.async_database``), and the answer of
    ``then`` (None without): its statements follow in the same round trip, in the append's
    transaction, so they read the event stored, and what they write is committed with it
    or not at all."""
    sql, params = _append_statement_postgresql(
        session_id=session_id,
        app_name=app_name,
        user_pk=user_pk,
        fields=fields,
        scoped=scoped,
        now=fields["timestamp"],
        revision=revision,
    )
    statements = [(sql, params), *(then.statements if then is not None else ())]
    rows, *after = await async_database.fetch_each(statements, repeatable=False)
    if not rows:
        raise await sync_to_async(_stale_or_missing)(
            session_id=session_id, app_name=app_name, user_pk=user_pk
        )
    return (rows[0][0], rows[0][1]), then.assemble(after) if then is not None else None
