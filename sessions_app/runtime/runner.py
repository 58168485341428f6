"""The runner: one invocation of an agent for one user message.

Every stored event goes through ``SessionService.append_event``; partial
events (streamed text) are yielded to the caller and never stored. The user's
message is stored before the model is called, so no failure after that point
loses it: a model error becomes a stored error event, a cancellation a stored
reply marked interrupted. What the model gets is fetched and prepared in
``turn_context``; the tools it calls are run in ``tool_calls``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from google.genai import types

from chatapp.log_context import log_context_bind
from sessions_app.errors import DuplicateEventError, SessionNotFoundError
from sessions_app.events import Event, EventActions, new_event_id, new_invocation_id
from sessions_app.runtime.agents import AgentConfig
from sessions_app.runtime.compaction import compaction_due, compaction_request
from sessions_app.runtime.llm import Llm, LlmChunk, ModelError, RetryPolicy, generate_with_retries
from sessions_app.runtime.memory_hooks import (
    MemoryPermissions,
    MemoryProvider,
    memory_provider_get,
)
from sessions_app.runtime.tool_calls import tool_calls_run
from sessions_app.runtime.tools import BUILTIN_TOOLS, Tool
from sessions_app.runtime.turn_context import (
    TurnContextReport,
    turn_request_build,
    turn_session_load,
)
from sessions_app.services import SessionService
from sessions_app.state import output_key_state_delta
from sessions_app.templating import MissingStateKeyError
from sessions_app.types import Session

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
        session, compaction = await sync_to_async(turn_session_load)(
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
                request = await turn_request_build(
                    agent=self.agent,
                    session=session,
                    compaction=compaction,
                    tools=tools,
                    report=report,
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
            response_parts, state_delta = await tool_calls_run(
                session=session,
                invocation_id=invocation_id,
                agent_name=self.agent.name,
                calls=calls,
                tools=tools,
                report=report,
                permissions=permissions,
            )
            yield await self._store(
                session,
                invocation_id,
                content=types.Content(role="user", parts=response_parts),
                actions=EventActions(state_delta=state_delta),
            )
        yield await self._store_final(
            session,
            invocation_id,
            report,
            error_code="too_many_steps",
            error_message=f"The agent stopped after {self.agent.max_steps} tool steps.",
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
