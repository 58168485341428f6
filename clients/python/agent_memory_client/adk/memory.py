"""``RemoteMemoryService``: ADK's ``BaseMemoryService`` over the server's long-term memory.

The server does not keep sessions verbatim as ADK's in-memory service does: it
turns them into facts in a background job (extraction, consolidation against
what it already knows, provenance). ``search_memory`` answers those facts as
ADK ``MemoryEntry`` objects, best first, so ``preload_memory`` and
``load_memory`` put them in front of the model unchanged; each entry's
``custom_metadata`` carries its ``score``, ``topic`` and ``sources`` (the
session and event it was drawn from).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types
from typing_extensions import override

from agent_memory_client.adk.sessions import client_from_arguments
from agent_memory_client.client import AgentMemoryClient
from agent_memory_client.errors import NotFoundError

if TYPE_CHECKING:
    from google.adk.events.event import Event
    from google.adk.sessions.session import Session

__all__ = ["RemoteMemoryService"]

WAIT_FOR_COMPLETION = "wait_for_completion"
_ENTRY_METADATA_FIELDS = ("score", "topic", "sources")


class RemoteMemoryService(BaseMemoryService):
    """ADK memory kept by an agent memory server, through an app's API key.

    Generation runs in the background on the server and never holds up a turn:
    ``add_session_to_memory`` and ``add_events_to_memory`` return once the job is
    queued. With ``wait_for_completion=True`` (or that key in an
    ``add_events_to_memory`` call's ``custom_metadata``, as Vertex AI Memory Bank
    takes it) they return once the job is done, and raise ``JobFailedError`` if it
    failed.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AgentMemoryClient | None = None,
        timeout: float = 30.0,
        wait_for_completion: bool = False,
        job_timeout: float = 120.0,
    ) -> None:
        self.client = client_from_arguments(
            base_url=base_url, api_key=api_key, client=client, timeout=timeout
        )
        self.wait_for_completion = wait_for_completion
        self.job_timeout = job_timeout

    async def close(self) -> None:
        """Close the connections of the running event loop."""
        await self.client.aclose()

    @override
    async def add_session_to_memory(self, session: Session) -> None:
        """Generate memories from a session the server stores (one the session service
        kept there); events it already drew from are not drawn from again."""
        try:
            job = await self.client.generate_memories(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id
            )
        except NotFoundError as error:
            raise SessionNotFoundError(
                f"Session {session.id!r} of app {session.app_name!r} is not stored on the "
                "server; add its events with add_events_to_memory instead."
            ) from error
        await self._maybe_wait(session.app_name, job, wait=self.wait_for_completion)

    @override
    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Generate memories from these events only (a delta, not the whole session), as
        ADK means it: they feed memory generation and nothing else.

        They never enter a conversation: those the session ``session_id`` names already
        stores are read from it, the others the server keeps apart (each memory still links
        to the event it came from), in no session ``get_session`` or ``list_sessions``
        answers, and their state deltas change no state.
        """
        metadata = dict(custom_metadata or {})
        wait = bool(metadata.pop(WAIT_FOR_COMPLETION, self.wait_for_completion))
        job = await self.client.add_events_to_memory(
            app_name=app_name,
            user_id=user_id,
            events=[event.model_dump(mode="json", exclude_none=True) for event in events],
            session_id=session_id,
            custom_metadata=metadata,
        )
        await self._maybe_wait(app_name, job, wait=wait)

    @override
    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Store each entry as a memory of the end user, stated explicitly (no extraction).

        An entry's text is that of its content's parts; ``topic`` comes from the entry's
        ``custom_metadata`` or the call's, and the rest of both is kept as the memory's
        metadata (the entry's wins).
        """
        for memory in memories:
            text = _entry_text(memory)
            if not text:
                raise ValueError("A memory entry needs text in its content's parts.")
            metadata = {**(custom_metadata or {}), **memory.custom_metadata}
            topic = metadata.pop("topic", None)
            await self.client.add_memory(
                app_name=app_name,
                user_id=user_id,
                text=text,
                topic=str(topic) if topic is not None else None,
                metadata=metadata,
            )

    @override
    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        found = await self.client.search_memory(app_name=app_name, user_id=user_id, query=query)
        return SearchMemoryResponse(memories=[_memory_entry(memory) for memory in found])

    @override
    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Delete one memory by the id ``search_memory`` gave it; an unknown id (or none)
        deletes nothing, as ADK's in-memory service does."""
        if not memory_id:
            return
        try:
            await self.client.delete_memory(app_name=app_name, user_id=user_id, memory_id=memory_id)
        except NotFoundError:
            return

    async def _maybe_wait(self, app_name: str, job: dict[str, Any], *, wait: bool) -> None:
        """Follow the call's jobs when asked to; a job without id is one the server had
        nothing to do for (the end user turned memory creation off)."""
        if not wait:
            return
        for job_id in job.get("job_ids") or [job.get("job_id")]:
            if job_id:
                await self.client.wait_for_job(
                    app_name=app_name, job_id=job_id, timeout=self.job_timeout
                )


def _entry_text(memory: MemoryEntry) -> str:
    return " ".join(part.text for part in memory.content.parts or () if part.text).strip()


def _memory_entry(memory: dict[str, Any]) -> MemoryEntry:
    return MemoryEntry(
        id=memory["id"],
        content=types.Content(role="user", parts=[types.Part(text=memory["text"])]),
        author=memory.get("author"),
        timestamp=memory.get("timestamp"),
        custom_metadata={
            field: memory[field]
            for field in _ENTRY_METADATA_FIELDS
            if memory.get(field) is not None
        },
    )
