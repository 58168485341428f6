"""Writes of long-term memory: generation jobs, settings, memories added or deleted by hand, and
what a deleted session takes with it.

Generation never runs on a turn's hot path: a trigger creates a ``GenerationJob`` and enqueues
it after commit; a worker runs it with :func:`memory_job_run`. The model call (extraction)
happens outside any lock; the write phase then takes the user's lock (a row lock on their
``MemorySettings`` row), re-checks the user's choice and the session's watermark, and stores
the consolidation results and the new watermark in one transaction. So jobs of one user never
interleave their writes, each event is processed once, and a job run twice changes nothing the
second time.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from chatapp.background import task_enqueue
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
    Memory,
    MemoryRevision,
    MemorySettings,
    MemorySource,
    MemoryStatus,
    MemoryWatermark,
    SourceType,
)
from memory_app.topics import EXPLICIT_INSTRUCTIONS, topics_for_app
from sessions_app import selectors as session_selectors
from sessions_app.models import SessionRecord
from sessions_app.notices import user_notice_send

logger = logging.getLogger(__name__)

REMEMBER_REQUEST = re.compile(r"\b(remember|don'?t forget|do not forget)\b", re.IGNORECASE)
TERMINAL_STATUSES = (
    GenerationJob.Status.SUCCEEDED,
    GenerationJob.Status.SKIPPED,
    GenerationJob.Status.FAILED,
    GenerationJob.Status.DEAD,
)
DISPATCHED_KEY = "memory-job-dispatched:{job_id}"
NOTICE_TEXT_CHARS = 200


# --- Cache invalidation -------------------------------------------------------------------


def memory_index_invalidate(*, app_name: str, user_pk: int | None) -> None:
    """Make every process rebuild its search index of this user (or, for None, of the app).

    The version token is replaced now, so this process and this transaction see the change,
    and again after commit, so no process caches an index built from rows not yet committed.
    """
    if user_pk is None:
        key = selectors.APP_VERSION_KEY.format(app_name=app_name)
    else:
        key = selectors.USER_VERSION_KEY.format(app_name=app_name, user_pk=user_pk)

    def replace() -> None:
        cache.set(key, uuid.uuid4().hex, timeout=None)

    replace()
    transaction.on_commit(replace)


# --- Settings -------------------------------------------------------------------------------


def memory_settings_update(
    *, user_pk: int, create_enabled: bool | None = None, use_enabled: bool | None = None
) -> MemorySettings:
    """Record the user's choices; a job already queued checks ``create_enabled`` again when it
    runs, so turning creation off stops pending work too."""
    with transaction.atomic():
        row, _ = MemorySettings.objects.select_for_update().get_or_create(user_id=user_pk)
        if create_enabled is not None:
            row.create_enabled = create_enabled
        if use_enabled is not None:
            row.use_enabled = use_enabled
        row.save()
    return row


def _user_lock(user_pk: int) -> MemorySettings:
    """Take the user's memory lock for the rest of the transaction and return their settings.

    On PostgreSQL a ``SELECT ... FOR UPDATE`` of the user's settings row (created if missing);
    on SQLite every write transaction already holds the database's write lock.
    """
    MemorySettings.objects.get_or_create(user_id=user_pk)
    return MemorySettings.objects.select_for_update().get(user_id=user_pk)


# --- Notices ----------------------------------------------------------------------------------


def _notice_text(prefix: str, memories: list[Memory]) -> str:
    text = prefix + "; ".join(memory.text for memory in memories)
    return text if len(text) <= NOTICE_TEXT_CHARS else text[: NOTICE_TEXT_CHARS - 1] + "…"


def memory_notices_send(*, user_pk: int, report: ConsolidationReport) -> None:
    """Tell the user's open chat pages what was remembered or updated (nothing if neither).

    Called after the transaction committed, from whichever process ran the job: the channel
    layer carries it to the sockets.
    """
    for prefix, touched in (("Remembered: ", report.created), ("Updated: ", report.updated)):
        memories = list({memory.pk: memory for memory in touched}.values())
        if memories:
            notice = {
                "kind": "memory",
                "message": _notice_text(prefix, memories),
                "memory_ids": [str(memory.id) for memory in memories],
            }
            async_to_sync(user_notice_send)(user_pk=user_pk, notice=notice)


# --- Triggers -----------------------------------------------------------------------------------


def _job_enqueue(job: GenerationJob) -> None:
    from memory_app.tasks import memory_job_run as memory_job_run_task

    cache.set(
        DISPATCHED_KEY.format(job_id=job.id),
        1,
        timeout=settings.MEMORY_JOB_REDISPATCH_AFTER_SECONDS,
    )
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


def _turn_trigger(
    *, app_name: str, session_id: str, invocation_id: str
) -> GenerationJob.Trigger | None:
    config = selectors.trigger_config_get(app_name=app_name)
    if config.explicit:
        user_event = selectors.session_user_event_get(
            session_id=session_id, invocation_id=invocation_id
        )
        if user_event is not None and REMEMBER_REQUEST.search(selectors.event_text(user_event)):
            return GenerationJob.Trigger.EXPLICIT
    if config.every_turn:
        return GenerationJob.Trigger.EVERY_TURN
    if config.every_n_turns > 0:
        processed = selectors.watermark_get(session_id=session_id)
        turns = selectors.user_turns_after(session_id=session_id, after_sequence=processed)
        if turns >= config.every_n_turns:
            return GenerationJob.Trigger.EVERY_N_TURNS
    return None


def memory_turn_completed(
    *, app_name: str, user_pk: int, session_id: str, invocation_id: str
) -> GenerationJob | None:
    """After a stored turn: queue a job if one of the app's turn triggers is due, else None.

    Explicit ("remember ..." in the user's message) comes first, then every turn, then every
    N user turns past the watermark. A few indexed reads; the job itself runs elsewhere.
    """
    trigger = _turn_trigger(app_name=app_name, session_id=session_id, invocation_id=invocation_id)
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


def memory_sessions_idle_enqueue(*, now: datetime | None = None) -> int:
    """Queue a job for each session idle past its app's ``session_idle_seconds`` that still has
    unprocessed events and no queued or running job; returns how many were queued.

    Temporary chats and users who turned creation off are left out in the query; a batch of
    ``MEMORY_IDLE_SCAN_BATCH_SIZE`` per run keeps each run short.
    """
    now_ts = (now or timezone.now()).timestamp()
    configs = {}
    idle_values = [settings.MEMORY_TRIGGER_SESSION_IDLE_SECONDS] + [
        entry.get("session_idle_seconds", 0) for entry in settings.MEMORY_TRIGGERS.values()
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
    """Mark the job running and count the attempt; None if it already finished."""
    with transaction.atomic():
        job = GenerationJob.objects.select_for_update().get(pk=job_id)
        if job.status in TERMINAL_STATUSES:
            return None
        job.status = GenerationJob.Status.RUNNING
        job.attempts += 1
        job.started_at = timezone.now()
        job.save(update_fields=["status", "attempts", "started_at"])
    return job


def _job_finish(
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
    return job


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


def memory_job_run(*, job_id: str) -> GenerationJob:
    """Run a job: extract facts from the session's unprocessed events, consolidate, store.

    Finishes the job as succeeded (with the event range it processed) or skipped (opted out,
    temporary or deleted session, nothing new, or another run got there first). Raises the
    extraction's ``ModelError`` for the task to retry; the job stays running until the task
    decides. Running a finished job again returns it unchanged.
    """
    job = _job_start(job_id)
    if job is None:
        return GenerationJob.objects.get(pk=job_id)
    reason = _skip_reason(job)
    if reason:
        return _job_finish(job, status=GenerationJob.Status.SKIPPED, error=reason)
    while True:
        batch = _batch_read(job.session_id)
        if batch.upto <= batch.after:
            return _job_finish(
                job, status=GenerationJob.Status.SKIPPED, error="skipped: no new events"
            )
        facts = (
            facts_extract(
                app_name=job.app_name,
                events=batch.events,
                topics=topics_for_app(app_name=job.app_name),
            )
            if batch.events
            else []
        )
        prepared = consolidation_prepare(app_name=job.app_name, facts=facts)
        outcome = _job_write(job, batch=batch, facts=facts, prepared=prepared)
        if outcome is not None:
            break
    finished, report = outcome
    if report is not None:
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
        user_settings = _user_lock(job.user_id)
        job.refresh_from_db(fields=["status"])
        if job.status in TERMINAL_STATUSES:
            return job, None
        if not user_settings.create_enabled:
            reason = "skipped: memory creation was turned off"
            return _job_finish(job, status=GenerationJob.Status.SKIPPED, error=reason), None
        current = selectors.watermark_get(session_id=job.session_id)
        if current >= batch.upto:
            reason = "skipped: these events were already processed"
            return _job_finish(job, status=GenerationJob.Status.SKIPPED, error=reason), None
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
        finished = _job_finish(
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


# --- Memories written directly -----------------------------------------------------------------


def _direct_job(*, app_name: str, user_pk: int, session_id: str | None) -> GenerationJob:
    return GenerationJob.objects.create(
        user_id=user_pk,
        app_name=app_name,
        session_id=session_id,
        trigger=GenerationJob.Trigger.TOOL,
        status=GenerationJob.Status.RUNNING,
        attempts=1,
        started_at=timezone.now(),
    )


def memory_facts_store(
    *,
    app_name: str,
    user_pk: int,
    session_id: str | None,
    facts: list[ExtractedFact],
    sequences: tuple[int, int] | None = None,
    actor_user_pk: int | None = None,
) -> ConsolidationReport:
    """Store facts given directly (the ``create_memory`` tool, ``MemoryService.add_memory``)
    through consolidation, under the user's lock, as a ``tool``-trigger job; notices after.
    The facts are embedded before the lock is taken."""
    prepared = consolidation_prepare(app_name=app_name, facts=facts)
    job = _direct_job(app_name=app_name, user_pk=user_pk, session_id=session_id)
    with transaction.atomic():
        _user_lock(user_pk)
        report = memories_consolidate(
            user_pk=user_pk,
            app_name=app_name,
            session_id=session_id,
            facts=facts,
            prepared=prepared,
            job_id=job.id,
            actor_user_pk=actor_user_pk,
        )
        first, last = sequences or (None, None)
        _job_finish(
            job,
            status=GenerationJob.Status.SUCCEEDED,
            first_sequence=first,
            last_sequence=last,
        )
    memory_index_invalidate(app_name=app_name, user_pk=user_pk)
    transaction.on_commit(lambda: memory_notices_send(user_pk=user_pk, report=report))
    return report


def memory_create_explicit(
    *, app_name: str, user_pk: int, session_id: str, invocation_id: str, text: str
) -> ConsolidationReport | None:
    """What the agent's ``create_memory`` tool stores: ``text`` as an explicit user statement,
    sourced from the user message of this invocation. None when creation is not allowed."""
    if not selectors.session_memory_access(user_pk=user_pk, session_id=session_id).create:
        return None
    user_event = selectors.session_user_event_get(
        session_id=session_id, invocation_id=invocation_id
    )
    fact = ExtractedFact(
        text=text,
        topic=EXPLICIT_INSTRUCTIONS,
        source_type=SourceType.EXPLICIT,
        confidence=0.9,
        importance=0.7,
        event_ids=[user_event.event_id] if user_event else [],
    )
    sequence = (user_event.sequence, user_event.sequence) if user_event else None
    return memory_facts_store(
        app_name=app_name,
        user_pk=user_pk,
        session_id=session_id,
        facts=[fact],
        sequences=sequence,
    )


def memory_delete(
    *, app_name: str, user_pk: int, memory_id: str, actor_user_pk: int | None = None
) -> bool:
    """Delete the user's memory with its sources and revisions; False if they have none such.

    A deletion the user asks for removes the text everywhere, history included: keeping it in a
    revision would defeat the point.
    """
    memory = selectors.memory_get(app_name=app_name, user_pk=user_pk, memory_id=memory_id)
    if memory is None:
        return False
    memory.delete()
    logger.info("memory %s of user %s deleted by %s", memory_id, user_pk, actor_user_pk or user_pk)
    memory_index_invalidate(app_name=app_name, user_pk=user_pk)
    return True


# --- Forgetting ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ForgetReport:
    """What one forgetting run did: memories deleted (expired), decayed and pruned."""

    expired: int
    decayed: int
    pruned: int


def memories_forget(*, now: datetime | None = None) -> ForgetReport:
    """Delete expired memories, decay the confidence of unused implicit and tool memories, and
    invalidate (with a revision) stale ones whose confidence fell below the threshold.

    "Unused" means not created or updated for ``MEMORY_DECAY_AFTER_DAYS``: a fact heard again
    is updated by consolidation, which resets the clock. Each run multiplies confidence by
    ``MEMORY_DECAY_FACTOR``, so the schedule's interval sets the pace. Explicit and bootstrapped
    memories do not decay: the user said them on purpose.
    """
    now = now or timezone.now()
    touched: set[tuple[str, int | None]] = set()
    with transaction.atomic():
        expired_rows = Memory.objects.filter(expires_at__lte=now)
        touched.update(expired_rows.values_list("app_name", "user_id"))
        expired = expired_rows.delete()[1].get(Memory._meta.label, 0)
        decayed = Memory.objects.filter(
            status=MemoryStatus.ACTIVE,
            source_type__in=[SourceType.IMPLICIT, SourceType.TOOL],
            updated_at__lt=now - timedelta(days=settings.MEMORY_DECAY_AFTER_DAYS),
        ).update(confidence=F("confidence") * settings.MEMORY_DECAY_FACTOR)
        stale = list(
            Memory.objects.select_for_update().filter(
                status=MemoryStatus.ACTIVE,
                confidence__lt=settings.MEMORY_PRUNE_BELOW_CONFIDENCE,
                updated_at__lt=now - timedelta(days=settings.MEMORY_PRUNE_AFTER_DAYS),
            )
        )
        MemoryRevision.objects.bulk_create(
            MemoryRevision(
                memory=memory,
                action=MemoryRevision.Action.INVALIDATED,
                before={"status": memory.status, "confidence": memory.confidence},
                after={"status": MemoryStatus.INVALIDATED},
                reason=(
                    f"Pruned: unused since {memory.updated_at:%Y-%m-%d}, confidence "
                    f"{memory.confidence:.2f} below {settings.MEMORY_PRUNE_BELOW_CONFIDENCE}."
                ),
            )
            for memory in stale
        )
        Memory.objects.filter(pk__in=[memory.pk for memory in stale]).update(
            status=MemoryStatus.INVALIDATED
        )
        touched.update((memory.app_name, memory.user_id) for memory in stale)
    for app_name, user_pk in touched:
        memory_index_invalidate(app_name=app_name, user_pk=user_pk)
    return ForgetReport(expired=expired, decayed=decayed, pruned=len(stale))


# --- Session deletion ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionReleaseReport:
    """Memories a deleted session took with it, and those revised because sources remain."""

    deleted: list[str]
    revised: list[str]


def _source_list(sources) -> list[dict[str, str]]:
    return [{"session_id": s.event.session_id, "event_id": s.event.event_id} for s in sources]


def session_memories_release(*, session_id: str) -> SessionReleaseReport:
    """Before a session's events go: delete the memories whose only sources were in it, and for
    those that keep sources elsewhere drop this session's sources with a ``sources_changed``
    revision saying why. Session-scope memories of the session go too.

    Must run in the deleting transaction, before the events are deleted: source links cascade
    with the events, and afterwards no one could tell which memories relied on them alone.
    """
    elsewhere = MemorySource.objects.filter(memory_id=OuterRef("pk")).exclude(
        event__session_id=session_id
    )
    affected = list(
        Memory.objects.filter(Q(sources__event__session_id=session_id) | Q(session_id=session_id))
        .distinct()
        .annotate(kept=Exists(elsewhere))
        .prefetch_related("sources__event")
    )
    deleted = [m for m in affected if not m.kept or m.session_id == session_id]
    revised = [m for m in affected if m not in deleted]
    reason = f"Session {session_id} was deleted; its events no longer support this memory."
    MemoryRevision.objects.bulk_create(
        MemoryRevision(
            memory=memory,
            action=MemoryRevision.Action.SOURCES_CHANGED,
            before={"sources": _source_list(memory.sources.all())},
            after={
                "sources": _source_list(
                    s for s in memory.sources.all() if s.event.session_id != session_id
                )
            },
            reason=reason,
        )
        for memory in revised
    )
    MemorySource.objects.filter(
        memory__in=[m.pk for m in revised], event__session_id=session_id
    ).delete()
    Memory.objects.filter(pk__in=[m.pk for m in deleted]).delete()
    for app_name, user_pk in {(m.app_name, m.user_id) for m in affected}:
        memory_index_invalidate(app_name=app_name, user_pk=user_pk)
    return SessionReleaseReport(
        deleted=[str(m.pk) for m in deleted], revised=[str(m.pk) for m in revised]
    )
