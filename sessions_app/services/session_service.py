"""``SessionService``: ADK's ``BaseSessionService`` API over the session store."""

from __future__ import annotations

import asyncio
from typing import Any

from asgiref.sync import sync_to_async

from chatapp import async_database
from sessions_app import selectors
from sessions_app.events import Event
from sessions_app.services.events import event_append, event_append_async, session_rewind
from sessions_app.services.sessions import session_create, session_delete
from sessions_app.types import GetSessionConfig, ListSessionsResponse, Session

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
            return await event_append_async(session=session, event=event)
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
