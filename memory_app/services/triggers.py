"""What requests a generation job: a finished turn (the app's turn triggers), the session's
end, the user's departure and the session's idleness."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from memory_app import selectors
from memory_app.models import GenerationJob, MemoryWatermark, SessionDeparture
from memory_app.services.jobs import memory_job_request
from sessions_app import selectors as session_selectors
from sessions_app.app_policy import app_policy_get
from sessions_app.models import SessionRecord

REMEMBER_REQUEST = re.compile(r"\b(remember|don'?t forget|do not forget)\b", re.IGNORECASE)


def _turn_trigger_decide(
    config: selectors.TriggerConfig, facts: selectors.TurnTriggerFacts | None
) -> GenerationJob.Trigger | None:
    """The turn trigger due, from the app's triggers and the turn's facts (None: not read,
    as ``_facts_needed`` says no trigger can be due). A job already queued for the session
    takes this turn when it starts, so nothing more is due: a request would only find it."""
    if facts is None or facts.job_queued:
        return None
    if config.explicit and facts.user_text and REMEMBER_REQUEST.search(facts.user_text):
        return GenerationJob.Trigger.EXPLICIT
    if config.every_turn:
        return GenerationJob.Trigger.EVERY_TURN
    if config.every_n_turns > 0 and facts.unprocessed_user_turns >= config.every_n_turns:
        return GenerationJob.Trigger.EVERY_N_TURNS
    return None


def _facts_needed(config: selectors.TriggerConfig) -> bool:
    return config.explicit or config.every_turn or config.every_n_turns > 0


def memory_turn_trigger(
    *, app_name: str, session_id: str, invocation_id: str
) -> GenerationJob.Trigger | None:
    """The turn trigger due after a stored turn, or None: explicit ("remember ..." in the
    user's message) first, then every turn, then every N user turns past the watermark; none
    while a job of the session is queued. One indexed read at most."""
    config = selectors.trigger_config_get(app_name=app_name)
    facts = None
    if _facts_needed(config):
        facts = selectors.turn_trigger_facts(session_id=session_id, invocation_id=invocation_id)
    return _turn_trigger_decide(config, facts)


async def memory_turn_trigger_async(
    *,
    app_name: str,
    user_pk: int,
    session_id: str,
    invocation_id: str,
    facts: selectors.TurnTriggerFacts | None = None,
) -> GenerationJob.Trigger | None:
    """``memory_turn_trigger`` from an event loop, for the user's session of this id (ADK's)
    in the app: its read goes from the loop on PostgreSQL, so the check after every turn
    takes nothing from the process's one database thread. ``facts``: the turn's, as
    ``selectors.turn_trigger_facts_of_id_read`` read them after it was stored (then nothing
    is read here)."""
    config = await selectors.trigger_config_get_async(app_name=app_name)
    if not _facts_needed(config):
        return None
    if facts is None:
        facts = await session_selectors.store_read_async(
            selectors.turn_trigger_facts_of_id_read(
                app_name=app_name,
                user_pk=user_pk,
                session_id=session_id,
                invocation_id=invocation_id,
            )
        )
    return _turn_trigger_decide(config, facts)


def memory_turn_completed(
    *, app_name: str, user_pk: int, session_id: str, invocation_id: str
) -> GenerationJob | None:
    """After a stored turn: queue a job if one of the app's turn triggers is due
    (``memory_turn_trigger``), else None (also when a queued job will take the turn). The job
    itself runs elsewhere."""
    trigger = memory_turn_trigger(
        app_name=app_name, session_id=session_id, invocation_id=invocation_id
    )
    if trigger is None:
        return None
    return memory_job_request(
        app_name=app_name, user_pk=user_pk, session_id=session_id, trigger=trigger
    )


def memory_session_end(*, app_name: str, user_pk: int, session_id: str) -> GenerationJob | None:
    """The user or the client ended the session: queue a job for what is left unprocessed."""
    return memory_job_request(
        app_name=app_name,
        user_pk=user_pk,
        session_id=session_id,
        trigger=GenerationJob.Trigger.SESSION_END,
    )


# Sessions with unprocessed turns that opening another chat counts as left: those updated in
# the last day, at most this many (a person has few chats going at once).
LEFT_ON_OPEN_WINDOW_SECONDS = 24 * 3600
LEFT_ON_OPEN_MAX_SESSIONS = 5


def memory_session_left(*, user_pk: int, session_id: str, now: datetime | None = None) -> bool:
    """The user left the session (its chat socket closed): generate its unprocessed turns once
    the app's quiet period has passed, unless they come back first. Returns whether a departure
    was recorded (not for a temporary chat, an opted-out user, or another user's session)."""
    if not selectors.session_memory_access(user_pk=user_pk, session_id=session_id).create:
        return False
    SessionDeparture.objects.update_or_create(
        session_id=session_id, defaults={"left_at": now or timezone.now()}
    )
    return True


def memory_session_opened(*, user_pk: int, session_id: str, now: datetime | None = None) -> int:
    """The user opened the session (a chat socket connected): they are back in it, so a
    departure of it is forgotten (a page reload leaves and comes back within the quiet period),
    and their other recently active sessions with unprocessed turns count as left now. Returns
    how many departures were recorded."""
    SessionDeparture.objects.filter(session_id=session_id, session__user_id=user_pk).delete()
    now = now or timezone.now()
    processed = MemoryWatermark.objects.filter(session_id=OuterRef("pk")).values("last_sequence")
    others = list(
        SessionRecord.objects.filter(
            user_id=user_pk,
            temporary=False,
            last_update_time__gte=now.timestamp() - LEFT_ON_OPEN_WINDOW_SECONDS,
            memory_departure__isnull=True,
        )
        .exclude(pk=session_id)
        .annotate(processed=Coalesce(Subquery(processed), Value(0)))
        .filter(last_sequence__gt=F("processed"))
        .order_by("-last_update_time")
        .values_list("pk", flat=True)[:LEFT_ON_OPEN_MAX_SESSIONS]
    )
    return sum(memory_session_left(user_pk=user_pk, session_id=other, now=now) for other in others)


def memory_sessions_left_enqueue(*, now: datetime | None = None) -> int:
    """Queue a ``session_left`` job for each session left longer ago than its app's
    ``session_left_seconds``; returns how many were queued.

    The departure is used up either way: a session the user wrote in again after leaving it
    is theirs again (its next departure counts), and a job request that finds a job already
    queued, or nothing allowed, adds nothing. Jobs never overlap on the same turns
    (:func:`memory_job_request`, :func:`_job_start` and the watermark).
    """
    now = now or timezone.now()
    quiet_values = [settings.MEMORY_TRIGGER_SESSION_LEFT_SECONDS] + [
        app.triggers.get("session_left_seconds", 0)
        for app in app_policy_get().app_settings_all().values()
    ]
    shortest = min((value for value in quiet_values if value > 0), default=0)
    if shortest <= 0:
        return 0
    due = SessionDeparture.objects.filter(left_at__lte=now - timedelta(seconds=shortest))
    queued = 0
    configs = {}
    for departure in due.select_related("session").order_by("left_at")[
        : settings.MEMORY_IDLE_SCAN_BATCH_SIZE
    ]:
        session = departure.session
        if session.app_name not in configs:
            configs[session.app_name] = selectors.trigger_config_get(app_name=session.app_name)
        quiet = configs[session.app_name].session_left_seconds
        if quiet <= 0:
            departure.delete()
            continue
        if departure.left_at > now - timedelta(seconds=quiet):
            continue
        used = SessionDeparture.objects.filter(
            session_id=session.pk, left_at=departure.left_at
        ).delete()[0]
        if not used or session.last_update_time > departure.left_at.timestamp():
            continue
        job = memory_job_request(
            app_name=session.app_name,
            user_pk=session.user_id,
            session_id=session.pk,
            trigger=GenerationJob.Trigger.SESSION_LEFT,
        )
        queued += job is not None
    return queued


def memory_sessions_idle_enqueue(*, now: datetime | None = None) -> int:
    """Queue a job for each session idle past its app's ``session_idle_seconds`` that still has
    unprocessed events and no queued or running job; returns how many were queued.

    Temporary chats and users who turned creation off are left out in the query; a batch of
    ``MEMORY_IDLE_SCAN_BATCH_SIZE`` per run keeps each run short.
    """
    now_ts = (now or timezone.now()).timestamp()
    configs = {}
    idle_values = [settings.MEMORY_TRIGGER_SESSION_IDLE_SECONDS] + [
        app.triggers.get("session_idle_seconds", 0)
        for app in app_policy_get().app_settings_all().values()
    ]
    shortest = min((value for value in idle_values if value > 0), default=0)
    if shortest <= 0:
        return 0
    pending = GenerationJob.objects.filter(
        session_id=OuterRef("pk"),
        status__in=[GenerationJob.Status.QUEUED, GenerationJob.Status.RUNNING],
    )
    processed = MemoryWatermark.objects.filter(session_id=OuterRef("pk")).values("last_sequence")
    candidates = (
        SessionRecord.objects.filter(temporary=False, last_update_time__lt=now_ts - shortest)
        .exclude(user__memory_settings__create_enabled=False)
        .annotate(pending=Exists(pending), processed=Coalesce(Subquery(processed), Value(0)))
        .filter(pending=False, last_sequence__gt=F("processed"))
        .order_by("last_update_time")
        .values_list("pk", "app_name", "user_id", "last_update_time")[
            : settings.MEMORY_IDLE_SCAN_BATCH_SIZE
        ]
    )
    queued = 0
    for session_id, app_name, user_pk, last_update_time in candidates:
        if app_name not in configs:
            configs[app_name] = selectors.trigger_config_get(app_name=app_name)
        idle = configs[app_name].session_idle_seconds
        if idle > 0 and last_update_time < now_ts - idle:
            job = memory_job_request(
                app_name=app_name,
                user_pk=user_pk,
                session_id=session_id,
                trigger=GenerationJob.Trigger.SESSION_IDLE,
            )
            queued += job is not None
    return queued
