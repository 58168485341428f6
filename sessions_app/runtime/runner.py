"""The runner: one invocation of an agent for one user message.

Every stored event goes through ``SessionService.append_event``; partial
events (streamed text) are yielded to the caller and never stored. The user's
message is stored before the model is called, so no failure after that point
loses it: a model error becomes a stored error event, a cancellation a stored
reply marked interrupted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from google.genai import types

from chatapp.log_context import log_context_bind
from sessions_app import selectors
from sessions_app.errors import DuplicateEventError, InvalidStateError, SessionNotFoundError
from sessions_app.events import Event, EventActions, new_event_id, new_invocation_id
from sessions_app.runtime.agents import AgentConfig
from sessions_app.runtime.compaction import compaction_due, compaction_request
from sessions_app.runtime.context import history_prepare
from sessions_app.runtime.llm import (
    Llm,
    LlmChunk,
    LlmRequest,
    MemorySnippet,
    ModelError,
    RetryPolicy,
    generate_with_retries,
)
from sessions_app.runtime.memory_hooks import (
    MemoryPermissions,
    MemoryProvider,
    memory_provider_get,
)
from sessions_app.runtime.tools import BUILTIN_TOOLS, Tool, ToolContext
from sessions_app.services import SessionService
from sessions_app.state import output_key_state_delta, state_split
from sessions_app.templating import MissingStateKeyError, ReadonlyContext, instruction_resolve
from sessions_app.types import GetSessionConfig, Session

logger = logging.getLogger(__name__)

MEMORY_PRELOAD_LIMIT = 5


class DuplicateTurnError(Exception):
    """This client message was already handled; the turn is not run again."""

    def __init__(self, user_event_id: str) -> None:
        super().__init__(f"Message {user_event_id!r} was already received.")
        self.user_event_id = user_event_id


def user_event_id_for(client_message_id: str) -> str:
    """The stored id of the user event of a client message: the unique key that dedupes turns."""
    return f"msg-{client_message_id}"


@dataclass
class TurnContextReport:
    """What the model got this turn, shown in the chat's context panel."""

    model: str
    offline: bool
    event_count: int = 0
    memories: list[MemorySnippet] = field(default_factory=list)
    compaction_summary: str | None = None
    memory_enabled: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "offline": self.offline,
            "event_count": self.event_count,
            "memory_enabled": self.memory_enabled,
            "compaction_summary": self.compaction_summary,
            "memories": [
                {"id": m.id, "text": m.text, "confidence": m.confidence} for m in self.memories
            ],
        }


def _load_for_turn(
    *, app_name: str, user_id: str, session_id: str, max_events: int
) -> tuple[Session | None, Event | None]:
    """The session with the events a turn can use, and its latest compaction.

    Events a compaction covers never reach the prompt (its summary stands in
    for them), so only those from its end on are read: a long session costs a
    turn the events since its last summary, not ``max_events`` of them.
    """
    compaction = selectors.session_latest_compaction(session_id=session_id)
    session = selectors.session_get(
        app_name=app_name,
        user_id=user_id,
        session_id=session_id,
        config=GetSessionConfig(
            num_recent_events=max_events,
            after_timestamp=compaction.actions.compaction.end_timestamp if compaction else None,
        ),
    )
    if session is None:
        return None, None
    return session, compaction


def _memory_block(memories: list[MemorySnippet]) -> str:
    lines = [f"- {memory.text} (confidence {memory.confidence:.2f})" for memory in memories]
    return "\n\nWhat you remember about the user (may be out of date):\n" + "\n".join(lines)


class Runner:
    """Runs one agent; one instance may serve many invocations at once."""

    def __init__(
        self,
        *,
        agent: AgentConfig,
        model: Llm,
        session_service: SessionService | None = None,
        memory: MemoryProvider | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.agent = agent
        self.model = model
        self.sessions = session_service or SessionService()
        self.memory = memory or memory_provider_get()
        self.retry_policy = retry_policy or RetryPolicy(
            attempts=settings.LLM_RETRY_ATTEMPTS, base_delay=settings.LLM_RETRY_BASE_DELAY_SECONDS
        )

    async def run_async(
        self,
        *,
        user_id: str,
        session_id: str,
        new_message: types.Content,
        client_message_id: str | None = None,
    ) -> AsyncIterator[Event]:
        """Yield the invocation's events: the stored user event, partial text, stored replies.

        Raises SessionNotFoundError for a session the user does not have, and
        DuplicateTurnError when ``client_message_id`` was already stored.
        """
        session, compaction = await sync_to_async(_load_for_turn)(
            app_name=self.agent.app_name,
            user_id=user_id,
            session_id=session_id,
            max_events=self.agent.compaction.max_events_loaded,
        )
        if session is None:
            raise SessionNotFoundError(f"Session {session_id!r} not found.")
        invocation_id = new_invocation_id()
        log_context_bind(invocation_id=invocation_id)
        user_event = Event(
            invocation_id=invocation_id,
            author="user",
            content=types.Content(role="user", parts=new_message.parts),
        )
        if client_message_id:
            user_event.id = user_event_id_for(client_message_id)
            user_event.custom_metadata = {"client_message_id": client_message_id}
        try:
            await self.sessions.append_event(session, user_event)
        except DuplicateEventError:
            raise DuplicateTurnError(user_event.id) from None
        yield user_event

        permissions = await self.memory.permissions(session=session)
        report = TurnContextReport(
            model=self.model.name, offline=self.model.offline, memory_enabled=permissions.use
        )
        if permissions.use and self.agent.preload_memories:
            report.memories = await self.memory.preload(
                session=session, query=user_event.text(), limit=MEMORY_PRELOAD_LIMIT
            )
        tools = self._tools(permissions)
        async for event in self._steps(
            session=session,
            compaction=compaction,
            invocation_id=invocation_id,
            tools=tools,
            report=report,
            permissions=permissions,
        ):
            yield event
        if permissions.create:
            await self.memory.turn_completed(session=session, invocation_id=invocation_id)
        if compaction_due(
            events=session.events, compaction=compaction, config=self.agent.compaction
        ):
            await sync_to_async(compaction_request)(
                app_name=session.app_name, user_id=session.user_id, session_id=session.id
            )

    def _tools(self, permissions: MemoryPermissions) -> dict[str, Tool]:
        tools = {name: BUILTIN_TOOLS[name] for name in self.agent.tools if name in BUILTIN_TOOLS}
        if self.agent.memory_tools:
            for tool in self.memory.tools():
                if tool.name == "load_memory" and permissions.use:
                    tools[tool.name] = tool
                if tool.name == "create_memory" and permissions.create:
                    tools[tool.name] = tool
        return tools

    async def _request(
        self,
        *,
        session: Session,
        compaction: Event | None,
        tools: dict[str, Tool],
        report: TurnContextReport,
    ) -> LlmRequest:
        history = history_prepare(
            events=session.events,
            agent_name=self.agent.name,
            compaction=compaction,
            config=self.agent.compaction,
        )
        report.event_count = history.event_count
        report.compaction_summary = history.compaction_summary
        instruction = await instruction_resolve(
            instruction=self.agent.instruction,
            context=ReadonlyContext(
                state=session.state,
                agent_name=self.agent.name,
                session_id=session.id,
                user_id=session.user_id,
            ),
        )
        if report.memories:
            instruction += _memory_block(report.memories)
        return LlmRequest(
            model=self.agent.model,
            system_instruction=instruction,
            contents=history.contents,
            tools=[tool.declaration for tool in tools.values()],
            state=dict(session.state),
            memories=list(report.memories),
        )

    async def _steps(
        self,
        *,
        session: Session,
        compaction: Event | None,
        invocation_id: str,
        tools: dict[str, Tool],
        report: TurnContextReport,
        permissions: MemoryPermissions,
    ) -> AsyncIterator[Event]:
        for _step in range(self.agent.max_steps):
            try:
                request = await self._request(
                    session=session, compaction=compaction, tools=tools, report=report
                )
            except MissingStateKeyError as error:
                yield await self._store_final(
                    session,
                    invocation_id,
                    report,
                    error_code="instruction_error",
                    error_message=str(error),
                )
                return
            reply_id = new_event_id()
            text_parts: list[str] = []
            call_parts: list[types.Part] = []
            usage = None
            try:
                async for chunk in generate_with_retries(self.model, request, self.retry_policy):
                    if chunk.text:
                        text_parts.append(chunk.text)
                        yield self._partial(reply_id, invocation_id, chunk)
                    call_parts.extend(
                        chunk.function_call_parts
                        or [types.Part(function_call=call) for call in chunk.function_calls]
                    )
                    usage = chunk.usage_metadata or usage
            except ModelError as error:
                logger.warning("model failed in %s: %s", invocation_id, error)
                yield await self._store_final(
                    session,
                    invocation_id,
                    report,
                    id=reply_id,
                    content=self._text_content(text_parts),
                    error_code=error.code,
                    error_message=str(error),
                )
                return
            except asyncio.CancelledError:
                await self._store_final(
                    session,
                    invocation_id,
                    report,
                    id=reply_id,
                    content=self._text_content(text_parts),
                    interrupted=True,
                )
                raise
            text = "".join(text_parts)
            calls = [part.function_call for part in call_parts]
            if not calls:
                yield await self._store_final(
                    session,
                    invocation_id,
                    report,
                    id=reply_id,
                    content=self._text_content(text_parts) or types.Content(role="model", parts=[]),
                    actions=EventActions(
                        state_delta=output_key_state_delta(
                            output_key=self.agent.output_key, text=text
                        )
                    ),
                    usage_metadata=usage,
                )
                return
            for call in calls:
                call.id = call.id or "call-" + new_event_id()
            parts = ([types.Part(text=text)] if text else []) + call_parts
            yield await self._store(
                session,
                invocation_id,
                id=reply_id,
                content=types.Content(role="model", parts=parts),
                usage_metadata=usage,
            )
            yield await self._run_tools(
                session=session,
                invocation_id=invocation_id,
                calls=calls,
                tools=tools,
                report=report,
                permissions=permissions,
            )
        yield await self._store_final(
            session,
            invocation_id,
            report,
            error_code="too_many_steps",
            error_message=f"The agent stopped after {self.agent.max_steps} tool steps.",
        )

    async def _run_tools(
        self,
        *,
        session: Session,
        invocation_id: str,
        calls: list[types.FunctionCall],
        tools: dict[str, Tool],
        report: TurnContextReport,
        permissions: MemoryPermissions,
    ) -> Event:
        """Run the calls in order; their state changes go on the one response event."""
        state_delta: dict[str, Any] = {}
        parts = []
        for call in calls:
            context = ToolContext(
                app_name=session.app_name,
                user_id=session.user_id,
                session_id=session.id,
                invocation_id=invocation_id,
                agent_name=self.agent.name,
                state={**session.state, **state_delta},
                memory_enabled=permissions.use,
                function_call_id=call.id,
            )
            tool = tools.get(call.name or "")
            if tool is None:
                response = {"status": "error", "message": f"Unknown tool {call.name!r}."}
            else:
                try:
                    response = await tool.run(dict(call.args or {}), context)
                except Exception as error:
                    logger.exception("tool %s failed", call.name)
                    response = {"status": "error", "message": f"{type(error).__name__}: {error}"}
            try:
                state_split(context.state_delta)
            except InvalidStateError as error:
                response = {"status": "error", "message": f"State not saved: {error}"}
            else:
                state_delta.update(context.state_delta)
            # By id: a memory found again by a tool may carry another score.
            shown = {memory.id for memory in report.memories}
            for memory in context.memories_used:
                if memory.id not in shown:
                    shown.add(memory.id)
                    report.memories.append(memory)
            parts.append(
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call.id, name=call.name, response=response
                    )
                )
            )
        return await self._store(
            session,
            invocation_id,
            content=types.Content(role="user", parts=parts),
            actions=EventActions(state_delta=state_delta),
        )

    async def _store(self, session: Session, invocation_id: str, **fields: Any) -> Event:
        """Store an event of this agent in the invocation."""
        event = Event(invocation_id=invocation_id, author=self.agent.name, **fields)
        return await self.sessions.append_event(session, event)

    async def _store_final(
        self, session: Session, invocation_id: str, report: TurnContextReport, **fields: Any
    ) -> Event:
        """Store the event that ends the turn (reply, error or interruption) with its context."""
        return await self._store(
            session,
            invocation_id,
            turn_complete=True,
            custom_metadata={"context": report.as_dict()},
            **fields,
        )

    def _partial(self, reply_id: str, invocation_id: str, chunk: LlmChunk) -> Event:
        return Event(
            id=reply_id,
            invocation_id=invocation_id,
            author=self.agent.name,
            content=types.Content(role="model", parts=[types.Part(text=chunk.text)]),
            partial=True,
        )

    @staticmethod
    def _text_content(text_parts: list[str]) -> types.Content | None:
        text = "".join(text_parts)
        return types.Content(role="model", parts=[types.Part(text=text)]) if text else None
