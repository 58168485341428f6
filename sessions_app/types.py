"""The session object and the option types of the ADK-shaped service API."""

from __future__ import annotations

from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from sessions_app.events import Event


class Session(BaseModel):
    """A session as ``SessionService`` returns it.

    ``state`` is the merged view: session keys as they are, ``user:`` and
    ``app:`` keys re-prefixed, ``temp:`` keys of the current invocation while
    it runs (they are never stored).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    app_name: str
    user_id: str
    state: dict[str, Any] = Field(default_factory=dict)
    events: list[Event] = Field(default_factory=list)
    last_update_time: float = 0.0


class GetSessionConfig(BaseModel):
    """Which events ``get_session`` returns.

    ``num_recent_events`` keeps the last N, ``after_timestamp`` those at or
    after a time; events hidden by a rewind are left out unless
    ``include_rewound`` is set.
    """

    num_recent_events: int | None = None
    after_timestamp: float | None = None
    include_rewound: bool = False


class ListSessionsResponse(BaseModel):
    """One page of sessions, newest first; pass ``next_page_token`` back for the next."""

    sessions: list[Session] = Field(default_factory=list)
    next_page_token: str | None = None


class ArtifactVersion(BaseModel):
    """One version of an artifact as ADK's ``ArtifactVersion`` describes it.

    ``canonical_uri`` is ADK's ``artifact://`` address of the version (what an ADK artifact
    reference points at), not a storage location: the bytes are reached only through the
    service or a download view that checks who asks.
    """

    version: int
    canonical_uri: str
    custom_metadata: dict[str, Any] = Field(default_factory=dict)
    create_time: float
    mime_type: str | None = None


class SessionRevision(NamedTuple):
    """What a writer's copy of a session holds, for ADK's stale-session check: its
    ``last_update_time`` and the id of its newest event (None: it holds none). The copy is
    stale, as ADK's database service judges it, when the stored session was updated after it
    and the stored newest event is not the copy's."""

    last_update_time: float
    last_event_id: str | None
