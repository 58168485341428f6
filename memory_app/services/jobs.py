"""Generation jobs: their requests, and the run that turns a session's new events into
memories. What requests them (a turn, a session's end, a departure, idleness) is
``memory_app.services.triggers``."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
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
from memory_app.extraction.context import extraction_context_read
from memory_app.models import (
    GenerationJob,
    MemoryWatermark,
)
from memory_app.services.job_heartbeats import (
    job_heartbeat,
    job_heartbeat_expiry_seconds,
    jobs_beating,
)
from memory_app.services.releases import session_rewound_memories_release
from memory_app.services.users import memory_index_invalidate, memory_notices_send, user_lock
from memory_app.topics import topics_for_app
from sessions_app import selectors as session_selectors
from sessions_app.models import BackgroundModelCall, EventRecord, SessionRecord
from sessions_app.services.model_calls import background_calls_kept

logger = logging.getLogger(__name__)


TERMINAL_STATUSES = (
    GenerationJob.Status.SUCCEEDED,
    GenerationJob.Status.SKIPPED,
    GenerationJob.Status.FAILED,
    GenerationJob.Status.DEAD,
)
DISPATCHED_KEY = "memory-job-dispatched:{job_id}"


# --- Requests -----------------------------------------------------------------------------------


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
        job.retry_at = None
        job.save(update_fields=["status", "attempts", "started_at", "retry_at"])
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
    job.retry_at = None
    job.save(
        update_fields=[
            "status",
            "error",
            "first_sequence",
            "last_sequence",
            "finished_at",
            "retry_at",
        ]
    )
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
    """Events read for one attempt: those after ``after`` up to ``upto``, rewound ones and
    those said while memory creation was off or in a temporary chat left out (the watermark
    passes them all the same, so no later job reads them)."""

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
        session_key=session_id,
        after_sequence=after,
        page_size=settings.MEMORY_JOB_MAX_EVENTS,
        for_memory=True,
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
    decides. Running a finished job again returns it unchanged. While it runs, the job's
    heartbeat is alive (``job_heartbeats``), and its model calls are kept for its app's usage.
    """
    job = _job_start(job_id)
    if job is None:
        return GenerationJob.objects.get(pk=job_id)  # finished, or waiting for its session
    with (
        job_heartbeat(job_id=job.id),
        background_calls_kept(app_name=job.app_name, purpose=BackgroundModelCall.Purpose.MEMORY),
    ):
        return _job_run_started(job)


def _job_run_started(job: GenerationJob) -> GenerationJob:
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
                context=extraction_context_read(
                    app_name=job.app_name,
                    user_pk=job.user_id,
                    session_id=job.session_id,
                    events=batch.events,
                    after_sequence=batch.after,
                ),
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


def memory_job_retries_left(*, job_id: str) -> bool:
    """Whether a job that failed transiently is still young enough to be tried again: dead
    only after ``MEMORY_JOB_RETRY_FOR_SECONDS`` of trying, so that a model server down for
    an hour, or a night, loses nothing."""
    since = timezone.now() - timedelta(seconds=settings.MEMORY_JOB_RETRY_FOR_SECONDS)
    return GenerationJob.objects.filter(pk=job_id, created_at__gt=since).exists()


def memory_job_retry_note(*, job_id: str, error: Exception, wait: float) -> bool:
    """A transient failure that will be retried in ``wait`` seconds: back to queued, with the
    error kept (the chat's pending panel and the staff console show it), and marked as
    dispatched for the wait, so that the periodic redispatch does not send it sooner. Returns
    whether the task waits for it itself; a wait longer than a task may wait in the broker
    (``TASK_VISIBILITY_TIMEOUT_SECONDS``) is left to the redispatch, which sends the job once
    the mark expires."""
    GenerationJob.objects.filter(pk=job_id).exclude(status__in=TERMINAL_STATUSES).update(
        status=GenerationJob.Status.QUEUED,
        error=f"{type(error).__name__}: {error}",
        retry_at=timezone.now() + timedelta(seconds=wait),
    )
    by_task = wait <= settings.TASK_VISIBILITY_TIMEOUT_SECONDS
    mark = max(wait, settings.MEMORY_JOB_REDISPATCH_AFTER_SECONDS) if by_task else wait
    try:
        cache.set(DISPATCHED_KEY.format(job_id=job_id), 1, timeout=max(1, int(mark)))
    except REDIS_ERRORS as error:
        logger.warning("memory job %s not marked as waiting, no cache: %s", job_id, error)
    return by_task


def memory_jobs_waiting_wake(*, app_name: str) -> int:
    """Send now the app's jobs waiting for a retry after a transient failure: a job of the app
    just succeeded, so its model server is back, and they need not wait out their backoff (up
    to an hour). Returns how many were sent. A job sent twice is harmless (see
    :func:`memory_jobs_redispatch`)."""
    waiting = GenerationJob.objects.filter(
        app_name=app_name, status=GenerationJob.Status.QUEUED, attempts__gt=0
    ).exclude(error="")
    jobs = list(waiting.order_by("created_at")[: settings.MEMORY_IDLE_SCAN_BATCH_SIZE])
    GenerationJob.objects.filter(pk__in=[job.pk for job in jobs]).update(retry_at=timezone.now())
    for job in jobs:
        logger.info("memory job %s: the model server answers again, sent now", job.id)
        _job_enqueue(job)
    return len(jobs)


def memory_job_fail(*, job_id: str, error: Exception, dead: bool) -> None:
    """Give up on a job: ``dead`` after the last retry of a transient error, else ``failed``."""
    GenerationJob.objects.filter(pk=job_id).exclude(status__in=TERMINAL_STATUSES).update(
        status=GenerationJob.Status.DEAD if dead else GenerationJob.Status.FAILED,
        error=f"{type(error).__name__}: {error}",
        finished_at=timezone.now(),
        retry_at=None,
    )
    _session_next_dispatch(
        GenerationJob.objects.filter(pk=job_id).values_list("session_id", flat=True).first()
    )


def _jobs_stuck_release(*, now: datetime) -> int:
    """Release the jobs whose run died: ``running`` with no heartbeat for
    ``job_heartbeat_expiry_seconds`` (a worker killed mid-job), or, whatever their heartbeat,
    for longer than ``MEMORY_JOB_STUCK_AFTER_SECONDS`` (the cache unreadable, a ``tool`` job,
    which runs in the request without a heartbeat). Nothing would ever finish them. Each goes
    back to ``queued`` with its attempts kept and "worker lost" as its error, and is sent
    again; a job tried for longer than ``MEMORY_JOB_RETRY_FOR_SECONDS`` is ``dead`` instead.
    A ``tool`` job (facts stored directly) is ``failed``: its facts were only in the lost
    process, so there is nothing to run again. Returns how many were sent.

    A job is released only if it is still in the run that was seen (same ``started_at``), so a
    job that started again meanwhile is left alone. Should the old run be alive after all, the
    two runs are still safe: the user's lock serialises their writes and the watermark lets
    only one of them store the events.
    """
    stuck_after = settings.MEMORY_JOB_STUCK_AFTER_SECONDS
    silent_after = job_heartbeat_expiry_seconds()
    overdue_before = now - timedelta(seconds=stuck_after)
    candidates = list(
        GenerationJob.objects.filter(
            status=GenerationJob.Status.RUNNING,
            started_at__lt=now - timedelta(seconds=min(stuck_after, silent_after)),
        ).order_by("started_at")[: settings.MEMORY_IDLE_SCAN_BATCH_SIZE]
    )
    beating = jobs_beating(
        job_ids=[job.id for job in candidates if job.trigger != GenerationJob.Trigger.TOOL]
    )
    sent = 0
    for job in candidates:
        silent = (
            job.trigger != GenerationJob.Trigger.TOOL
            and beating is not None
            and str(job.id) not in beating
        )
        if job.started_at >= overdue_before and not silent:
            continue
        same_run = GenerationJob.objects.filter(
            pk=job.pk, status=GenerationJob.Status.RUNNING, started_at=job.started_at
        )
        lost = f"no heartbeat for {silent_after:g} s" if silent else f"after {stuck_after} s"
        error = f"worker lost: attempt {job.attempts} still running, {lost}"
        if job.trigger == GenerationJob.Trigger.TOOL:
            if same_run.update(status=GenerationJob.Status.FAILED, error=error, finished_at=now):
                logger.warning("memory job %s failed: %s", job.id, error)
        elif job.created_at < now - timedelta(seconds=settings.MEMORY_JOB_RETRY_FOR_SECONDS):
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
