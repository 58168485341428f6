"""What came before a job's events in the conversation (:class:`ExtractionContext`), read from
the session store, and as the model reads it ahead of the transcript."""

from __future__ import annotations

from memory_app.extraction.facts import (
    CONTEXT_CHARS,
    CONTEXT_EVENTS,
    USER_AUTHOR,
    ExtractionContext,
)
from sessions_app import selectors as session_selectors
from sessions_app.events import Event

CONTEXT_HEADER = (
    "Earlier in this conversation (context only: extract nothing from it, cite none of it):"
)
TRANSCRIPT_HEADER = "The conversation to extract from:"


def extraction_context_read(
    *, app_name: str, user_pk: int, session_id: str, events: list[Event], after_sequence: int
) -> ExtractionContext | None:
    """What came before ``events`` (the events after ``after_sequence``) in the session: the
    newest compaction's summary when it ends before them, and up to ``CONTEXT_EVENTS`` turns
    after it and before them, those memory may read only; None when there is nothing."""
    if not events:
        return None
    first = events[0].timestamp
    compaction = session_selectors.session_latest_compaction(
        app_name=app_name, user_pk=user_pk, session_id=session_id
    )
    summary, since = "", None
    if compaction is not None and compaction.actions.compaction.end_timestamp <= first:
        folded = compaction.actions.compaction
        summary = " ".join(part.text or "" for part in folded.compacted_content.parts or [])
        since = folded.end_timestamp
    earlier = [
        stored.event
        for stored in session_selectors.stored_events_before(
            session_key=session_id,
            before_sequence=after_sequence,
            limit=CONTEXT_EVENTS * 3,
            for_memory=True,
        )
        if stored.event.actions.compaction is None
        and stored.event.text().strip()
        and (since is None or stored.event.timestamp > since)
    ][-CONTEXT_EVENTS:]
    if not summary.strip() and not earlier:
        return None
    return ExtractionContext(summary=summary.strip()[-CONTEXT_CHARS:], events=earlier)


def context_text(context: ExtractionContext | None) -> str:
    """The context as the model reads it ahead of the events (no event ids, so no fact can cite
    it), bounded to ``CONTEXT_CHARS``; "" when there is none."""
    if context is None:
        return ""
    lines = []
    if context.summary.strip():
        lines.append("Summary: " + " ".join(context.summary.split()))
    for event in context.events:
        text = " ".join(event.text().split())
        if text:
            speaker = "user" if event.author == USER_AUTHOR else "assistant"
            lines.append(f"{speaker}: {text}")
    if not lines:
        return ""
    body = "\n".join(lines)
    if len(body) > CONTEXT_CHARS:
        body = "..." + body[-CONTEXT_CHARS:]
    return f"{CONTEXT_HEADER}\n{body}\n\n{TRANSCRIPT_HEADER}"
