"""Long-term memory as the runner sees it: permissions, preload, two tools, and the turn hook.

Every method is a thin async door onto ``memory_app.selectors`` and ``memory_app.services``;
the reads of every turn (permissions, trigger check) go from the event loop on PostgreSQL, the
rest through ``sync_to_async``. Nothing here waits for generation: the
turn hook only enqueues a job when a trigger is due.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from google.genai import types

from agents_app.runtime.memory_hooks import MemoryPermissions
from agents_app.runtime.tools import Tool, ToolContext, response_failed
from core.llm import MemorySnippet
from memory_app import selectors, services
from memory_app.models import HELD_FOR_REVIEW_NOTE, GenerationJob
from sessions_app.selectors import store_read_async, user_pk_from_id
from sessions_app.types import Session

LOAD_MEMORY_LIMIT = 5
CREATE_MEMORY_MAX_CHARS = 1000
# (session id, index versions) that ``permissions`` read for the turn under way, taken once
# by the preload that follows it in the same task, so the turn reads the versions once.
_turn_index_versions: ContextVar[tuple[str, tuple] | None] = ContextVar(
    "turn_index_versions", default=None
)


# Presence bookkeeping (a chat socket opened or closed) runs on a thread of its own, one
# database connection a process: every socket awaits it on connect and disconnect, and on the
# one thread that sync_to_async gives a process, a burst of 100 sockets connecting queued every
# turn's memory search behind 100 of these.
_PRESENCE_EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-presence")


def _presence_hop(function):
    """``function`` from async code, on the presence thread, its connection checked as Django
    checks a request's (closed when broken or past its age)."""
    return database_sync_to_async(function, thread_sensitive=False, executor=_PRESENCE_EXECUTOR)


def snippet_from(result: selectors.ScoredMemory) -> MemorySnippet:
    return MemorySnippet(
        id=result.id, text=result.text, confidence=result.confidence, score=result.score
    )


async def _search(
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    query: str,
    limit: int,
    sources: bool = True,
    index_versions: tuple | None = None,
) -> list[MemorySnippet]:
    user_pk = user_pk_from_id(user_id)
    if user_pk is None:
        return []
    results = await sync_to_async(selectors.memory_search)(
        app_name=app_name,
        user_pk=user_pk,
        query=query,
        session_id=session_id,
        limit=limit,
        sources=sources,
        index_versions=index_versions,
    )
    return [snippet_from(result) for result in results]


async def _load_memory(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return {"status": "error", "message": "query must be a non-empty string"}
    if not context.memory_enabled:
        return {"status": "error", "message": "memory is off for this chat"}
    snippets = await _search(
        app_name=context.app_name,
        user_id=context.user_id,
        session_id=context.session_id,
        query=query,
        limit=LOAD_MEMORY_LIMIT,
    )
    context.memories_used.extend(snippets)
    return {
        "status": "ok",
        "memories": [{"id": s.id, "text": s.text, "confidence": s.confidence} for s in snippets],
    }


async def _create_memory(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    text = args.get("text")
    if not isinstance(text, str) or not text.strip():
        return {"status": "error", "message": "text must be a non-empty string"}
    if len(text) > CREATE_MEMORY_MAX_CHARS:
        return {"status": "error", "message": f"text is over {CREATE_MEMORY_MAX_CHARS} characters"}
    user_pk = user_pk_from_id(context.user_id)
    report = None
    if user_pk is not None:
        report = await sync_to_async(services.memory_create_explicit)(
            app_name=context.app_name,
            user_pk=user_pk,
            session_id=context.session_id,
            invocation_id=context.invocation_id,
            text=text.strip(),
        )
    if report is None:
        return {"status": "error", "message": "Not saved: memory creation is off for this chat."}
    kept = report.created + report.updated + report.unchanged
    if not kept:
        return {"status": "error", "message": f"Not saved as a memory. {HELD_FOR_REVIEW_NOTE}"}
    return {
        "status": "ok",
        "text": kept[0].text,
        "memory_ids": [str(memory.id) for memory in kept],
    }


def _load_memory_step(args: dict[str, Any], response: dict[str, Any] | None) -> str:
    if response is None:
        return "Looking through your memories"
    if response_failed(response):
        return "Couldn't look through your memories"
    found = len(response.get("memories") or [])
    if not found:
        return "Looked through your memories: nothing found"
    return f"Looked up {found} {'memory' if found == 1 else 'memories'}"


def _create_memory_step(args: dict[str, Any], response: dict[str, Any] | None) -> str:
    if response is None:
        return "Saving a memory"
    return "Couldn't save a memory" if response_failed(response) else "Saved a memory"


LOAD_MEMORY_TOOL = Tool(
    declaration=types.FunctionDeclaration(
        name="load_memory",
        description=(
            "Search what you remember about the user from earlier conversations. "
            "Returns the most relevant memories with their confidence."
        ),
        parameters_json_schema={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look for."}},
            "required": ["query"],
        },
    ),
    function=_load_memory,
    describe=_load_memory_step,
)

CREATE_MEMORY_TOOL = Tool(
    declaration=types.FunctionDeclaration(
        name="create_memory",
        description=(
            "Remember a fact the user explicitly asked you to remember, for later "
            "conversations. State it as a short sentence about the user."
        ),
        parameters_json_schema={
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The fact to remember."}},
            "required": ["text"],
        },
    ),
    function=_create_memory,
    describe=_create_memory_step,
)


class DjangoMemoryProvider:
    """The ``MemoryProvider`` of this project, registered in ``MemoryAppConfig.ready``."""

    async def permissions(self, *, session: Session) -> MemoryPermissions:
        """Use and create as the user chose, both off in a temporary chat."""
        user_pk = user_pk_from_id(session.user_id)
        if user_pk is None:
            return MemoryPermissions(use=False, create=False)
        access = await store_read_async(
            selectors.session_memory_access_read(user_pk=user_pk, session_id=session.id)
        )
        _turn_index_versions.set((session.id, access.index_versions) if access.use else None)
        return MemoryPermissions(use=access.use, create=access.create, temporary=access.temporary)

    async def preload(self, *, session: Session, query: str, limit: int) -> list[MemorySnippet]:
        """The memories most relevant to the user's message, for the system instruction, which
        shows their text and confidence only (so their sources are not read)."""
        read = _turn_index_versions.get()
        _turn_index_versions.set(None)
        return await _search(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            query=query,
            limit=limit,
            sources=False,
            index_versions=read[1] if read is not None and read[0] == session.id else None,
        )

    def tools(self) -> list[Tool]:
        return [LOAD_MEMORY_TOOL, CREATE_MEMORY_TOOL]

    async def turn_completed(self, *, session: Session, invocation_id: str) -> None:
        """Enqueue generation if a turn trigger is due; the job runs after commit, elsewhere.
        The check reads from the event loop; only a due trigger takes a database thread hop."""
        trigger = await self.turn_trigger_check(
            app_name=session.app_name, session_id=session.id, invocation_id=invocation_id
        )
        await self.turn_trigger_queue(session=session, trigger=trigger)

    async def turn_trigger_check(
        self, *, app_name: str, session_id: str, invocation_id: str
    ) -> GenerationJob.Trigger | None:
        return await services.memory_turn_trigger_async(
            app_name=app_name, session_id=session_id, invocation_id=invocation_id
        )

    async def turn_trigger_queue(
        self, *, session: Session, trigger: GenerationJob.Trigger | None
    ) -> None:
        user_pk = user_pk_from_id(session.user_id)
        if trigger is None or user_pk is None:
            return
        await sync_to_async(services.memory_job_request)(
            app_name=session.app_name, user_pk=user_pk, session_id=session.id, trigger=trigger
        )

    async def session_opened(self, *, user_id: str, session_id: str) -> None:
        """Forget the session's departure (a reload comes back at once) and count the user's
        other chats with unprocessed turns as left (see ``memory_session_opened``)."""
        user_pk = user_pk_from_id(user_id)
        if user_pk is not None:
            await _presence_hop(services.memory_session_opened)(
                user_pk=user_pk, session_id=session_id
            )

    async def session_left(self, *, user_id: str, session_id: str) -> None:
        """Record the departure; its turns are generated after the quiet period unless the
        user comes back (see ``memory_session_left``)."""
        user_pk = user_pk_from_id(user_id)
        if user_pk is not None:
            await _presence_hop(services.memory_session_left)(
                user_pk=user_pk, session_id=session_id
            )
