"""Reads of sessions: one with its merged state and events, a page of a user's sessions."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Iterable
from functools import partial
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.db import connection
from django.urls import reverse

from core import async_database
from core.async_database import StoreRead
from sessions_app.event_blobs import BLOB_KEY, content_has_blobs
from sessions_app.events import Event
from sessions_app.models import SessionRecord
from sessions_app.selectors.rows import events_from_raw_rows, scoped_states_fold
from sessions_app.selectors.statements import (
    SESSION_AND_STATES_SQL,
    SESSION_PAGE_SQL,
    fetch,
    fetch_each,
    scoped_states_sql,
    session_events_statement,
)
from sessions_app.state import ScopedState, state_merge
from sessions_app.types import GetSessionConfig, ListSessionsResponse, Session

_qn = connection.ops.quote_name

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
    *, session_keys: Iterable[str], app_name: str, user_pk: int
) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Session states of the sessions of these keys by session id, the user's state and the
    app's, in one query."""
    session_keys = list(session_keys)
    placeholders = ", ".join(["%s"] * len(session_keys))
    rows = fetch(scoped_states_sql(placeholders), [*session_keys, user_pk, app_name, app_name])
    by_session, user_state, app_state, _ = scoped_states_fold(rows)
    return by_session, user_state, app_state


def store_read_run(read: StoreRead) -> Any:
    """The answer of ``read``, its statements run on Django's connection."""
    return read.assemble(fetch_each(read.statements) if read.statements else [])


# Rows a read may bring back for its answer to be built on the event loop. Building
# a long history is milliseconds of CPU (about 10 ms for 2,000 events): on the
# loop it would hold up every other socket of the process, so it goes to a thread.
ROWS_ASSEMBLED_ON_LOOP = 200


async def store_read_async(read: StoreRead) -> Any:
    """The answer of ``read``, from async code: on PostgreSQL its statements go from the event
    loop itself (``core.async_database``), taking nothing from the one thread that
    ``sync_to_async`` gives a process; elsewhere in one hop to that thread."""
    if not read.statements:
        return read.assemble([])
    if not async_database.available():
        return await sync_to_async(store_read_run)(read)
    results = await async_database.fetch_each(read.statements)
    if sum(len(rows) for rows in results) > ROWS_ASSEMBLED_ON_LOOP or _rows_name_blobs(results):
        return await asyncio.to_thread(read.assemble, results)
    return read.assemble(results)


def _rows_name_blobs(results: list[list[tuple]]) -> bool:
    """Whether the rows hold an event's large part stored beside it (``event_blobs``): its
    file is read as the answer is built, a wait on the storage the loop must not make."""
    marker = f'"{BLOB_KEY}"'
    return any(
        marker in value
        if isinstance(value, str)
        else isinstance(value, dict) and content_has_blobs(value)
        for rows in results
        for row in rows
        for value in row
    )


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
    by_session, user_state, app_state, records = scoped_states_fold(results[0])
    if not records:
        return None
    events: list[Event] = []
    if with_events:
        event_rows = results[1]
        if newest_first:
            event_rows.reverse()
        events = events_from_raw_rows(event_rows)
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
    return session_with_events_read(
        app_name=app_name,
        user_pk=user_pk,
        session_id=session_id,
        events_statement=session_events_statement(
            app_name=app_name, user_pk=user_pk, session_id=session_id, config=config
        ),
        newest_first=config.num_recent_events is not None,
    )


def session_with_events_read(
    *,
    app_name: str,
    user_pk: int,
    session_id: str,
    events_statement: tuple[str, list[Any]] | None,
    newest_first: bool,
) -> StoreRead:
    """The session row with every state it sees, then the events ``events_statement`` reads
    (none when it is None; ``newest_first`` when it reads them newest first), as a ``Session``
    or None when the user has no such session."""
    statements = [
        (
            SESSION_AND_STATES_SQL,
            [
                *(session_id, app_name, user_pk),
                *(session_id, app_name, user_pk),
                *(user_pk, app_name, app_name),
            ],
        )
    ]
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
            newest_first=newest_first,
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
    by_session, user_state, app_state, records = scoped_states_fold(results[0])
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
        SESSION_PAGE_SQL[bool(page_token)],
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


_SESSION_KEY_AND_APP_SQL = (
    f"SELECT {_qn('key')}, {_qn('app_name')} FROM {_qn(SessionRecord._meta.db_table)}"
    f" WHERE {_qn('session_id')} = %s AND {_qn('user_id')} = %s"
)


def _the_one_row(results: list[list[tuple]]) -> tuple | None:
    return tuple(results[0][0]) if len(results[0]) == 1 else None


def session_key_and_app_read(
    *, user_pk: int, session_id: str, app_name: str | None = None
) -> StoreRead:
    """The (key, app) of the user's session with this id in ``app_name``, or in the one app
    where they hold the id when no app is named; None for anyone else's, an unknown one, or
    (no app named) one they hold in several apps. One statement, for the chat socket's
    handshake to run from the event loop."""
    if app_name is not None:
        sql = f"{_SESSION_KEY_AND_APP_SQL} AND {_qn('app_name')} = %s"
        return StoreRead([(sql, [session_id, user_pk, app_name])], _the_one_row)
    return StoreRead([(f"{_SESSION_KEY_AND_APP_SQL} LIMIT 2", [session_id, user_pk])], _the_one_row)


class AmbiguousSessionError(LookupError):
    """The user holds sessions of this id in several apps, and the request named none."""


def session_record_get(
    *, user_pk: int, session_id: str, app_name: str | None = None
) -> SessionRecord | None:
    """The user's session of this id in ``app_name``, for the doors whose URL holds the id
    alone (REST, chat page and socket); None if they hold none.

    Without an app, the one app where the user holds the id; ``AmbiguousSessionError`` when
    they hold it in several (ADK's ids are unique only within an app)."""
    rows = SessionRecord.objects.filter(session_id=session_id, user_id=user_pk)
    if app_name is not None:
        return rows.filter(app_name=app_name).first()
    found = list(rows[:2])
    if len(found) > 1:
        raise AmbiguousSessionError(
            f"Session {session_id!r} exists in several apps: name the app (app_name)."
        )
    return found[0] if found else None


def session_chat_url(session: SessionRecord) -> str:
    """The chat page of the session, naming its app: a user may hold the same id in several."""
    chat = reverse("chat-session", kwargs={"session_id": session.session_id})
    return f"{chat}?{urlencode({'app_name': session.app_name})}"


def session_key_get(*, app_name: str, user_pk: int, session_id: str) -> str | None:
    """The surrogate key of the user's session of this id in the app, or None."""
    return (
        SessionRecord.objects.filter(session_id=session_id, app_name=app_name, user_id=user_pk)
        .values_list("key", flat=True)
        .first()
    )


def session_titles(*, user_pk: int, app_name: str, session_ids: Iterable[str]) -> dict[str, str]:
    """The titles of the user's sessions of the app among ``session_ids`` that have one, by
    session id."""
    rows = SessionRecord.objects.filter(
        user_id=user_pk, app_name=app_name, session_id__in=list(session_ids)
    ).exclude(title="")
    return dict(rows.values_list("session_id", "title"))


def sessions_temporary(*, user_pk: int, app_name: str, session_ids: Iterable[str]) -> set[str]:
    """The ids among ``session_ids`` of the user's temporary chats of the app (no long-term
    memory)."""
    rows = SessionRecord.objects.filter(
        user_id=user_pk, app_name=app_name, session_id__in=list(session_ids), temporary=True
    )
    return set(rows.values_list("session_id", flat=True))


def session_scoped_state(*, app_name: str, user_pk: int, session_id: str) -> ScopedState:
    """The state a session sees, split by scope (keys stored without their prefix)."""
    session_key = session_key_get(app_name=app_name, user_pk=user_pk, session_id=session_id)
    by_session, user_state, app_state = scoped_states_get(
        session_keys=[session_key] if session_key else [], app_name=app_name, user_pk=user_pk
    )
    return ScopedState(session=by_session.get(session_id, {}), user=user_state, app=app_state)
