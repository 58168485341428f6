"""Recursive summarisation of old invocations into compaction events.

Runs in the background (``agents_app.tasks.session_compact``), never on a
turn's hot path. Once enough invocations lie outside the window the prompt
keeps verbatim, they are summarised, together with the previous summary, into
a new compaction event covering everything from the first summarised event
on; the prompt then uses that summary instead of the covered events. Stored
history is never altered, and running it twice adds nothing the second time.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from google.genai import types

from agents_app.runtime.agents import AgentConfig, CompactionConfig, agent_for_app
from agents_app.runtime.context import SUMMARY_PREFIX, for_model, is_history_event
from agents_app.runtime.models import model_for_agent
from core.llm import Llm, LlmRequest
from sessions_app import selectors, services
from sessions_app.events import Event, EventActions, EventCompaction, new_invocation_id
from sessions_app.models import BackgroundModelCall
from sessions_app.services.model_calls import background_calls_kept
from sessions_app.types import GetSessionConfig

logger = logging.getLogger(__name__)

SUMMARY_INSTRUCTION = (
    "Summarise the conversation so far for your own later use: keep facts about the user, "
    "decisions, commitments and open questions; drop greetings and repetition. "
    "If an earlier summary is given, fold it in."
)


def _invocations_outside_window(events: list[Event], config: CompactionConfig) -> list[str]:
    """Invocation ids of the history, oldest first, that the prompt no longer keeps verbatim."""
    if config.keep_last_invocations <= 0:
        return []
    ordered: list[str] = []
    for event in events:
        if is_history_event(event) and event.invocation_id not in ordered:
            ordered.append(event.invocation_id)
    return ordered[: -config.keep_last_invocations]


def _uncovered(events: list[Event], compaction: Event | None) -> list[Event]:
    if compaction is None:
        return events
    covered_until = compaction.actions.compaction.end_timestamp
    return [event for event in events if event.timestamp > covered_until]


def compaction_due(
    *, events: list[Event], compaction: Event | None, config: CompactionConfig
) -> bool:
    """Whether enough uncovered invocations have left the kept window to summarise them."""
    if config.summarize_after_invocations <= 0:
        return False
    outside = _invocations_outside_window(_uncovered(events, compaction), config)
    return len(outside) >= config.summarize_after_invocations


async def _summarize(model: Llm, request: LlmRequest) -> str:
    return "".join([chunk.text async for chunk in model.generate_stream(request)]).strip()


def session_compact(
    *,
    app_name: str,
    user_id: str,
    session_id: str,
    agent: AgentConfig | None = None,
    model: Llm | None = None,
) -> Event | None:
    """Summarise what is due into a new compaction event; None when nothing is due.

    Raises the model's ModelError so the task can retry transient failures. The summary's
    model call is kept for the app's usage.
    """
    agent = agent or agent_for_app(app_name)
    user_pk = selectors.user_pk_from_id(user_id)
    if user_pk is None:
        return None
    previous = selectors.session_latest_compaction(
        app_name=app_name, user_pk=user_pk, session_id=session_id
    )
    config = GetSessionConfig(
        after_timestamp=previous.actions.compaction.end_timestamp if previous else None
    )
    session = selectors.session_get(
        app_name=app_name, user_id=user_id, session_id=session_id, config=config
    )
    if session is None:
        return None
    events = _uncovered(session.events, previous)
    outside = set(_invocations_outside_window(events, agent.compaction))
    if len(outside) < max(agent.compaction.summarize_after_invocations, 1):
        return None
    covered = [
        event for event in events if is_history_event(event) and event.invocation_id in outside
    ]
    contents = [for_model(event, agent.name) for event in covered]
    if previous is not None:
        earlier = previous.actions.compaction.compacted_content.parts or []
        summary_text = SUMMARY_PREFIX + "".join(part.text or "" for part in earlier)
        contents.insert(0, types.Content(role="user", parts=[types.Part(text=summary_text)]))
    with background_calls_kept(app_name=app_name, purpose=BackgroundModelCall.Purpose.SUMMARY):
        summary = async_to_sync(_summarize)(
            model or model_for_agent(agent),
            LlmRequest(
                model=agent.model,
                system_instruction=SUMMARY_INSTRUCTION,
                contents=contents,
                purpose="summarize",
            ),
        )
    event = Event(
        invocation_id=new_invocation_id(),
        author="system",
        actions=EventActions(
            compaction=EventCompaction(
                start_timestamp=(
                    previous.actions.compaction.start_timestamp
                    if previous
                    else covered[0].timestamp
                ),
                end_timestamp=max(event.timestamp for event in covered),
                compacted_content=types.Content(role="model", parts=[types.Part(text=summary)]),
            )
        ),
    )
    return services.event_append(session=session, event=event)


COMPACTION_PENDING_SECONDS = 120


def compaction_request(*, app_name: str, user_id: str, session_id: str) -> bool:
    """Enqueue a compaction of the session unless one was requested in the last two minutes.

    The marker in the shared cache keeps a busy session from queueing a task
    per turn while the first one waits for a worker; True if one was queued.
    Without the cache (Redis down) nothing is queued: compaction is still due
    after the next turn, which asks again.
    """
    from django.core.cache import cache

    from agents_app.tasks import session_compact as session_compact_task
    from core.background import task_enqueue
    from core.outages import REDIS_ERRORS

    try:
        marked = cache.add(
            f"compaction-pending:{session_id}", 1, timeout=COMPACTION_PENDING_SECONDS
        )
    except REDIS_ERRORS as error:
        logger.warning("compaction of %s not requested, no cache: %s", session_id, error)
        return False
    if not marked:
        return False
    task_enqueue(
        task=session_compact_task, app_name=app_name, user_id=user_id, session_id=session_id
    )
    return True
