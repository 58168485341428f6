"""Turns stored for the tests of claims and of the sweeper: a user's message, the agent's
events at their places in the turn, a claim made to look abandoned."""

import time

from google.genai import types

from agents_app.chat.turn_claims import HeldClaim
from agents_app.models import TurnClaim
from sessions_app import services
from sessions_app.events import Event, new_invocation_id
from sessions_app.models import EventRecord


def chat_message(session, client_message_id="m1", text="hello"):
    event = Event(
        id=f"msg-{client_message_id}",
        invocation_id=new_invocation_id(),
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )
    return services.event_append(session=session, event=event)


def agent_event(session, user_event, position, **fields):
    event = Event(
        id=f"{user_event.id}.{position}",
        invocation_id=user_event.invocation_id,
        author="assistant",
        **fields,
    )
    return services.event_append(session=session, event=event)


def claim_age(claim: HeldClaim, seconds: float) -> None:
    """Make the claim's holder look silent for ``seconds`` (as if its process had died)."""
    TurnClaim.objects.filter(pk=claim.id).update(renewed_at=time.time() - seconds)


def turn_events(session):
    return list(
        EventRecord.objects.filter(session__session_id=session.id)
        .order_by("sequence")
        .values_list("event_id", "turn_complete", "interrupted", "error_code")
    )
