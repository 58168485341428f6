"""``SessionService``: ADK's ``BaseSessionService`` API over the session store."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async

from core import async_database
from sessions_app import selectors
from sessions_app.events import Event
from sessions_app.services.events import (
    event_append_stored,
    event_append_stored_async,
    session_rewind,
)
from sessions_app.services.sessions import session_create, session_delete
from sessions_app.types import GetSessionConfig, ListSessionsResponse, Session, SessionRevision


class SessionService:
    """ADK's ``BaseSessionService`` API over the Django store: same names, same arguments.

    On PostgreSQL reads and appends go from the event loop itself
    (``core.async_database``); every other call, and every call on SQLite,
    runs its whole database work in one ``sync_to_async`` hop. Beyond ADK's API,
    ``append_event_stored`` answers an appended event with its place in the session.
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
        return await selectors.store_read_async(
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
        return await selectors.store_read_async(
            selectors.session_list_read(
                app_name=app_name, user_id=user_id, page_size=page_size, page_token=page_token
            )
        )

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await sync_to_async(session_delete)(
            app_name=app_name, user_id=user_id, session_id=session_id
        )

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        return (await self.append_event_stored(session, event)).event

    async def append_event_stored(
        self, session: Session, event: Event, *, revision: SessionRevision | None = None
    ) -> selectors.StoredEvent:
        """``append_event`` of an event that is not partial, answering it as stored: its
        place in the session with it, so that it can be shown without a read. With
        ``revision`` a stale copy of the session raises StaleSessionError."""
        if async_database.available():
            stored = await event_append_stored_async(
                session=session, event=event, revision=revision
            )
            return stored[0]
        return await sync_to_async(event_append_stored)(
            session=session, event=event, revision=revision
        )

    async def append_event_stored_then(
        self, session: Session, event: Event, *, then: async_database.StoreRead
    ) -> tuple[selectors.StoredEvent, Any]:
        """``append_event_stored``, then the statements of ``then`` once the event is stored: on
        PostgreSQL in the same round trip and transaction (a turn's last write and what
        follows it cost one, and a write among them, such as the release of the turn's claim,
        goes only with the event), else just after; answers the stored event and ``then``'s
        answer."""
        if async_database.available():
            return await event_append_stored_async(session=session, event=event, then=then)

        def appended_then() -> tuple[selectors.StoredEvent, Any]:
            return event_append_stored(session=session, event=event), selectors.store_read_run(then)

        return await sync_to_async(appended_then)()

    async def rewind_session(
        self, *, app_name: str, user_id: str, session_id: str, rewind_before_invocation_id: str
    ) -> Event:
        return await sync_to_async(session_rewind)(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            rewind_before_invocation_id=rewind_before_invocation_id,
        )
