"""The sweeper of chat turns whose process died: each such turn ends, stored as interrupted.

A turn's claim (``agents_app.chat.turn_claims``) is renewed while its process runs it. A claim
not renewed for ``TURN_INTERRUPTED_AFTER_SECONDS`` on a turn still open belongs to a process
that is gone and to a client that did not come back to resume it: the sweeper, a periodic
task, takes the claim over and stores the turn's final event as interrupted
(``server_stopped``), so the history and the chat say so and offer Retry. Claims left on
ended or never-stored turns are released.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings

from agents_app.chat.turn_claims import HeldClaim, holder_name, turn_claim_release, turn_progress
from agents_app.models import TurnClaim
from agents_app.runtime.agents import agent_for_app
from agents_app.runtime.turn_store import TurnBlockedError, place_held_by_another_turn
from agents_app.runtime.turns import (
    SERVER_STOPPED,
    SERVER_STOPPED_MESSAGE,
    TurnProgress,
    TurnRun,
    tool_calls_interrupted_content,
)
from sessions_app import selectors, services
from sessions_app.errors import DuplicateEventError, SessionNotFoundError
from sessions_app.events import Event
from sessions_app.models import SessionRecord
from sessions_app.types import Session

logger = logging.getLogger(__name__)

SWEEP_BATCH_SIZE = 200


@dataclass
class TurnSweepReport:
    """What one sweep did: claims of ended or never-stored turns released, turns stored as
    interrupted, open turns left for a client to resume (their claim expired recently), and
    turns given up (their claim released) because their next event id holds an event of
    another invocation, so no one can ever end them."""

    released: int = 0
    interrupted: list[str] = field(default_factory=list)
    waiting: int = 0
    blocked: list[str] = field(default_factory=list)


def turns_sweep(*, now: float | None = None, batch_size: int = SWEEP_BATCH_SIZE) -> TurnSweepReport:
    """Find turns whose process died and end them: an open turn whose claim has not been
    renewed for ``TURN_INTERRUPTED_AFTER_SECONDS`` gets its final event, stored as interrupted
    (``server_stopped``), and its claim released; so do claims whose turn ended or was never
    stored. Claims a live process renews are not touched.

    Safe to run twice or concurrently, and beside a client resuming the same turn: the
    sweeper takes the claim over (fence) before storing, and stores at the turn's next place,
    where only one event can ever be stored.
    """
    now = time.time() if now is None else now
    report = TurnSweepReport()
    expired = list(
        TurnClaim.objects.filter(renewed_at__lt=now - settings.TURN_LEASE_SECONDS)
        .order_by("renewed_at")
        .values_list("id", "session_id", "user_event_id", "fence", "renewed_at")[:batch_size]
    )
    for claim_id, session_id, user_event_id, fence, renewed_at in expired:
        progress = turn_progress(
            selectors.stored_events_of_turn(session_key=session_id, user_event_id=user_event_id)
        )
        if not progress.open:
            report.released += TurnClaim.objects.filter(pk=claim_id, fence=fence).delete()[0]
            continue
        if renewed_at >= now - settings.TURN_INTERRUPTED_AFTER_SECONDS:
            report.waiting += 1
            continue
        taken = TurnClaim.objects.filter(pk=claim_id, fence=fence).update(
            fence=fence + 1, holder=holder_name("sweeper")
        )
        if not taken:
            continue
        claim = HeldClaim(id=claim_id, fence=fence + 1)
        try:
            stored = _turn_interrupted_store(session_id=session_id, progress=progress)
        except TurnBlockedError as error:
            logger.error("turn %s of session %s given up: %s", user_event_id, session_id, error)
            turn_claim_release(claim=claim)
            report.blocked.append(user_event_id)
            continue
        if stored:
            turn_claim_release(claim=claim)
            report.interrupted.append(user_event_id)
    return report


def _turn_interrupted_store(*, session_id: str, progress: TurnProgress) -> bool:
    """Store the open turn's final event (``session_id``: its session row's key) as
    interrupted by a server stop, at its next place; False when another process stored
    there first (a zombie that is alive after all: the claim, taken over, stays for the next
    sweep). Raises TurnBlockedError when that place
    holds an event of another invocation."""
    record = (
        SessionRecord.objects.filter(pk=session_id)
        .values_list("session_id", "app_name", "user_id")
        .first()
    )
    if record is None:
        return False
    adk_session_id, app_name, user_pk = record
    user_event_id = progress.events[0].id
    run = TurnRun(
        invocation_id=progress.invocation_id,
        user_event_id=user_event_id,
        position=progress.next_position,
    )
    session = Session(id=adk_session_id, app_name=app_name, user_id=str(user_pk))
    author = agent_for_app(app_name).name
    events = []
    if progress.pending_calls:
        events.append(
            Event(
                id=run.next_id(),
                invocation_id=run.invocation_id,
                author=author,
                content=tool_calls_interrupted_content(progress.pending_calls),
            )
        )
    events.append(
        Event(
            id=run.next_id(),
            invocation_id=run.invocation_id,
            author=author,
            turn_complete=True,
            interrupted=True,
            error_code=SERVER_STOPPED,
            error_message=SERVER_STOPPED_MESSAGE,
        )
    )
    try:
        for event in events:
            services.event_append(session=session, event=event)
    except DuplicateEventError:
        held = selectors.stored_event_get(session_key=session_id, event_id=event.id)
        if place_held_by_another_turn(held, invocation_id=run.invocation_id):
            raise TurnBlockedError(
                f"its event id {event.id!r} holds an event of another invocation"
            ) from None
        logger.warning("turn %s was stored by another process while swept", user_event_id)
        return False
    except SessionNotFoundError:
        return False
    logger.warning(
        "turn %s of session %s stored as interrupted: its process stopped",
        user_event_id,
        session_id,
    )
    return True
