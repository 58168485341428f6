"""Turning a session's stored events into the contents of a model request.

What the model sees is a view: stored history is never altered. Left out are
events hidden by a rewind (already filtered when loading), events without
content, error events, the ending of a turn that was run again after it
(an interrupted or failed reply that Retry replaced), and everything a
compaction event covers (its summary stands in for them); then only the last
N invocations are kept, and the oldest contents are dropped until the token
estimate fits the budget.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.genai import types

from agents_app.runtime.agents import CompactionConfig
from sessions_app.events import Event

SUMMARY_PREFIX = "Summary of the earlier conversation:\n"


def estimate_tokens(content: types.Content) -> int:
    """A cheap token estimate (about four characters a token), good enough for budgeting."""
    characters = 0
    for part in content.parts or ():
        if part.text:
            characters += len(part.text)
        elif part.function_call:
            characters += len(str(part.function_call.args or "")) + 20
        elif part.function_response:
            characters += len(str(part.function_response.response or "")) + 20
    return characters // 4 + 4


@dataclass
class PreparedHistory:
    contents: list[types.Content]
    event_count: int
    compaction_summary: str | None


def is_history_event(event: Event) -> bool:
    if event.partial or event.actions.compaction or event.actions.rewind_before_invocation_id:
        return False
    if event.error_code and not (event.content and event.content.parts):
        return False
    return bool(event.content and event.content.parts)


def for_model(event: Event, agent_name: str) -> types.Content:
    """The content as the model should read it: the agent's own turns as 'model'."""
    content = event.content
    if event.author == "user" or event.get_function_responses():
        return types.Content(role="user", parts=content.parts)
    if event.author == agent_name:
        return types.Content(role="model", parts=content.parts)
    said = " ".join(part.text for part in content.parts if part.text)
    return types.Content(role="user", parts=[types.Part(text=f"[{event.author}] said: {said}")])


def _superseded_endings_drop(events: list[Event]) -> list[Event]:
    """The events without each final event that a later event of its invocation follows:
    the interrupted or failed ending of a turn that was retried. The model reads the turn as
    if it had not ended there."""
    last_of_invocation = {event.invocation_id: index for index, event in enumerate(events)}
    return [
        event
        for index, event in enumerate(events)
        if not (event.turn_complete and last_of_invocation[event.invocation_id] != index)
    ]


def _drop_orphans(contents: list[types.Content]) -> list[types.Content]:
    """Trimming must not start the history with a tool response whose call was cut off."""
    while contents and any(part.function_response for part in contents[0].parts or ()):
        contents = contents[1:]
    return contents


def history_prepare(
    *, events: list[Event], agent_name: str, compaction: Event | None, config: CompactionConfig
) -> PreparedHistory:
    summary = None
    if compaction is not None:
        covered_until = compaction.actions.compaction.end_timestamp
        events = [event for event in events if event.timestamp > covered_until]
        summary = "".join(
            part.text or "" for part in compaction.actions.compaction.compacted_content.parts or ()
        )
    history = [event for event in _superseded_endings_drop(events) if is_history_event(event)]
    if config.keep_last_invocations > 0:
        kept_invocations: list[str] = []
        for event in reversed(history):
            if event.invocation_id not in kept_invocations:
                kept_invocations.append(event.invocation_id)
        kept = set(kept_invocations[: config.keep_last_invocations])
        history = [event for event in history if event.invocation_id in kept]
    contents = [for_model(event, agent_name) for event in history]
    if summary:
        contents.insert(
            0, types.Content(role="user", parts=[types.Part(text=SUMMARY_PREFIX + summary)])
        )
    budget = config.token_budget
    if budget > 0:
        sizes = [estimate_tokens(content) for content in contents]
        total = sum(sizes)
        start = 0
        while total > budget and start < len(contents) - 1:
            total -= sizes[start]
            start += 1
        contents = _drop_orphans(contents[start:]) or contents[-1:]
    return PreparedHistory(contents=contents, event_count=len(history), compaction_summary=summary)
