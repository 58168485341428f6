"""Long-term memory as the runner sees it: permissions, preload (memories and past
conversations), three tools, and the turn hook.

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

from agents_app.forget_memory import FORGET_MEMORY_TOOL
from agents_app.runtime.memory_hooks import MemoryPermissions
from agents_app.runtime.tools import Tool, ToolContext, response_failed
from agents_app.runtime.turn_context import past_snippet_dict
from core.async_database import NOTHING_READ, StoreRead
from core.llm import MemorySnippet, PastConversationSnippet
from memory_app import selectors, services
from memory_app.models import HELD_FOR_REVIEW_NOTE, GenerationJob, MemoryScope
from sessions_app import selectors as session_selectors
from sessions_app.selectors import store_read_async, user_pk_from_id
from sessions_app.types import Session

LOAD_MEMORY_LIMIT = 5
PAST_CONVERSATIONS_LIMIT = 5
CREATE_MEMORY_MAX_CHARS = 1000
# (session id, index versions) that ``permissions`` read for the turn under way, taken once
# by the preload that follows it in the same task: a user whose version is still 0 never had a
# memory, and the preload searches nothing for them.
_turn_index_versions: ContextVar[tuple[str, tuple] | None] = ContextVar(
    "turn_index_versions", default=None
)
# (session id, the app's index version) that ``permissions`` read, for ``app_guidance``; and
# each app's guidance with the version it was read at.
_turn_app_version: ContextVar[tuple[str, int] | None] = ContextVar("turn_app_version", default=None)
_app_guidance: dict[str, tuple[int, list[str]]] = {}
# The session whose past-conversations search ``permissions`` found allowed for the turn under
# way, and whether the user has another chat to search, taken once by the preload that follows
# it in the same task, which need not read the user's choices again (nor search, without
# another chat).
_turn_past_allowed: ContextVar[tuple[str, bool] | None] = ContextVar(
    "turn_past_allowed", default=None
)
# The session of the turn under way, (app, user id, session id, its row's key), as
# ``permissions`` read it: memory names sessions by the row's key, so the turn's preloads, tools
# and trigger take it from here instead of looking it up, each a statement on the database
# thread. Only the one session matches: anything else still looks its key up.
_turn_session: ContextVar[tuple[str, str, str, str] | None] = ContextVar(
    "turn_session", default=None
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


def _turn_session_key(*, app_name: str, user_id: str, session_id: str) -> str | None:
    """The row key of the session of the turn under way when it is this one (else None: the
    callee looks it up)."""
    known = _turn_session.get()
    if known is not None and known[:3] == (app_name, user_id, session_id):
        return known[3]
    return None


def _memory_search(
    *, app_name: str, user_pk: int, session_id: str, session_key: str | None, **search: Any
) -> list:
    key = session_key or selectors.memory_session_key(
        app_name=app_name, user_pk=user_pk, session_id=session_id
    )
    results = selectors.memory_search(
        app_name=app_name, user_pk=user_pk, session_id=key, shared=False, **search
    )
    return [
        snippet_from(result, file_text=_kept_file_text(result, app_name=app_name, user_pk=user_pk))
        for result in results
    ]


RECALLED_FILE_MAX_CHARS = 4000


def _kept_file_text(result: selectors.ScoredMemory, *, app_name: str, user_pk: int) -> str:
    """What the text file or PDF a recalled memory keeps says (its start), "" for an image
    or none: read here, in the search's thread, so the prompt can frame it as data."""
    if not result.image_uri or result.image_mime_type.startswith("image/"):
        return ""
    record = session_selectors.artifact_referenced_get(
        uri=result.image_uri, app_name=app_name, user_id=str(user_pk)
    )
    if record is None:
        return ""
    return session_selectors.artifact_text(record)[:RECALLED_FILE_MAX_CHARS]


def _past_conversations_search(
    *,
    app_name: str,
    user_pk: int,
    session_id: str,
    session_key: str | None,
    query: str,
    limit: int,
    choices_read: bool = False,
) -> list:
    key = session_key or selectors.memory_session_key(
        app_name=app_name, user_pk=user_pk, session_id=session_id
    )
    if key is None:
        return []
    return selectors.past_conversations_search(
        app_name=app_name,
        user_pk=user_pk,
        query=query,
        session_id=key,
        limit=limit,
        choices_read=choices_read,
    )


def _memory_create_explicit(
    *, app_name: str, user_pk: int, session_id: str, session_key: str | None, **memory: Any
):
    key = session_key or selectors.memory_session_key(
        app_name=app_name, user_pk=user_pk, session_id=session_id
    )
    if key is None:
        return None
    return services.memory_create_explicit(
        app_name=app_name, user_pk=user_pk, session_id=key, **memory
    )


def _memory_job_request(
    *, app_name: str, user_pk: int, session_id: str, session_key: str | None, trigger: Any
):
    key = session_key or selectors.memory_session_key(
        app_name=app_name, user_pk=user_pk, session_id=session_id
    )
    if key is None:
        return None
    return services.memory_job_request(
        app_name=app_name, user_pk=user_pk, session_id=key, trigger=trigger
    )


def _turn_embeddings_request(
    *, app_name: str, user_pk: int, session_id: str, session_key: str | None
) -> None:
    key = session_key or selectors.memory_session_key(
        app_name=app_name, user_pk=user_pk, session_id=session_id
    )
    if key is not None:
        services.turn_embeddings_request(session_key=key)


def _memory_session_presence(*, opened: bool, app_name: str, user_pk: int, session_id: str) -> None:
    key = selectors.memory_session_key(app_name=app_name, user_pk=user_pk, session_id=session_id)
    if key is None:
        return
    if opened:
        services.memory_session_opened(user_pk=user_pk, session_id=key)
    else:
        services.memory_session_left(user_pk=user_pk, session_id=key)


def snippet_from(result: selectors.ScoredMemory, *, file_text: str = "") -> MemorySnippet:
    return MemorySnippet(
        id=result.id,
        text=result.text,
        confidence=result.confidence,
        score=result.score,
        image_uri=result.image_uri,
        image_mime_type=result.image_mime_type,
        file_text=file_text,
    )


async def _search(
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    query: str,
    limit: int,
    sources: bool = True,
) -> list[MemorySnippet]:
    user_pk = user_pk_from_id(user_id)
    if user_pk is None:
        return []
    results = await sync_to_async(_memory_search)(
        app_name=app_name,
        user_pk=user_pk,
        query=query,
        session_id=session_id,
        session_key=_turn_session_key(app_name=app_name, user_id=user_id, session_id=session_id),
        limit=limit,
        sources=sources,
    )
    return results


def _search_refused(args: dict[str, Any], context: ToolContext) -> dict[str, Any] | None:
    """The error a search tool answers when its query is missing or memory is off, else None."""
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        return {"status": "error", "message": "query must be a non-empty string"}
    if not context.memory_enabled:
        return {"status": "error", "message": "memory is off for this chat"}
    return None


async def _load_memory(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    if refused := _search_refused(args, context):
        return refused
    snippets = await _search(
        app_name=context.app_name,
        user_id=context.user_id,
        session_id=context.session_id,
        query=args["query"],
        limit=LOAD_MEMORY_LIMIT,
    )
    context.memories_used.extend(snippets)
    return {
        "status": "ok",
        "memories": [
            {
                "id": s.id,
                "text": s.text,
                "confidence": s.confidence,
                **({"image": s.image_mime_type} if s.image_uri else {}),
            }
            for s in snippets
        ],
    }


def past_snippet_from(turn: selectors.PastTurn) -> PastConversationSnippet:
    return PastConversationSnippet(
        session_id=turn.session_id,
        event_id=turn.event_id,
        title=turn.title or "Untitled chat",
        date=f"{turn.said_at.day} {turn.said_at:%B %Y}",
        excerpt=turn.excerpt,
        score=turn.score,
        asked=turn.asked,
    )


async def _past_search(
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    query: str,
    limit: int,
    choices_read: bool = False,
) -> list[PastConversationSnippet]:
    user_pk = user_pk_from_id(user_id)
    if user_pk is None:
        return []
    turns = await sync_to_async(_past_conversations_search)(
        app_name=app_name,
        user_pk=user_pk,
        query=query,
        session_id=session_id,
        session_key=_turn_session_key(app_name=app_name, user_id=user_id, session_id=session_id),
        limit=limit,
        choices_read=choices_read,
    )
    return [past_snippet_from(turn) for turn in turns]


async def _search_past_conversations(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    if refused := _search_refused(args, context):
        return refused
    snippets = await _past_search(
        app_name=context.app_name,
        user_id=context.user_id,
        session_id=context.session_id,
        query=args["query"],
        limit=PAST_CONVERSATIONS_LIMIT,
    )
    return {"status": "ok", "past_conversations": [past_snippet_dict(s) for s in snippets]}


def _search_past_conversations_step(args: dict[str, Any], response: dict[str, Any] | None) -> str:
    if response is None:
        return "Looking through your past chats"
    if response_failed(response):
        return "Couldn't look through your past chats"
    found = len(response.get("past_conversations") or [])
    if not found:
        return "Looked through your past chats: nothing found"
    return f"Found {found} {'message' if found == 1 else 'messages'} in your past chats"


async def _create_memory(args: dict[str, Any], context: ToolContext) -> dict[str, Any]:
    text = args.get("text")
    if not isinstance(text, str) or not text.strip():
        return {"status": "error", "message": "text must be a non-empty string"}
    if len(text) > CREATE_MEMORY_MAX_CHARS:
        return {"status": "error", "message": f"text is over {CREATE_MEMORY_MAX_CHARS} characters"}
    asked = args.get("asked", False)
    scope = args.get("scope", MemoryScope.USER)
    if not isinstance(asked, bool) or scope not in (MemoryScope.USER, MemoryScope.SESSION):
        return {"status": "error", "message": "asked must be a boolean, scope user or session"}
    user_pk = user_pk_from_id(context.user_id)
    report = None
    if user_pk is not None:
        report = await sync_to_async(_memory_create_explicit)(
            app_name=context.app_name,
            user_pk=user_pk,
            session_id=context.session_id,
            session_key=_turn_session_key(
                app_name=context.app_name, user_id=context.user_id, session_id=context.session_id
            ),
            invocation_id=context.invocation_id,
            text=text.strip(),
            asked=asked,
            scope=scope,
        )
    if report is None:
        return {"status": "error", "message": "Not saved: memory creation is off for this chat."}
    kept = report.created + report.updated + report.unchanged
    if not kept:
        held = report.quarantined[0].review_reason if report.quarantined else ""
        why = f": {held}" if held else ""
        return {
            "status": "error",
            "message": f"Not saved as a memory{why}. {HELD_FOR_REVIEW_NOTE}",
        }
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
            "Keep something the user told you about themselves, for later conversations. "
            "Decide for yourself what is worth keeping: stable facts about the user (name, "
            "where they live, work, family, pets, health, diet), their preferences, their "
            "plans and important dates, the people and things in their life, and anything they "
            "ask you to remember. Do not keep their requests, questions or one-off tasks "
            "('write a haiku', 'explain photosynthesis'), greetings, your own answers, or "
            "secrets (passwords, keys, card numbers). State it as one short sentence about the "
            "user ('The user's sister Ana lives in Braga.')."
        ),
        parameters_json_schema={
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The fact to keep."},
                "asked": {
                    "type": "boolean",
                    "description": "True when the user asked you to remember it; false when "
                    "you chose to keep it.",
                },
                "scope": {
                    "type": "string",
                    "enum": ["user", "session"],
                    "description": "'session' when it holds for this conversation only ('for "
                    "this trip I'm vegetarian'); 'user' (the default) otherwise.",
                },
            },
            "required": ["text"],
        },
    ),
    function=_create_memory,
    describe=_create_memory_step,
)


SEARCH_PAST_CONVERSATIONS_TOOL = Tool(
    declaration=types.FunctionDeclaration(
        name="search_past_conversations",
        description=(
            "Search what the user said in their earlier chats (their own words, not the "
            "facts you remember about them): use it when they ask where or when they said "
            "something, or refer to an earlier conversation. Returns excerpts with the chat's "
            "title and the date."
        ),
        parameters_json_schema={
            "type": "object",
            "properties": {"query": {"type": "string", "description": "What to look for."}},
            "required": ["query"],
        },
    ),
    function=_search_past_conversations,
    describe=_search_past_conversations_step,
)


class DjangoMemoryProvider:
    """The ``MemoryProvider`` of this project, registered in ``MemoryAppConfig.ready``."""

    async def permissions(self, *, session: Session) -> MemoryPermissions:
        """Use and create as the user chose, both off in a temporary chat. The same statement
        reads the session row's key, which the turn's searches, tools and trigger then take
        from here (``_turn_session``)."""
        read = self.permissions_read(
            app_name=session.app_name, user_id=session.user_id, session_id=session.id
        )
        return self.permissions_taken(session=session, answer=await store_read_async(read))

    def permissions_read(self, *, app_name: str, user_id: str, session_id: str) -> StoreRead:
        user_pk = user_pk_from_id(user_id)
        if user_pk is None:
            return NOTHING_READ
        return selectors.session_memory_access_of_id_read(
            app_name=app_name, user_pk=user_pk, session_id=session_id
        )

    def permissions_taken(
        self, *, session: Session, answer: selectors.SessionMemoryAccess | None
    ) -> MemoryPermissions:
        if answer is None:
            return MemoryPermissions(use=False, create=False)
        access = answer
        _turn_session.set(
            None
            if access.session_key is None
            else (session.app_name, session.user_id, session.id, access.session_key)
        )
        _turn_index_versions.set((session.id, access.index_versions) if access.use else None)
        _turn_past_allowed.set((session.id, access.other_chats) if access.past else None)
        versions = access.index_versions
        _turn_app_version.set((session.id, versions[1]) if versions is not None else None)
        return MemoryPermissions(
            use=access.use, create=access.create, temporary=access.temporary, past=access.past
        )

    async def preload(self, *, session: Session, query: str, limit: int) -> list[MemorySnippet]:
        """The memories most relevant to the user's message, for the system instruction, which
        shows their text and confidence only (so their sources are not read)."""
        read = _turn_index_versions.get()
        _turn_index_versions.set(None)
        versions = read[1] if read is not None and read[0] == session.id else None
        if versions is not None and not versions[0]:
            # No memory of the user's was ever written (and the app's own are its guidance,
            # not what is recalled of the person): nothing to search, no thread to wait for.
            return []
        return await _search(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            query=query,
            limit=limit,
            sources=False,
        )

    async def preload_past(
        self, *, session: Session, query: str, limit: int
    ) -> list[PastConversationSnippet]:
        """The user's turns of their other chats most relevant to their message, with the chat
        and the day, for the system instruction's past-conversations section. Nothing is
        searched when the turn's permissions found no other chat."""
        allowed = _turn_past_allowed.get()
        _turn_past_allowed.set(None)
        choices_read = allowed is not None and allowed[0] == session.id
        if choices_read and not allowed[1]:
            return []
        return await _past_search(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            query=query,
            limit=limit,
            choices_read=choices_read,
        )

    async def app_guidance(self, *, session: Session) -> list[str]:
        """The app's guidance for its agent (``selectors.app_guidance``), kept per process
        while the app's index version that ``permissions`` read for the turn stays the one it
        was read at: a turn costs no read unless staff changed it, and the read goes from the
        event loop on PostgreSQL."""
        read = _turn_app_version.get()
        _turn_app_version.set(None)
        known = _app_guidance.get(session.app_name)
        if known is not None and read is not None and read == (session.id, known[0]):
            return known[1]
        version, guidance = await store_read_async(
            selectors.app_guidance_read(app_name=session.app_name)
        )
        _app_guidance[session.app_name] = (version, guidance)
        return guidance

    def tools(self) -> list[Tool]:
        return [
            LOAD_MEMORY_TOOL,
            CREATE_MEMORY_TOOL,
            FORGET_MEMORY_TOOL,
            SEARCH_PAST_CONVERSATIONS_TOOL,
        ]

    def turn_trigger_read(
        self, *, app_name: str, user_id: str, session_id: str, invocation_id: str
    ) -> StoreRead:
        user_pk = user_pk_from_id(user_id)
        if user_pk is None:
            return NOTHING_READ
        return selectors.turn_trigger_facts_of_id_read(
            app_name=app_name, user_pk=user_pk, session_id=session_id, invocation_id=invocation_id
        )

    async def turn_completed(
        self,
        *,
        session: Session,
        invocation_id: str,
        facts: selectors.TurnTriggerFacts | None = None,
    ) -> None:
        """Enqueue generation if a turn trigger is due; the job runs after commit, elsewhere.
        The check reads from the event loop (nothing, given the ``facts`` read with the final
        event); only a due trigger takes a database thread hop."""
        trigger = await self.turn_trigger_check(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            invocation_id=invocation_id,
            facts=facts,
        )
        await self.turn_trigger_queue(session=session, trigger=trigger)
        await self.turn_embeddings_queue(session=session)

    async def turn_embeddings_queue(self, *, session: Session) -> None:
        """Have the turn's words embedded once, in the background (nothing without an
        embedder, so the offline default's turn takes no hop for it)."""
        user_pk = user_pk_from_id(session.user_id)
        if user_pk is None or services.embedder_active() is None:
            return
        await sync_to_async(_turn_embeddings_request)(
            app_name=session.app_name,
            user_pk=user_pk,
            session_id=session.id,
            session_key=_turn_session_key(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id
            ),
        )

    async def turn_trigger_check(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        invocation_id: str,
        facts: selectors.TurnTriggerFacts | None = None,
    ) -> GenerationJob.Trigger | None:
        user_pk = user_pk_from_id(user_id)
        if user_pk is None:
            return None
        return await services.memory_turn_trigger_async(
            app_name=app_name,
            user_pk=user_pk,
            session_id=session_id,
            invocation_id=invocation_id,
            facts=facts,
        )

    async def turn_trigger_queue(
        self, *, session: Session, trigger: GenerationJob.Trigger | None
    ) -> None:
        user_pk = user_pk_from_id(session.user_id)
        if trigger is None or user_pk is None:
            return
        await sync_to_async(_memory_job_request)(
            app_name=session.app_name,
            user_pk=user_pk,
            session_id=session.id,
            session_key=_turn_session_key(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id
            ),
            trigger=trigger,
        )

    async def session_opened(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Forget the session's departure (a reload comes back at once) and count the user's
        other chats with unprocessed turns as left (see ``memory_session_opened``)."""
        user_pk = user_pk_from_id(user_id)
        if user_pk is not None:
            await _presence_hop(_memory_session_presence)(
                opened=True, app_name=app_name, user_pk=user_pk, session_id=session_id
            )

    async def session_left(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Record the departure; its turns are generated after the quiet period unless the
        user comes back (see ``memory_session_left``)."""
        user_pk = user_pk_from_id(user_id)
        if user_pk is not None:
            await _presence_hop(_memory_session_presence)(
                opened=False, app_name=app_name, user_pk=user_pk, session_id=session_id
            )
