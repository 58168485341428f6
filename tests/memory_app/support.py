"""Helpers shared by the memory job, retrieval, provider, deletion and ADK tests."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from google.genai import types

from memory_app import services
from memory_app.embedding import embedder_get
from memory_app.models import GenerationJob, Memory, MemoryScope, MemorySource, SourceType
from sessions_app import services as session_services
from sessions_app.events import Event, new_invocation_id
from sessions_app.models import EventRecord, SessionRecord
from sessions_app.types import Session
from tests.factories import session_key

APP = "chat"


@pytest.fixture
def lexical_only(settings):
    """No embedder (so no torch and no Gemini)."""
    settings.MEMORY_EMBEDDER = "none"
    embedder_get.cache_clear()
    yield
    embedder_get.cache_clear()


def session_make(user, *, app_name: str = APP, temporary: bool = False) -> Session:
    session = session_services.session_create(app_name=app_name, user_id=str(user.pk))
    if temporary:
        SessionRecord.objects.filter(session_id=session.id).update(temporary=True)
    return session


def turn_add(session: Session, text: str, *, reply: str | None = "Noted.") -> str:
    """Store a user message (and a reply); returns the invocation id."""
    invocation_id = new_invocation_id()
    session_services.event_append(
        session=session,
        event=Event(
            invocation_id=invocation_id,
            author="user",
            content=types.Content(role="user", parts=[types.Part(text=text)]),
        ),
    )
    if reply is not None:
        session_services.event_append(
            session=session,
            event=Event(
                invocation_id=invocation_id,
                author="assistant",
                content=types.Content(role="model", parts=[types.Part(text=reply)]),
                turn_complete=True,
            ),
        )
    return invocation_id


def memory_make(
    *,
    user=None,
    text: str,
    app_name: str = APP,
    scope: str = MemoryScope.USER,
    session_id: str | None = None,
    sources: list[EventRecord] = (),
    importance: float = 0.5,
    confidence: float = 0.8,
    source_type: str = SourceType.IMPLICIT,
    age_days: float = 0,
    expires_in_days: float | None = None,
) -> Memory:
    """A memory row written directly (the tests' shortcut past generation)."""
    memory = Memory.objects.create(
        app_name=app_name,
        scope=scope,
        user=user,
        session_id=session_id,
        text=text,
        source_type=source_type,
        confidence=confidence,
        importance=importance,
        expires_at=None
        if expires_in_days is None
        else timezone.now() + timedelta(days=expires_in_days),
    )
    if age_days:
        Memory.objects.filter(pk=memory.pk).update(
            updated_at=timezone.now() - timedelta(days=age_days)
        )
        memory.refresh_from_db()
    for event in sources:
        MemorySource.objects.create(memory=memory, event=event, excerpt="")
    return memory


def user_events(session_id: str) -> list[EventRecord]:
    return list(
        EventRecord.objects.filter(session__session_id=session_id, author="user").order_by(
            "sequence"
        )
    )


def completed(user, session, invocation_id):
    return services.memory_turn_completed(
        app_name=APP, user_pk=user.pk, session_id=session_key(session), invocation_id=invocation_id
    )


def job_for(user, session, trigger=GenerationJob.Trigger.SESSION_END, *, enqueue=True):
    return services.memory_job_request(
        app_name=APP,
        user_pk=user.pk,
        session_id=session_key(session),
        trigger=trigger,
        enqueue=enqueue,
    )


@pytest.fixture
def offline(settings):
    """No Gemini: extraction and consolidation run their offline rules."""
    settings.GEMINI_API_KEY = ""
    settings.GOOGLE_GENAI_USE_VERTEXAI = False


def generate(user, session):
    """Run a generation job over the session's new turns, here and now; returns the job."""
    job = services.memory_job_request(
        app_name=APP,
        user_pk=user.pk,
        session_id=session_key(session),
        trigger="explicit",
        enqueue=False,
    )
    return services.memory_job_run(job_id=str(job.id))
