"""Reads of the session store. Every function takes the owner, so a caller can
never read another user's session by id alone: such a session reads as absent."""

from sessions_app.selectors.events import (
    StoredEvent,
    StoredEventsPage,
    session_latest_compaction,
    stored_event_get,
    stored_events_of_turn,
    stored_events_page,
    stored_events_recent,
)
from sessions_app.selectors.sessions import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    InvalidPageTokenError,
    StoreRead,
    scoped_states_get,
    session_get,
    session_get_read,
    session_list,
    session_list_read,
    session_record_get,
    session_scoped_state,
    session_titles,
    sessions_temporary,
    store_read_run,
    user_pk_from_id,
)

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "InvalidPageTokenError",
    "StoreRead",
    "StoredEvent",
    "StoredEventsPage",
    "scoped_states_get",
    "session_get",
    "session_get_read",
    "session_latest_compaction",
    "session_list",
    "session_list_read",
    "session_record_get",
    "session_scoped_state",
    "session_titles",
    "sessions_temporary",
    "store_read_run",
    "stored_event_get",
    "stored_events_of_turn",
    "stored_events_page",
    "stored_events_recent",
    "user_pk_from_id",
]
