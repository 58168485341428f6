"""A person's memory over MCP (Model Context Protocol) at ``/mcp/``: the official SDK's server,
Streamable HTTP, stateless with JSON answers, so any web process answers any request.

Who calls: a person's own assistant with a personal access token (their memories of the site's
chat app), or an app's service account with its API key naming the end user in ``X-End-User``
(that user's memories of the key's app). Every call is authenticated, rate limited and audited
before the SDK sees it; every tool is a thin door to ``memory_app``'s services and selectors,
so consent switches, isolation and the safety checks hold as on every other door.
"""

from __future__ import annotations

import asyncio
import json
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated, Any

from channels.db import database_sync_to_async
from django.conf import settings
from django.core.paginator import Paginator
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import ToolAnnotations
from pydantic import Field
from starlette.responses import JSONResponse

from access_app import selectors as access_selectors
from access_app import services as access_services
from access_app.models import AuditAction, PersonalAccessToken
from agents_app import selectors, services
from agents_app.models import Scope, ServiceAccountKey
from agents_app.service_api.base import END_USER_ID
from core.log_context import request_id_from
from core.rate_limits import window_count_exceeded, window_seconds_left
from core.text import STORABLE_TEXT
from memory_app import selectors as memory_selectors
from memory_app import services as memory_services
from memory_app.models import Memory, MemoryStatus
from memory_app.services.memories import CORRECTION_MAX_CHARS

PATH = "/mcp/"
PAGE_SIZE = 50
SEARCH_LIMIT = 20
RATE_WINDOW = 60


# The caller of the request being answered: set before the SDK's app runs, so that the tasks
# it starts for the request (copies of this context) see it.
_caller: ContextVar[Principal] = ContextVar("mcp_caller")


class Refused(Exception):
    """An MCP request answered before the SDK sees it: ``status`` and why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Principal:
    """Whose memories a request reaches, in which app, and whether it may change them."""

    app_name: str
    user_pk: int | None
    can_write: bool
    token: PersonalAccessToken | None = None
    key: ServiceAccountKey | None = None
    end_user_id: str = ""

    @property
    def rate_key(self) -> str:
        return f"mcp:token:{self.token.pk}" if self.token else f"mcp:key:{self.key.prefix}"


def _usable(record: PersonalAccessToken | ServiceAccountKey | None, what: str) -> None:
    if record is None:
        raise Refused(401, f"The {what} is not valid.")
    if record.revoked:
        raise Refused(401, f"The {what} was revoked.")
    if record.has_expired:
        raise Refused(401, f"The {what} has expired.")


def _admitted(principal: Principal) -> Principal:
    limit = settings.MCP_REQUESTS_PER_MINUTE
    if window_count_exceeded(key=principal.rate_key, limit=limit, window_seconds=RATE_WINDOW):
        left = int(window_seconds_left(window_seconds=RATE_WINDOW)) + 1
        raise Refused(429, f"More than {limit} requests a minute: try again in {left} seconds.")
    return principal


def principal_of(*, authorization: str, end_user: str) -> Principal:
    """The caller of an MCP request from its ``Authorization`` and ``X-End-User`` headers: a
    personal access token, or a service account's key with ``memory:read`` naming an end user
    of its app; counted against ``MCP_REQUESTS_PER_MINUTE``. A token and its account are read
    afresh on every request, never kept, so a deactivated account's token is refused at once
    in every process. Raises :class:`Refused`: 401 for any bad credential or a deactivated
    account, 403 for a key without the scope, 400 for a bad user id, 429."""
    scheme, _, secret = authorization.partition(" ")
    secret = secret.strip()
    if scheme.lower() != "bearer" or not secret:
        raise Refused(401, "Send a personal access token as 'Authorization: Bearer <token>'.")
    token = access_selectors.access_token_from_secret(token=secret)
    if token is not None:
        _usable(token, "token")
        if not token.user.is_active:
            raise Refused(401, "The token's account is deactivated.")
        return _admitted(
            Principal(
                app_name=settings.DEFAULT_APP_NAME,
                user_pk=token.user_id,
                can_write=token.can_write,
                token=token,
            )
        )
    key = selectors.key_verified(key=secret)
    _usable(key, "token")
    if Scope.MEMORY_READ not in key.scopes:
        raise Refused(403, "This API key lacks the scope 'memory:read'.")
    if not END_USER_ID.fullmatch(end_user):
        raise Refused(
            400,
            "A service account names the end user in 'X-End-User' (1-128 letters, digits "
            "and . _ : @ -).",
        )
    services.service_key_used(key=key)
    app = key.service_account.app
    record = selectors.end_user_get(app=app, external_id=end_user)
    return _admitted(
        Principal(
            app_name=app.name,
            user_pk=record.user_id if record else None,
            can_write=Scope.MEMORY_WRITE in key.scopes,
            key=key,
            end_user_id=end_user,
        )
    )


def _principal_user_pk(principal: Principal) -> int:
    """The account the request acts for; a service account's end user is made on first write."""
    if principal.user_pk is not None:
        return principal.user_pk
    app = principal.key.service_account.app
    return services.end_user_ensure(app=app, external_id=principal.end_user_id).user_id


def _used(principal: Principal, action: str, what: str, object_id: str = "") -> None:
    """The audit of one use: the person's audit log for a token, the service-request log for a
    key (``route`` names the tool, never the end user)."""
    if principal.token is not None:
        access_services.access_token_used(
            token=principal.token, action=action, what=what, object_id=object_id
        )
        return
    services.service_request_record(
        app_name=principal.app_name,
        service_account_id=principal.key.service_account_id,
        key_prefix=principal.key.prefix,
        method="MCP",
        route=f"mcp/{what}",
        status_code=200,
        detail="",
        end_user_id=principal.user_pk,
    )


def _writer(principal: Principal) -> None:
    if not principal.can_write:
        raise ToolError(
            "This token may only read memories: make a read-write token on the Settings page "
            "to add, correct or delete them."
        )


def _memory_json(memory: Memory) -> dict[str, Any]:
    return {
        "id": str(memory.id),
        "text": memory.text,
        "topic": memory.topic,
        "status": memory.status,
        "updated_at": memory.updated_at.isoformat(),
    }


def _use_off(user_pk: int) -> bool:
    return not memory_selectors.memory_settings_get(user_pk=user_pk).use_enabled


USE_OFF = "This person turned off the use of their memories, so none are shown."


@database_sync_to_async
def _search(principal: Principal, query: str, limit: int) -> dict[str, Any]:
    _used(principal, AuditAction.SEARCH, "search_memories")
    if principal.user_pk is None:
        return {"memories": []}
    if _use_off(principal.user_pk):
        return {"memories": [], "note": USE_OFF}
    found = memory_selectors.user_memories_matching(
        app_name=principal.app_name, user_pk=principal.user_pk, query=query, limit=limit
    )
    return {"memories": [_memory_json(memory) for memory in found]}


@database_sync_to_async
def _list(principal: Principal, page: int) -> dict[str, Any]:
    _used(principal, AuditAction.VIEW, "list_memories")
    if principal.user_pk is None:
        return {"memories": [], "next_page": None}
    if _use_off(principal.user_pk):
        return {"memories": [], "next_page": None, "note": USE_OFF}
    paginator = Paginator(
        memory_selectors.user_memories(app_name=principal.app_name, user_pk=principal.user_pk),
        PAGE_SIZE,
    )
    if page > max(paginator.num_pages, 1):
        raise ToolError(f"There are {paginator.num_pages} pages.")
    found = paginator.page(page)
    return {
        "memories": [_memory_json(memory) for memory in found.object_list],
        "next_page": found.next_page_number() if found.has_next() else None,
    }


def _added_by(principal: Principal) -> str:
    """Who added a memory over MCP, for its history: the person's token by its name, or the
    app's service account and the key's prefix."""
    if principal.token is not None:
        return f"added over MCP with your token \u201c{principal.token.name}\u201d"
    key = principal.key
    return (
        f"added over MCP by the service account \u201c{key.service_account.name}\u201d "
        f"(key {key.prefix})"
    )


@database_sync_to_async
def _add(principal: Principal, text: str, topic: str) -> dict[str, Any]:
    _writer(principal)
    user_pk = _principal_user_pk(principal)
    if not memory_selectors.memory_settings_get(user_pk=user_pk).create_enabled:
        raise ToolError(
            "This person turned off creating memories in their settings; nothing was stored."
        )
    memory = memory_services.memory_add_stated(
        app_name=principal.app_name,
        user_pk=user_pk,
        text=text,
        topic=topic,
        added_by=_added_by(principal),
    )
    if memory is None:
        raise ToolError("This was not stored: it failed the memory safety check.")
    _used(principal, AuditAction.ADD, "add_memory", str(memory.id))
    if memory.status == MemoryStatus.QUARANTINED:
        raise ToolError(
            f"Not saved as a memory: {memory.review_reason}. Held for review by staff: it is "
            "not used until they release it."
        )
    return _memory_json(memory)


@database_sync_to_async
def _correct(principal: Principal, memory_id: str, text: str) -> dict[str, Any]:
    _writer(principal)
    if principal.user_pk is None:
        raise ToolError("There is no memory with this id.")
    try:
        memory = memory_services.memory_correct(
            app_name=principal.app_name,
            user_pk=principal.user_pk,
            memory_id=memory_id,
            text=text,
            actor_user_pk=principal.user_pk if principal.token else None,
        )
    except memory_services.MemoryCorrectionError as error:
        raise ToolError(str(error)) from None
    if memory is None:
        raise ToolError("There is no memory with this id.")
    _used(principal, AuditAction.CHANGE, "correct_memory", memory_id)
    return _memory_json(memory)


@database_sync_to_async
def _delete(principal: Principal, memory_id: str) -> dict[str, Any]:
    _writer(principal)
    deleted = principal.user_pk is not None and memory_services.memory_delete(
        app_name=principal.app_name,
        user_pk=principal.user_pk,
        memory_id=memory_id,
        actor_user_pk=principal.user_pk if principal.token else None,
    )
    if not deleted:
        raise ToolError("There is no memory with this id.")
    _used(principal, AuditAction.DELETE, "delete_memory", memory_id)
    return {"deleted": memory_id}


@database_sync_to_async
def _past(principal: Principal, query: str, limit: int) -> dict[str, Any]:
    _used(principal, AuditAction.SEARCH, "search_past_conversations")
    if principal.user_pk is None:
        return {"turns": []}
    found = memory_selectors.past_conversations_search(
        app_name=principal.app_name, user_pk=principal.user_pk, query=query, limit=limit
    )
    return {
        "turns": [
            {
                "said": turn.excerpt,
                **({"in_reply_to": turn.asked} if turn.asked else {}),
                "said_at": turn.said_at.isoformat(),
                "chat_title": turn.title,
                "chat_id": turn.session_id,
            }
            for turn in found
        ]
    }


@database_sync_to_async
def _profile(principal: Principal) -> str:
    _used(principal, AuditAction.VIEW, "profile")
    if principal.user_pk is None or _use_off(principal.user_pk):
        return json.dumps({})
    rows = memory_selectors.user_profile(app_name=principal.app_name, user_pk=principal.user_pk)
    return json.dumps(dict(rows))


server = MCPServer(
    name="agent-memory",
    instructions="The long-term memory of one person: facts and preferences they shared in "
    "their chats or asked to be remembered. Search it before answering anything that depends "
    "on who they are or what they said before; add to it when they ask you to remember "
    "something; correct or delete what they say is wrong.",
)


def _principal() -> Principal:
    return _caller.get()


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def search_memories(
    query: Annotated[str, Field(min_length=1, max_length=500), STORABLE_TEXT],
    limit: Annotated[int, Field(ge=1, le=SEARCH_LIMIT, strict=True)] = 10,
) -> dict[str, Any]:
    """Find what is remembered about the person that bears on `query` (their preferences,
    facts about them, what they asked to be remembered), best match first. Use it before you
    answer anything that depends on who they are or on what they said in earlier chats."""
    return await _search(_principal(), query, limit)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def list_memories(page: Annotated[int, Field(ge=1, strict=True)] = 1) -> dict[str, Any]:
    """Every memory of the person by topic, 50 a page (`next_page` says whether there is
    more), with each one's status. Use it when they ask what you remember about them; to
    answer a question, prefer `search_memories`."""
    return await _list(_principal(), page)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False))
async def add_memory(
    text: Annotated[str, Field(min_length=1, max_length=CORRECTION_MAX_CHARS), STORABLE_TEXT],
    topic: Annotated[str, Field(max_length=64), STORABLE_TEXT] = "",
) -> dict[str, Any]:
    """Remember a fact about the person or a preference of theirs, in one short third-person
    sentence ("Prefers vegetarian food"). Use it when they ask you to remember something or
    state something lasting about themselves; not for passing details of this conversation.
    A duplicate merges with the memory it matches; an instruction to the assistant is held
    for review or refused."""
    return await _add(_principal(), text, topic)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
async def correct_memory(
    memory_id: Annotated[str, STORABLE_TEXT],
    text: Annotated[str, Field(min_length=1, max_length=CORRECTION_MAX_CHARS), STORABLE_TEXT],
) -> dict[str, Any]:
    """Replace the text of one memory (its `id` from `search_memories` or `list_memories`)
    when the person says it is wrong or out of date; the old text stays in its history."""
    return await _correct(_principal(), memory_id, text)


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=True))
async def delete_memory(memory_id: Annotated[str, STORABLE_TEXT]) -> dict[str, Any]:
    """Forget one memory for good (its `id` from `search_memories` or `list_memories`), with
    its sources and history. Use it only when the person asks you to forget it."""
    return await _delete(_principal(), memory_id)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
async def search_past_conversations(
    query: Annotated[str, Field(min_length=1, max_length=500), STORABLE_TEXT],
    limit: Annotated[int, Field(ge=1, le=SEARCH_LIMIT, strict=True)] = 5,
) -> dict[str, Any]:
    """Find what the person themselves said in their earlier chats that bears on `query`, with
    when and in which chat. Use it when they refer to an earlier conversation ("what did I
    say about…", "the recipe from last week") or a memory lacks the detail; nothing comes
    back when they turned off using memories or referencing past chats."""
    return await _past(_principal(), query, limit)


@server.resource("memory://profile", mime_type="application/json")
async def profile() -> str:
    """The person's profile: what the assistant keeps about them outside memories (the name
    they gave, their profile keys), as a JSON object. Read it at the start of a conversation."""
    return await _profile(_principal())


class MemoryMCPApplication:
    """The ASGI app of ``/mcp/``: authenticate and rate-limit, then the SDK's Streamable HTTP
    app, stateless with JSON answers; ``GET`` (an event stream) is refused with 405, and
    every answer carries the security headers and request id of the site's others. The SDK
    runs its requests in a task group its lifespan opens; daphne sends no lifespan events, so
    the group is opened on the first request and held for the life of the process (the event
    loop's)."""

    def __init__(self) -> None:
        # Host checks guard cookie-authenticated localhost servers against DNS rebinding;
        # this one needs a bearer token no browser sends on its own.
        self.app = server.streamable_http_app(
            streamable_http_path=PATH,
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self._started: asyncio.Event | None = None
        self._holder: asyncio.Task | None = None

    async def _ensure_started(self) -> None:
        if self._started is None:
            self._started = asyncio.Event()
            self._holder = asyncio.ensure_future(self._hold(self._started))
        await self._started.wait()

    async def _hold(self, started: asyncio.Event) -> None:
        async with server.session_manager.run():
            started.set()
            await asyncio.Future()

    async def __call__(self, scope, receive, send) -> None:
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope["headers"]
        }
        send = _with_security_headers(send, request_id_from(headers.get("x-request-id")))
        if scope["method"] == "GET":
            # Stateless: no stream for the server to speak first on (the SDK would hold one
            # open, pinging, for as long as the client liked).
            answer = JSONResponse(
                {"detail": "This server is stateless: POST each request; no event stream."},
                405,
                headers={"Allow": "POST"},
            )
            await answer(scope, receive, send)
            return
        try:
            principal = await database_sync_to_async(principal_of)(
                authorization=headers.get("authorization", ""),
                end_user=headers.get("x-end-user", ""),
            )
        except Refused as refused:
            challenge = {"WWW-Authenticate": 'Bearer realm="mcp"'} if refused.status == 401 else {}
            answer = JSONResponse({"detail": str(refused)}, refused.status, headers=challenge)
            await answer(scope, receive, send)
            return
        await self._ensure_started()
        _caller.set(principal)
        await self.app(scope, receive, send)


def _security_headers(request_id: str) -> list[tuple[bytes, bytes]]:
    """The headers Django's middleware puts on every other answer (``SecurityMiddleware``, the
    frame and content policies, the request id), for answers that do not pass through it."""
    headers = {
        "X-Request-ID": request_id,
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": settings.X_FRAME_OPTIONS,
        "Referrer-Policy": settings.SECURE_REFERRER_POLICY,
        "Cross-Origin-Opener-Policy": settings.SECURE_CROSS_ORIGIN_OPENER_POLICY,
        "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    }
    if settings.SECURE_HSTS_SECONDS:
        headers["Strict-Transport-Security"] = f"max-age={settings.SECURE_HSTS_SECONDS}"
    return [(name.lower().encode(), value.encode()) for name, value in headers.items() if value]


def _with_security_headers(send, request_id: str):
    added = _security_headers(request_id)

    async def send_with_headers(message) -> None:
        if message["type"] == "http.response.start":
            present = {name.lower() for name, _ in message.get("headers", [])}
            extra = [(name, value) for name, value in added if name not in present]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return send_with_headers


def mcp_path_is(path: str) -> bool:
    """Whether an HTTP request's path is the MCP endpoint's (``/mcp`` or below ``/mcp/``)."""
    return path == PATH.rstrip("/") or path.startswith(PATH)
