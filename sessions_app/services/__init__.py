"""Writes of the session store, and ``SessionService``, its ADK-shaped async facade.

State changes only through events: ``event_append`` stores an event and applies
its ``state_delta`` to the three stored scopes in one short transaction. The
transaction starts by bumping the session's ``last_sequence`` with an UPDATE,
which takes the session row lock; concurrent appends to one session therefore
queue on that lock and get contiguous sequence numbers, and no caller ever sees
a "stale session" error. State rows are then upserted key by key (so writers
never overwrite each other's keys) in a fixed order: session, user, app, keys
sorted, so two sessions of one user cannot deadlock on shared ``user:`` keys.
The statements themselves live in ``sessions_app.storage``; on PostgreSQL an
append is all of that in a single statement, one round trip to the database.

``sessions``: create, rename, delete, expire; ``events``: append and rewind;
``session_service``: the async facade; ``artifacts`` and ``artifact_service``: files saved in
versions with ADK's artifact semantics, and their async facade.
"""

from sessions_app.errors import InvalidStateError
from sessions_app.services.artifact_service import ArtifactService
from sessions_app.services.artifacts import (
    artifact_checked_save,
    artifact_delete,
    artifact_files_orphaned_delete,
    artifact_save,
    artifact_user_copy,
    attachments_store,
)
from sessions_app.services.events import event_append, session_rewind
from sessions_app.services.session_service import SessionService
from sessions_app.services.sessions import (
    IDENTIFIER_MAX_LENGTH,
    IDENTIFIER_PATTERN,
    IDENTIFIER_RULE,
    memory_events_store,
    session_create,
    session_delete,
    session_rename,
    sessions_expire_idle,
    sessions_temporary_expire,
)
from sessions_app.services.user_state import (
    user_state_correct,
    user_state_delete,
    user_state_put,
)
from sessions_app.types import GetSessionConfig, ListSessionsResponse

__all__ = [
    "IDENTIFIER_MAX_LENGTH",
    "IDENTIFIER_PATTERN",
    "IDENTIFIER_RULE",
    "ArtifactService",
    "GetSessionConfig",
    "InvalidStateError",
    "ListSessionsResponse",
    "SessionService",
    "artifact_checked_save",
    "artifact_delete",
    "artifact_files_orphaned_delete",
    "artifact_save",
    "artifact_user_copy",
    "attachments_store",
    "event_append",
    "memory_events_store",
    "session_create",
    "session_delete",
    "session_rename",
    "session_rewind",
    "sessions_expire_idle",
    "sessions_temporary_expire",
    "user_state_correct",
    "user_state_delete",
    "user_state_put",
]
