"""Generation jobs: triggers that create them and the run that turns a session's new events
into memories."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from core.background import task_enqueue
from core.outages import REDIS_ERRORS
from memory_app import selectors
from memory_app.consolidation import (
    ConsolidationReport,
    PreparedFacts,
    consolidation_prepare,
    memories_consolidate,
)
from memory_app.extraction import ExtractedFact, facts_extract
from memory_app.models import (
    GenerationJob,
    MemoryWatermark,
    SessionDeparture,
)
from memory_app.services.releases import session_rewound_memories_release
from memory_app.services.users import memory_index_invalidate, memory_notices_send, user_lock
from memory_app.topics import topics_for_app
from sessions_app import selectors as session_selectors
from sessions_app.app_policy import app_policy_get
from sessions_app.models import EventRecord, SessionRecord

logger = logging.getLogger(__name__)


REMEMBER_REQUEST = re.compile(r"\b(remember|don'?t forget|do not forget)\b", re.IGNORECASE)
TERMINAL_STATUSES = (
    GenerationJob.Status.SUCCEEDED,
    GenerationJob.Status.SKIPPED,
    GenerationJob.Status.FAILED,
    GenerationJob.Status.DEAD,
)
DISPATCHED_KEY = "memory-job-dispatched:{job_id}"


# --- Triggers -----------------------------------------------------------------------------------


def _job_enqueue(job: GenerationJob) -> None:
    """Send the job to a worker after commit, marked as just dispatched.

    Without the cache (Redis down) the job is sent unmarked, and if the broker is down too
    it stays ``queued`` in the database: :func:`memory_jobs_redispatch` sends it again once
    both are back. Neither outage may fail the turn or the request that made the job.
    """
    from memory_app.tasks import memory_job_run as memory_job_run_task

    try:
        cache.set(
            DISPATCHED_KEY.format(job_id=job.id),
            1,
            timeout=settings.MEMORY_JOB_REDISPATCH_AFTER_SECONDS,
        )
    except REDIS_ERRORS as error:
        logger.warning("memory job %s not marked as dispatched, no cache: %s", job.id, error)
    task_enqueue(task=memory_job_run_task, job_id=str(job.id))


def memory_job_request(
    *,
    app_name: str,
    user_pk: int,
    session_id: str,
    trigger: GenerationJob.Trigger,
    enqueue: bool = True,
) -> GenerationJob | None:
    """Queue a job for the session's unprocessed events; None when the user turned memory
    creation off, the chat is temporary, or the session is not the user's.

    A job already queued for the session is returned instead of a second one: it reads the
    session's events when it runs, so it will see these too. ``enqueue=False`` leaves the
    job for the caller to run in this process.
    """
    if not selectors.session_memory_access(user_pk=user_pk, session_id=session_id).create:
        return None
    with transaction.atomic():
        _session_lock(session_id)
        queued = GenerationJob.objects.filter(
            session_id=session_id, status=GenerationJob.Status.QUEUED
        ).first()
        if queued is not None:
            return queued
        job = GenerationJob.objects.create(
            user_id=user_pk, app_name=app_name, session_id=session_id, trigger=trigger
        )
        if enqueue:
            _job_enqueue(job)
    return job


def _session_lock(session_id: str) -> None:
    """Lock the session's row until the transaction ends: job requests and job starts of one
    session take it, so two of them never both see "no job yet" (PostgreSQL; SQLite serialises
    writers anyway)."""
    list(SessionRecord.objects.select_for_update().filter(pk=session_id).values_list("pk"))


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
    *, app_name: str, session_id: str, invocation_id: str
) -> GenerationJob.Trigger | None:
    """``memory_turn_trigger`` from an event loop: its read goes from the loop on PostgreSQL,
    so the check after every turn takes nothing from the process's one database thread."""
    config = await selectors.trigger_config_get_async(app_name=app_name)
    facts = None
    if _facts_needed(config):
        facts = await session_selectors.store_read_async(
            selectors.turn_trigger_facts_read(session_id=session_id, invocation_id=invocation_id)
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


# --- Running a job ------------------------------------------------------------------------------


def _job_start(job_id: str) -> GenerationJob | None:
    """Mark the job running and count the attempt; None if it already finished, if another
    delivery of it is running, or if another job of its session is running (this one stays
    queued: that job dispatches it when it ends, see :func:`job_finish`). So two runs never
    read the same turns at once.

    A run counts as live for ``TASK_VISIBILITY_TIMEOUT_SECONDS`` after it started (which is
    kept above the longest job): a delivery after that is the broker handing over the job of
    a worker that died, and takes it over."""
    with transaction.atomic():
        session_id = (
            GenerationJob.objects.filter(pk=job_id).values_list("session_id", flat=True).first()
        )
        if session_id is not None:
            _session_lock(session_id)
        job = GenerationJob.objects.select_for_update().get(pk=job_id)
        live_since = timezone.now() - timedelta(seconds=settings.TASK_VISIBILITY_TIMEOUT_SECONDS)
        if job.status in TERMINAL_STATUSES:
            return None
        if job.status == GenerationJob.Status.RUNNING and job.started_at > live_since:
            return None  # a second delivery of a job another worker is running
        if (
            job.session_id is not None
            and GenerationJob.objects.filter(
                session_id=job.session_id,
                status=GenerationJob.Status.RUNNING,
                started_at__gt=live_since,
            )
            .exclude(pk=job.pk)
            .exists()
        ):
            return None
        job.status = GenerationJob.Status.RUNNING
        job.attempts += 1
        job.started_at = timezone.now()
        job.save(update_fields=["status", "attempts", "started_at"])
    return job


def job_finish(
    job: GenerationJob,
    *,
    status: GenerationJob.Status,
    error: str = "",
    first_sequence: int | None = None,
    last_sequence: int | None = None,
) -> GenerationJob:
    job.status = status
    job.error = error
    job.first_sequence = first_sequence
    job.last_sequence = last_sequence
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "error", "first_sequence", "last_sequence", "finished_at"])
    _session_next_dispatch(job.session_id)
    return job


def _session_next_dispatch(session_id: str | None) -> None:
    """A job of the session ended: send the session's queued job, which waited for it."""
    if session_id is None:
        return
    waiting = GenerationJob.objects.filter(
        session_id=session_id, status=GenerationJob.Status.QUEUED
    ).first()
    if waiting is not None:
        _job_enqueue(waiting)


def _skip_reason(job: GenerationJob) -> str:
    if job.session_id is None:
        return "skipped: the session was deleted"
    access = selectors.session_memory_access(user_pk=job.user_id, session_id=job.session_id)
    if not access.create:
        return "skipped: memory creation is off for this user or this chat"
    return ""


@dataclass
class _Batch:
    """Events read for one attempt: those after ``after`` up to ``upto`` (rewound ones left out)."""

    after: int
    upto: int
    more: bool
    events: list = field(default_factory=list)


def _batch_read(session_id: str) -> _Batch:
    after = selectors.watermark_get(session_id=session_id)
    session_last = (
        SessionRecord.objects.filter(pk=session_id).values_list("last_sequence", flat=True).first()
    )
    page = session_selectors.stored_events_page(
        session_id=session_id, after_sequence=after, page_size=settings.MEMORY_JOB_MAX_EVENTS
    )
    more = page.next_after_sequence is not None
    upto = page.events[-1].sequence if more else max(session_last or 0, after)
    return _Batch(
        after=after, upto=upto, more=more, events=[stored.event for stored in page.events]
    )


def _batch_rewound_since(session_id: str, batch: _Batch) -> bool:
    """Whether a rewind took events of ``batch`` out of the history after they were read.

    Called once the run's memories are committed: a rewind committed before this read is seen
    here (and its memories are revised now); one committed after revises them itself, since
    its revision runs after its commit and finds them stored. So no fact of a rewound turn
    outlives a run that raced the rewind, and no lock is shared with the chat."""
    read = [event.id for event in batch.events]
    return (
        bool(read)
        and EventRecord.objects.filter(
            session_id=session_id, event_id__in=read, rewound=True
        ).exists()
    )


def memory_job_run(*, job_id: str) -> GenerationJob:
    """Run a job: extract facts from the session's unprocessed events, consolidate, store.

    Finishes the job as succeeded (with the event range it processed) or skipped (opted out,
    temporary or deleted session, nothing new, or another run got there first). Raises the
    extraction's ``ModelError`` for the task to retry; the job stays running until the task
    decides. Running a finished job again returns it unchanged.
    """
    job = _job_start(job_id)
    if job is None:
        return GenerationJob.objects.get(pk=job_id)  # finished, or waiting for its session
    reason = _skip_reason(job)
    if reason:
        return job_finish(job, status=GenerationJob.Status.SKIPPED, error=reason)
    while True:
        batch = _batch_read(job.session_id)
        if batch.upto <= batch.after:
            return job_finish(
                job, status=GenerationJob.Status.SKIPPED, error="skipped: no new events"
            )
        facts = (
            facts_extract(
                app_name=job.app_name,
                events=batch.events,
                topics=topics_for_app(app_name=job.app_name),
                user_pk=job.user_id,
            )
            if batch.events
            else []
        )
        prepared = consolidation_prepare(app_name=job.app_name, facts=facts, user_pk=job.user_id)
        outcome = _job_write(job, batch=batch, facts=facts, prepared=prepared)
        if outcome is not None:
            break
    finished, report = outcome
    if report is not None:
        if _batch_rewound_since(job.session_id, batch):
            session_rewound_memories_release(session_id=job.session_id)
        memory_index_invalidate(app_name=job.app_name, user_pk=job.user_id)
        memory_notices_send(user_pk=job.user_id, report=report)
        if batch.more:
            memory_job_request(
                app_name=job.app_name,
                user_pk=job.user_id,
                session_id=job.session_id,
                trigger=job.trigger,
            )
    return finished


def _job_write(
    job: GenerationJob, *, batch: _Batch, facts: list[ExtractedFact], prepared: PreparedFacts
) -> tuple[GenerationJob, ConsolidationReport | None] | None:
    """The write phase under the user's lock; None when the watermark moved since the events
    were read (the caller reads and extracts again from the new watermark).

    Only database work happens under the lock: ``prepared`` carries the facts' vectors, made
    before, so no embedder call holds up the user's other jobs."""
    with transaction.atomic():
        user_settings = user_lock(job.user_id)
        job.refresh_from_db(fields=["status"])
        if job.status in TERMINAL_STATUSES:
            return job, None
        if not user_settings.create_enabled:
            reason = "skipped: memory creation was turned off"
            return job_finish(job, status=GenerationJob.Status.SKIPPED, error=reason), None
        current = selectors.watermark_get(session_id=job.session_id)
        if current >= batch.upto:
            reason = "skipped: these events were already processed"
            return job_finish(job, status=GenerationJob.Status.SKIPPED, error=reason), None
        if current != batch.after:
            return None
        report = memories_consolidate(
            user_pk=job.user_id,
            app_name=job.app_name,
            session_id=job.session_id,
            facts=facts,
            prepared=prepared,
            job_id=job.id,
        )
        MemoryWatermark.objects.update_or_create(
            session_id=job.session_id, defaults={"last_sequence": batch.upto}
        )
        finished = job_finish(
            job,
            status=GenerationJob.Status.SUCCEEDED,
            first_sequence=batch.after + 1,
            last_sequence=batch.upto,
        )
    return finished, report


def memory_job_retry_note(*, job_id: str, error: Exception) -> None:
    """A transient failure that will be retried: back to queued, with the error kept."""
    GenerationJob.objects.filter(pk=job_id).exclude(status__in=TERMINAL_STATUSES).update(
        status=GenerationJob.Status.QUEUED, error=f"{type(error).__name__}: {error}"
    )


def memory_job_fail(*, job_id: str, error: Exception, dead: bool) -> None:
    """Give up on a job: ``dead`` after the last retry of a transient error, else ``failed``."""
    GenerationJob.objects.filter(pk=job_id).exclude(status__in=TERMINAL_STATUSES).update(
        status=GenerationJob.Status.DEAD if dead else GenerationJob.Status.FAILED,
        error=f"{type(error).__name__}: {error}",
        finished_at=timezone.now(),
    )
    _session_next_dispatch(
        GenerationJob.objects.filter(pk=job_id).values_list("session_id", flat=True).first()
    )


def _jobs_stuck_release(*, now: datetime) -> int:
    """Release the jobs ``running`` for longer than ``MEMORY_JOB_STUCK_AFTER_SECONDS``: their
    process died mid-job (the in-process pool, or a worker killed without the broker
    redelivering), so nothing would ever finish them. Each goes back to ``queued`` with its
    attempts kept and "worker lost" as its error, and is sent again; a job that already used
    ``MEMORY_JOB_MAX_RETRIES`` + 1 attempts is ``dead`` instead. A ``tool`` job (facts stored
    directly) is ``failed``: its facts were only in the lost process, so there is nothing to
    run again. Returns how many were sent.

    A job is released only if it is still in the run that was seen (same ``started_at``), so a
    job that started again meanwhile is left alone. Should the old run be alive after all, the
    two runs are still safe: the user's lock serialises their writes and the watermark lets
    only one of them store the events.
    """
    stuck_after = settings.MEMORY_JOB_STUCK_AFTER_SECONDS
    stuck = GenerationJob.objects.filter(
        status=GenerationJob.Status.RUNNING, started_at__lt=now - timedelta(seconds=stuck_after)
    )
    sent = 0
    for job in stuck.order_by("started_at")[: settings.MEMORY_IDLE_SCAN_BATCH_SIZE]:
        same_run = GenerationJob.objects.filter(
            pk=job.pk, status=GenerationJob.Status.RUNNING, started_at=job.started_at
        )
        error = f"worker lost: attempt {job.attempts} still running after {stuck_after} s"
        if job.trigger == GenerationJob.Trigger.TOOL:
            if same_run.update(status=GenerationJob.Status.FAILED, error=error, finished_at=now):
                logger.warning("memory job %s failed: %s", job.id, error)
        elif job.attempts > settings.MEMORY_JOB_MAX_RETRIES:
            if same_run.update(status=GenerationJob.Status.DEAD, error=error, finished_at=now):
                logger.warning("memory job %s dead: %s", job.id, error)
        elif same_run.update(status=GenerationJob.Status.QUEUED, error=error):
            _job_enqueue(job)
            sent += 1
    return sent


def memory_jobs_redispatch(*, now: datetime | None = None) -> int:
    """Send again the jobs whose enqueue or whose worker was lost; returns how many were sent.

    Jobs stuck ``running`` are released first (see :func:`_jobs_stuck_release`). Then the jobs
    queued longer than ``MEMORY_JOB_REDISPATCH_AFTER_SECONDS`` with no dispatch in that time
    (an enqueue lost with a crashed process) are enqueued again.

    Sending a job twice is harmless: a finished job is not run again, and the watermark keeps
    two runs from storing the same events twice. So is running this twice: a job just sent is
    not sent again before ``MEMORY_JOB_REDISPATCH_AFTER_SECONDS``.
    """
    now = now or timezone.now()
    count = _jobs_stuck_release(now=now)
    cutoff = now - timedelta(seconds=settings.MEMORY_JOB_REDISPATCH_AFTER_SECONDS)
    stale = GenerationJob.objects.filter(status=GenerationJob.Status.QUEUED, created_at__lt=cutoff)
    for job in stale.order_by("created_at")[: settings.MEMORY_IDLE_SCAN_BATCH_SIZE]:
        if cache.get(DISPATCHED_KEY.format(job_id=job.id)) is None:
            _job_enqueue(job)
            count += 1
    return count
