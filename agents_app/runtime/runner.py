"""The runner: one invocation of an agent for one user message.

Every stored event goes through ``SessionService.append_event``; partial
events (streamed text) are yielded to the caller and never stored. The user's
message is stored before the model is called, so no failure after that point
loses it: a model error becomes a stored error event, a cancellation a stored
reply marked interrupted. What the model gets is fetched and prepared in
``turn_context``; the tools it calls are run in ``tool_calls``.

A turn of a client message can also be run on from its stored events
(``continue_async``): after the process that ran it died, or to retry it
after an interruption or an error. Its events are named after their place in
the turn (``turns``), so a runner that lost the turn to another process is
refused at its next store and stops (``TurnTakenOverError``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from google.genai import types

from agents_app.chat.turn_claims import (
    HeldClaim,
    holder_name,
    turn_claim_keep,
    turn_claim_release_async,
    turn_claim_release_if_ended_async,
    turn_claim_take_async,
)
from agents_app.redaction import event_redact
from agents_app.runtime.agents import AgentConfig
from agents_app.runtime.attachments import attachment_parts, attachments_metadata
from agents_app.runtime.compaction import compaction_due, compaction_request
from agents_app.runtime.memory_hooks import (
    MemoryPermissions,
    MemoryProvider,
    memory_provider_get,
)
from agents_app.runtime.templating import MissingStateKeyError
from agents_app.runtime.tool_calls import tool_calls_run, tool_steps
from agents_app.runtime.tools import BUILTIN_TOOLS, Tool
from agents_app.runtime.turn_context import (
    TurnContextReport,
    turn_request_build,
    turn_session_load,
    turn_session_read,
    turn_session_taken,
)
from agents_app.runtime.turn_store import TurnBlockedError, TurnStore
from agents_app.runtime.turns import (
    TurnProgress,
    TurnRun,
    cancel_reason,
    server_message_id,
    text_content,
    tool_calls_interrupted_content,
    user_event_id_for,
)
from agents_app.services import app_tool_traits_keep
from core.async_database import StoreRead
from core.llm import Llm, LlmChunk, ModelError, RetryPolicy, generate_with_retries
from core.log_context import log_context_bind
from sessions_app import selectors as session_selectors
from sessions_app.errors import DuplicateEventError, SessionNotFoundError
from sessions_app.events import (
    ATTACHMENTS_KEY,
    TOOL_STEPS_KEY,
    Event,
    EventActions,
    new_event_id,
    new_invocation_id,
)
from sessions_app.models import ArtifactRecord
from sessions_app.services import SessionService
from sessions_app.state import output_key_state_delta
from sessions_app.types import Session

logger = logging.getLogger(__name__)

MEMORY_PRELOAD_LIMIT = 5
PAST_PRELOAD_LIMIT = 3


class DuplicateTurnError(Exception):
    """This client message was already handled; the turn is not run again."""

    def __init__(self, user_event_id: str) -> None:
        super().__init__(f"Message {user_event_id!r} was already received.")
        self.user_event_id = user_event_id


def _steps_metadata(steps: dict[str, str]) -> dict[str, Any] | None:
    return {TOOL_STEPS_KEY: steps} if steps else None


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
        self.store = TurnStore(
            agent_name=agent.name, sessions=self.sessions, pii_redaction=agent.pii_redaction
        )
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
        attachments: Sequence[ArtifactRecord] = (),
        claim: HeldClaim | None = None,
        session_answer: Any = None,
    ) -> AsyncIterator[Event]:
        """Yield the invocation's events: the stored user event, partial text, stored replies.

        ``attachments`` are files of the session that go with the message: the user event
        holds references to them and names them in its ``artifact_delta``, as ADK's runner
        does for the files it saves from a message.

        Every turn is claimed (``agents_app.chat.turn_claims``), so that should this process die
        before the turn's final event, the sweeper stores the reply as interrupted, and its
        events are named after their place in the turn. ``claim`` is the turn's claim when the
        caller took it (the chat socket does, to learn whether the turn is to run here); else
        the runner claims the turn, renews the claim while the turn runs and gives it up once
        the turn has ended. A turn without a ``client_message_id`` gets one made here, kept in
        the user event's metadata like a client's, so that Retry can name it.
        ``session_answer`` is the answer of ``session_read`` when the caller read the session
        for this turn already (the chat socket does, with the claim): the turn then starts
        without a round trip of its own.

        Raises SessionNotFoundError for a session the user does not have,
        DuplicateTurnError when ``client_message_id`` was already stored or its turn is
        claimed elsewhere, TurnTakenOverError when another process stored the turn's next
        event, and TurnBlockedError (its claim released) when the turn's next event id holds
        an event of another invocation.
        """
        session, compaction, permissions = await self._session_load(
            user_id=user_id, session_id=session_id, answer=session_answer
        )
        client_message_id = client_message_id or server_message_id()
        user_event_id = user_event_id_for(client_message_id)
        own_claim = None
        if claim is None:
            owned = await session_selectors.store_read_async(
                session_selectors.session_key_and_app_read(
                    user_pk=int(session.user_id), session_id=session.id, app_name=session.app_name
                )
            )
            if owned is None:
                raise SessionNotFoundError(
                    f"Session {session_id!r} not found in app {self.agent.app_name!r}."
                )
            own_claim = await turn_claim_take_async(
                session_id=owned[0], user_event_id=user_event_id, holder=holder_name("runner")
            )
            if own_claim is None:
                raise DuplicateTurnError(user_event_id)
        events = self._user_turn(
            session=session,
            compaction=compaction,
            permissions=permissions,
            new_message=new_message,
            user_event_id=user_event_id,
            client_message_id=client_message_id,
            attachments=attachments,
            claim=claim or own_claim,
        )
        if own_claim is None:
            async for event in events:
                yield event
            return
        keeper = asyncio.create_task(turn_claim_keep(claim=own_claim))
        try:
            async for event in events:
                yield event
        except TurnBlockedError:
            # No process can ever end the turn: its claim would only have it taken over again.
            keeper.cancel()
            await turn_claim_release_async(claim=own_claim)
            raise
        except BaseException:
            # Cut short: an open turn keeps its claim, for the sweeper to end it.
            keeper.cancel()
            await turn_claim_release_if_ended_async(claim=own_claim)
            raise
        keeper.cancel()
        await turn_claim_release_async(claim=own_claim)

    async def _user_turn(
        self,
        *,
        session: Session,
        compaction: Event | None,
        permissions: MemoryPermissions,
        new_message: types.Content,
        user_event_id: str,
        client_message_id: str,
        attachments: Sequence[ArtifactRecord],
        claim: HeldClaim,
    ) -> AsyncIterator[Event]:
        """The turn of a new user message, its user event stored first; its final event
        releases ``claim``."""
        invocation_id = new_invocation_id()
        log_context_bind(invocation_id=invocation_id)
        user_event = Event(
            id=user_event_id,
            invocation_id=invocation_id,
            author="user",
            content=types.Content(
                role="user",
                parts=[
                    *(new_message.parts or ()),
                    *attachment_parts(attachments, session_id=session.id),
                ],
            ),
            actions=EventActions(
                artifact_delta={record.filename: record.version for record in attachments}
            )
            if attachments
            else EventActions(),
        )
        metadata: dict[str, Any] = {"client_message_id": client_message_id}
        if attachments:
            metadata[ATTACHMENTS_KEY] = attachments_metadata(attachments)
        user_event.custom_metadata = metadata
        try:
            await self.store.user_event(session, self._redacted(user_event))
        except DuplicateEventError:
            raise DuplicateTurnError(user_event.id) from None
        yield user_event
        run = TurnRun(invocation_id=invocation_id, user_event_id=user_event.id, position=1)
        run.claim = claim
        async for event in self._turn(
            session=session,
            compaction=compaction,
            permissions=permissions,
            run=run,
            query=user_event.text(),
            steps_used=0,
            notify_memory=True,
        ):
            yield event

    async def continue_async(
        self,
        *,
        user_id: str,
        session_id: str,
        progress: TurnProgress,
        claim: HeldClaim | None = None,
    ) -> AsyncIterator[Event]:
        """Run a stored turn of a client message on from where its events leave it: one whose
        process died before its final event (resume), or one that ended interrupted or failed
        (retry; the model then reads the turn without that ending).

        A tool call stored without its response is not run again: its response says it was
        interrupted, and the model goes on from there. Long-term memory hears of the turn once:
        unless an earlier run of it already ended normally (with an error reply). The turn's
        final event releases ``claim``, the claim its caller holds, in the same round trip.
        Raises as ``run_async`` does (never DuplicateTurnError).
        """
        session, compaction, permissions = await self._session_load(
            user_id=user_id, session_id=session_id
        )
        user_event = progress.events[0]
        log_context_bind(invocation_id=progress.invocation_id)
        run = TurnRun(
            invocation_id=progress.invocation_id,
            user_event_id=user_event.id,
            position=progress.next_position,
        )
        run.claim = claim
        if progress.pending_calls:
            yield await self.store.event(
                session,
                run,
                content=tool_calls_interrupted_content(progress.pending_calls),
            )
        earlier = progress.final
        if earlier is not None:
            # Retried: the model reads the turn as if it had not ended there.
            session.events = [event for event in session.events if event.id != earlier.id]
        async for event in self._turn(
            session=session,
            compaction=compaction,
            permissions=permissions,
            run=run,
            query=user_event.text(),
            steps_used=progress.step_count(),
            notify_memory=earlier is None or bool(earlier.interrupted),
        ):
            yield event

    def session_read(self, *, user_id: str, session_id: str) -> StoreRead:
        """What a turn of this runner reads before it stores anything (the session, its latest
        compaction, the memory permissions), for a caller to join with reads of its own; its
        answer goes to ``run_async`` as ``session_answer``."""
        return turn_session_read(
            app_name=self.agent.app_name,
            user_id=user_id,
            session_id=session_id,
            max_events=self.agent.compaction.max_events_loaded,
            memory=self.memory,
        )

    async def _session_load(
        self, *, user_id: str, session_id: str, answer: Any = None
    ) -> tuple[Session, Event | None, MemoryPermissions]:
        """The session, its latest compaction and the turn's memory permissions, from
        ``answer`` (``session_read``'s, read by the caller) or read in one round trip."""
        self.store.turn_begin()
        if answer is None:
            session, compaction, permissions = await turn_session_load(
                app_name=self.agent.app_name,
                user_id=user_id,
                session_id=session_id,
                max_events=self.agent.compaction.max_events_loaded,
                memory=self.memory,
            )
        else:
            session, compaction, permissions = turn_session_taken(answer, memory=self.memory)
        if session is None:
            raise SessionNotFoundError(
                f"Session {session_id!r} not found in app {self.agent.app_name!r}."
            )
        return session, compaction, permissions

    async def _turn(
        self,
        *,
        session: Session,
        compaction: Event | None,
        permissions: MemoryPermissions,
        run: TurnRun,
        query: str,
        steps_used: int,
        notify_memory: bool,
    ) -> AsyncIterator[Event]:
        """The agent's part of a turn after the user's message, then its background hooks."""
        report = TurnContextReport(
            model=self.model.name, offline=self.model.offline, memory_enabled=permissions.use
        )
        hears = permissions.create and notify_memory
        if hears:
            # What the memory triggers read of the turn goes with its final event's store.
            run.after_final = self.memory.turn_trigger_read(
                app_name=session.app_name,
                user_id=session.user_id,
                session_id=session.id,
                invocation_id=run.invocation_id,
            )
        report.app_guidance = await self.memory.app_guidance(session=session)
        if permissions.use and self.agent.preload_memories:
            report.memories = await self.memory.preload(
                session=session, query=query, limit=MEMORY_PRELOAD_LIMIT
            )
        if permissions.past and self.agent.preload_memories:
            report.past_conversations = await self.memory.preload_past(
                session=session, query=query, limit=PAST_PRELOAD_LIMIT
            )
        tools = self._tools(permissions)
        try:
            async for event in self._steps(
                session=session,
                compaction=compaction,
                run=run,
                tools=tools,
                report=report,
                permissions=permissions,
                steps_used=steps_used,
            ):
                yield event
        except asyncio.CancelledError as cancel:
            await self.store.cut_short(session, run, report, reason=cancel_reason(cancel))
            raise
        if hears:
            await self.memory.turn_completed(
                session=session,
                invocation_id=run.invocation_id,
                facts=run.after_final_answer,
            )
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
                if tool.name == "search_past_conversations" and permissions.past:
                    tools[tool.name] = tool
                if tool.name == "forget_memory" and not permissions.temporary:
                    tools[tool.name] = tool
        return tools

    async def _steps(
        self,
        *,
        session: Session,
        compaction: Event | None,
        run: TurnRun,
        tools: dict[str, Tool],
        report: TurnContextReport,
        permissions: MemoryPermissions,
        steps_used: int,
    ) -> AsyncIterator[Event]:
        steps_left = max(0, self.agent.max_steps - steps_used)
        for step in range(steps_left):
            try:
                request = await turn_request_build(
                    agent=self.agent,
                    session=session,
                    compaction=compaction,
                    tools=tools,
                    report=report,
                    permissions=permissions,
                )
            except MissingStateKeyError as error:
                yield await self.store.final(
                    session,
                    run,
                    report,
                    error_code="instruction_error",
                    error_message=str(error),
                )
                return
            offered = bool(request.tools)
            if step == steps_left - 1 and self.agent.max_steps > 1:
                # The last step the agent may take is asked without tools, so that it
                # answers in words: a model that calls a tool at every step (a small one
                # often does) ends the turn with a reply, not an error.
                request.tools = []
            run.reply_id = reply_id = run.next_id()
            run.text_parts = text_parts = []
            call_parts: list[types.Part] = []
            usage = None
            try:
                async for chunk in generate_with_retries(self.model, request, self.retry_policy):
                    if chunk.text:
                        text_parts.append(chunk.text)
                        yield self._partial(reply_id, run.invocation_id, chunk)
                    call_parts.extend(
                        chunk.function_call_parts
                        or [types.Part(function_call=call) for call in chunk.function_calls]
                    )
                    usage = chunk.usage_metadata or usage
            except ModelError as error:
                report.tools_refused = self._tools_refused(offered=offered)
                await self._tool_traits_keep()
                logger.warning("model failed in %s: %s", run.invocation_id, error)
                yield await self.store.final(
                    session,
                    run,
                    report,
                    id=reply_id,
                    content=text_content(text_parts),
                    error_code=error.code,
                    error_message=str(error),
                )
                return
            report.tools_refused = self._tools_refused(offered=offered)
            await self._tool_traits_keep()
            text = "".join(text_parts)
            calls = [part.function_call for part in call_parts]
            if not calls:
                yield await self.store.final(
                    session,
                    run,
                    report,
                    id=reply_id,
                    content=text_content(text_parts) or types.Content(role="model", parts=[]),
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
            yield await self.store.event(
                session,
                run,
                id=reply_id,
                content=types.Content(role="model", parts=parts),
                usage_metadata=usage,
                custom_metadata=_steps_metadata(tool_steps(calls=calls, tools=tools)),
            )
            run.reply_id, run.text_parts, run.unanswered = None, [], calls
            response_parts, state_delta = await tool_calls_run(
                session=session,
                invocation_id=run.invocation_id,
                agent_name=self.agent.name,
                calls=calls,
                tools=tools,
                report=report,
                permissions=permissions,
            )
            responses = [part.function_response.response or {} for part in response_parts]
            yield await self.store.event(
                session,
                run,
                content=types.Content(role="user", parts=response_parts),
                actions=EventActions(state_delta=state_delta),
                custom_metadata=_steps_metadata(
                    tool_steps(calls=calls, tools=tools, responses=responses)
                ),
            )
            run.unanswered = []
        yield await self.store.final(
            session,
            run,
            report,
            error_code="too_many_steps",
            error_message=f"The agent stopped after {self.agent.max_steps} tool steps.",
        )

    async def _tool_traits_keep(self) -> None:
        """Keep on the app what this step found of its model server's tools (a refusal, a
        tool decision it could not stream), once: the app's other processes and next turns
        follow it from their first request."""
        found = getattr(self.model, "tool_traits", None)
        if found is None:
            return
        traits = found()
        if all(traits.values()) or traits == dict(self.agent.tool_traits):
            return
        await sync_to_async(app_tool_traits_keep)(
            app_name=self.agent.app_name,
            provider=self.agent.provider,
            model=self.agent.model,
            traits=traits,
        )
        self.agent = dataclasses.replace(self.agent, tool_traits=tuple(traits.items()))

    def _tools_refused(self, *, offered: bool) -> bool:
        """Whether the turn offered tools its model's server is known to refuse (a model
        without ``calls_tools`` is one that calls them)."""
        return offered and not getattr(self.model, "calls_tools", True)

    def _partial(self, reply_id: str, invocation_id: str, chunk: LlmChunk) -> Event:
        return Event(
            id=reply_id,
            invocation_id=invocation_id,
            author=self.agent.name,
            content=types.Content(role="model", parts=[types.Part(text=chunk.text)]),
            partial=True,
        )

    def _redacted(self, event: Event) -> Event:
        """The event as the app lets it be stored: PII scrubbed when the app asks for it."""
        return event_redact(event) if self.agent.pii_redaction else event
