"""``MemoryService``: ADK's ``BaseMemoryService`` API over this project's long-term memory.

Same method names and keyword arguments as ADK (``add_session_to_memory``, ``search_memory``,
``add_memory``, ``delete_memory``), async like ADK's. Unlike ADK's in-memory service, a
session is not stored verbatim: it is turned into facts by a generation job, and search
results are those facts, each with a score and the events it came from.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from google.genai import types
from pydantic import BaseModel, Field

from memory_app import selectors, services
from memory_app.extraction import ExtractedFact
from memory_app.models import GenerationJob, MemoryScope, SourceType
from sessions_app.errors import SessionNotFoundError
from sessions_app.selectors import user_pk_from_id
from sessions_app.types import Session


class MemorySourceRef(BaseModel):
    """An event a memory was derived from."""

    session_id: str
    event_id: str


class MemoryEntry(BaseModel):
    """One memory as ``search_memory`` returns it; ``content`` holds the text as ADK's does."""

    id: str
    text: str
    score: float = 0.0
    confidence: float = 1.0
    topic: str = ""
    author: str = "user"
    timestamp: str | None = None
    content: types.Content
    sources: list[MemorySourceRef] = Field(default_factory=list)


class SearchMemoryResponse(BaseModel):
    memories: list[MemoryEntry] = Field(default_factory=list)


def _entry(result: selectors.ScoredMemory) -> MemoryEntry:
    return MemoryEntry(
        id=result.id,
        text=result.text,
        score=result.score,
        confidence=result.confidence,
        topic=result.topic,
        timestamp=result.updated_at.isoformat(),
        content=types.Content(role="user", parts=[types.Part(text=result.text)]),
        sources=[
            MemorySourceRef(session_id=s.session_id, event_id=s.event_id) for s in result.sources
        ],
    )


def _memory_search(*, app_name: str, user_pk: int, session_id: str | None, **search: Any):
    key = selectors.memory_session_key(app_name=app_name, user_pk=user_pk, session_id=session_id)
    return selectors.memory_search(app_name=app_name, user_pk=user_pk, session_id=key, **search)


def _facts_store(*, app_name: str, user_pk: int, session_id: str | None, facts: list):
    key = selectors.memory_session_key(app_name=app_name, user_pk=user_pk, session_id=session_id)
    if session_id is not None and key is None:
        raise SessionNotFoundError(f"Session {session_id!r} not found in app {app_name!r}.")
    return services.memory_facts_store(
        app_name=app_name, user_pk=user_pk, session_id=key, facts=facts
    )


def _session_ingest(*, session: Session, wait: bool) -> str | None:
    user_pk = user_pk_from_id(session.user_id)
    if user_pk is None:
        return None
    key = selectors.memory_session_key(
        app_name=session.app_name, user_pk=user_pk, session_id=session.id
    )
    if key is None:
        return None
    job = services.memory_job_request(
        app_name=session.app_name,
        user_pk=user_pk,
        session_id=key,
        trigger=GenerationJob.Trigger.SESSION_END,
        enqueue=not wait,
    )
    if job is None:
        return None
    if wait:
        job = services.memory_job_run(job_id=str(job.id))
    return job.status


class MemoryService:
    """Long-term memory with ADK's ``BaseMemoryService`` methods."""

    async def add_session_to_memory(self, session: Session, *, wait: bool = False) -> str | None:
        """Turn the session's unprocessed events into memories; returns the job's status.

        By default a background job is queued (``queued``); ``wait=True`` runs it here and
        returns when the memories are stored (for evaluations and scripts). None when the user
        turned memory creation off or the chat is temporary.
        """
        return await sync_to_async(_session_ingest)(session=session, wait=wait)

    async def search_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        query: str,
        session_id: str | None = None,
        limit: int = 10,
    ) -> SearchMemoryResponse:
        """The user's memories (and the app's shared ones) most relevant to ``query``."""
        user_pk = user_pk_from_id(user_id)
        if user_pk is None:
            return SearchMemoryResponse()
        results = await sync_to_async(_memory_search)(
            app_name=app_name, user_pk=user_pk, query=query, session_id=session_id, limit=limit
        )
        return SearchMemoryResponse(memories=[_entry(result) for result in results])

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        text: str,
        session_id: str | None = None,
        event_ids: list[str] | None = None,
        topic: str = "",
        source_type: str = SourceType.EXPLICIT,
        scope: str = MemoryScope.USER,
    ) -> list[str]:
        """Store a fact directly (through consolidation and its safety checks), sourced from
        ``event_ids`` of ``session_id`` when given; returns the ids of the memories kept.

        ``scope`` "session": the fact holds for the conversation ``session_id`` only, is
        recalled there alone and goes when it is deleted. Raises ValueError for any other
        scope, or for "session" without ``session_id``."""
        if scope not in (MemoryScope.USER, MemoryScope.SESSION):
            raise ValueError(f"scope must be 'user' or 'session', not {scope!r}")
        if scope == MemoryScope.SESSION and not session_id:
            raise ValueError("a session-scope memory needs its session_id")
        user_pk = user_pk_from_id(user_id)
        if user_pk is None:
            return []
        fact = ExtractedFact(
            text=text,
            topic=topic,
            source_type=SourceType(source_type),
            confidence=0.9,
            importance=0.5,
            event_ids=list(event_ids or []),
            scope=MemoryScope(scope),
        )
        report = await sync_to_async(_facts_store)(
            app_name=app_name, user_pk=user_pk, session_id=session_id, facts=[fact]
        )
        return [str(m.id) for m in report.created + report.updated + report.unchanged]

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str) -> bool:
        """Delete one of the user's memories; False when they have none with that id."""
        user_pk = user_pk_from_id(user_id)
        if user_pk is None:
            return False
        return await sync_to_async(services.memory_delete)(
            app_name=app_name, user_pk=user_pk, memory_id=memory_id
        )
