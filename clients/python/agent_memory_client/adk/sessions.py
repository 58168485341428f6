"""``RemoteSessionService``: ADK's ``BaseSessionService`` with the sessions kept by the server.

It answers ADK's own ``Session`` and ``Event`` objects with ADK's semantics, so
``Runner`` and everything in ADK that reads a session work unchanged: state is
the merged view (``app:`` and ``user:`` keys prefixed), ``temp:`` keys live in
the session object for the rest of the invocation and are never sent,
``last_update_time`` is the stored one, and ``GetSessionConfig`` filters
(``num_recent_events``, ``after_timestamp``) run on the server. ``get_session``
answers every stored event, those a rewind took out included, as ADK's services
do: ADK's ``Runner`` leaves them out of the model's context and names any of
their invocations in a later ``rewind_async``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import weakref
from typing import Any

from google.adk.errors import StaleSessionError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from pydantic import BaseModel, ConfigDict, Field
from pydantic_core import PydanticSerializationError, to_jsonable_python
from typing_extensions import override

from agent_memory_client.client import (
    AgentMemoryClient,
    session_path,
    sessions_path,
)
from agent_memory_client.errors import (
    BadRequestError,
    ConflictError,
    NotFoundError,
)

__all__ = ["RemoteSessionService"]

logger = logging.getLogger(__name__)

STALE_SESSION_CODE = "stale_session"


class StoredSession(BaseModel):
    """A session as the server sends it; fields ADK's ``Session`` does not have are ignored."""

    model_config = ConfigDict(extra="ignore")

    id: str
    app_name: str
    user_id: str
    state: dict[str, Any] = Field(default_factory=dict)
    events: list[Event] = Field(default_factory=list)
    last_update_time: float = 0.0

    def to_session(self) -> Session:
        return Session(
            id=self.id,
            app_name=self.app_name,
            user_id=self.user_id,
            state=self.state,
            events=self.events,
            last_update_time=self.last_update_time,
        )


class _SessionsPage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    sessions: list[StoredSession]
    next_page_token: str | None = None


def client_from_arguments(
    *, base_url: str | None, api_key: str | None, client: AgentMemoryClient | None, timeout: float
) -> AgentMemoryClient:
    """The client a service was given, or a new one for ``base_url`` and ``api_key``."""
    if client is not None:
        if base_url is not None or api_key is not None:
            raise ValueError("pass either client or base_url and api_key, not both")
        return client
    if base_url is None or api_key is None:
        raise ValueError("base_url and api_key are required (or pass client)")
    return AgentMemoryClient(base_url=base_url, api_key=api_key, timeout=timeout)


class RemoteSessionService(BaseSessionService):
    """ADK sessions stored by an agent memory server, through an app's API key.

    ``app_name`` in every call is the server's app (the key reaches only its own
    app: any other answers as missing); ``user_id`` is the app's own id of the
    end user. Appends are atomic on the server and serialised per session, so
    concurrent writers neither lose events nor get stale-session errors.

    With ``stale_check=True``, ``append_event`` raises ADK's ``StaleSessionError`` (and
    stores nothing) exactly when ADK's ``DatabaseSessionService`` would: the stored session
    was updated after the ``Session`` object's ``last_update_time`` and its newest event is
    not the object's newest. Reload the session with ``get_session`` and try again.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AgentMemoryClient | None = None,
        timeout: float = 30.0,
        stale_check: bool = False,
    ) -> None:
        self.client = client_from_arguments(
            base_url=base_url, api_key=api_key, client=client, timeout=timeout
        )
        self.stale_check = stale_check
        self._append_locks: weakref.WeakValueDictionary[tuple[str, str, str], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def close(self) -> None:
        """Close the connections of the running event loop."""
        await self.client.aclose()

    def _append_lock(self, session: Session) -> asyncio.Lock:
        """One lock per session: appends from this process to one session go one at a
        time, so the session object's events are in the order the server stored them."""
        key = (session.app_name, session.user_id, session.id)
        lock = self._append_locks.get(key)
        if lock is None:
            lock = self._append_locks[key] = asyncio.Lock()
        return lock

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        body: dict[str, Any] = {
            "state": {
                key: value
                for key, value in (state or {}).items()
                if not key.startswith(State.TEMP_PREFIX)
            }
        }
        if session_id is not None:
            body["session_id"] = session_id
        # An id the end user already has in the app answers 409: ConflictError, which is
        # ADK's AlreadyExistsError, as ADK's own services raise.
        response = await self.client.request(
            "POST", sessions_path(app_name, user_id), content=_json_bytes(body)
        )
        return StoredSession.model_validate_json(response.content).to_session()

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        params: dict[str, Any] = {}
        if config is not None:
            params["num_recent_events"] = config.num_recent_events
            params["after_timestamp"] = config.after_timestamp
        try:
            response = await self.client.request(
                "GET", session_path(app_name, user_id, session_id), params=params
            )
        except NotFoundError:
            return None
        return StoredSession.model_validate_json(response.content).to_session()

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        """Every session of the end user (of every end user when ``user_id`` is None, which
        needs the ``users:admin`` scope), without events, oldest update first as ADK orders
        them."""
        if user_id is None:
            user_ids = [user async for user in self.client.iter_user_ids(app_name=app_name)]
        else:
            user_ids = [user_id]
        sessions = []
        for owner in user_ids:
            token = None
            while True:
                response = await self.client.request(
                    "GET", sessions_path(app_name, owner), params={"page_token": token}
                )
                page = _SessionsPage.model_validate_json(response.content)
                sessions.extend(stored.to_session() for stored in page.sessions)
                token = page.next_page_token
                if not token:
                    break
        for session in sessions:
            session.events = []
        sessions.sort(key=lambda session: (session.last_update_time, session.user_id, session.id))
        return ListSessionsResponse(sessions=sessions)

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        try:
            await self.client.request("DELETE", session_path(app_name, user_id, session_id))
        except NotFoundError:
            return

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The end user's state with raw keys (``"name"``, not ``"user:name"``), as ADK's."""
        prefixed = await self.client.get_user_state(app_name=app_name, user_id=user_id)
        return {key.removeprefix(State.USER_PREFIX): value for key, value in prefixed.items()}

    @override
    @staticmethod
    def _adopt_replaced_tool_results(event: Event, stored: dict[str, Any]) -> None:
        """Give ``event`` the tool results the server stored: a result too large for the
        server (``MAX_EVENT_BYTES``) is stored as an error saying so, and the model must
        see what the session holds, the call answered either way."""
        if not event.get_function_responses() or event.content is None:
            return
        for part, stored_part in zip(
            event.content.parts or (),
            (stored.get("content") or {}).get("parts") or (),
            strict=False,
        ):
            answer = stored_part.get("function_response")
            if part.function_response is None or answer is None:
                continue
            kept = answer.get("response")
            if kept != to_jsonable_python(part.function_response.response, bytes_mode="base64"):
                part.function_response.response = kept

    async def append_event(self, session: Session, event: Event) -> Event:
        """Store ``event`` and apply its state delta, then update ``session`` in place as
        ADK's own services do (state, events, last_update_time).

        ``temp:`` keys go into ``session.state`` before anything is sent and are never
        stored. The session object changes only once the server has stored the event, so
        a failed append can be retried. A rewind event's state change is the server's
        (it replays the stored history), and the session takes that one.
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        path = session_path(session.app_name, session.user_id, session.id) + "events/"
        body = event.model_dump_json(exclude_none=True).encode()
        params = None
        if self.stale_check:
            params = {
                "stale_check_last_update_time": repr(session.last_update_time),
                "stale_check_last_event_id": session.events[-1].id if session.events else "",
            }
        async with self._append_lock(session):
            try:
                response = await self.client.request("POST", path, content=body, params=params)
            except ConflictError as error:
                if isinstance(error.body, dict) and error.body.get("code") == STALE_SESSION_CODE:
                    raise StaleSessionError(
                        "The session has been modified in storage since it was loaded. Please "
                        "reload the session before appending more events."
                    ) from error
                raise
            except NotFoundError as error:
                raise SessionNotFoundError(
                    f"Session {session.id!r} not found in app {session.app_name!r} for user "
                    f"{session.user_id!r}."
                ) from error
            except BadRequestError as error:
                raise ValueError(f"The server refused the event: {error.detail}") from error
            stored = response.json()
            self._adopt_replaced_tool_results(event, stored["event"])
            if event.actions.rewind_before_invocation_id:
                stored_actions = stored["event"].get("actions", {})
                event.actions.state_delta = stored_actions.get("state_delta", {})
            session.last_update_time = stored["last_update_time"]
            return self._commit_event_to_session(session, event)


def _json_bytes(body: dict[str, Any]) -> bytes:
    """``body`` as JSON, rich values (datetimes, models, sets) in their JSON form. A value
    with none (a callable) is stored as its ``repr`` with a warning, as ADK's database
    service stores it; NaN and infinities are a clear error (JSON has no such numbers)."""
    try:
        safe = to_jsonable_python(body)
    except PydanticSerializationError:
        logger.warning(
            "Some state values are not JSON-serialisable; their repr is stored instead.",
            exc_info=True,
        )
        safe = to_jsonable_python(body, serialize_unknown=True)
    try:
        return json.dumps(safe, separators=(",", ":"), allow_nan=False).encode()
    except ValueError as error:
        raise ValueError(f"The state cannot be stored as JSON: {error}") from None
