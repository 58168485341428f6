"""Background work of long-term memory, run by Celery workers or the in-process pool.

Tasks take ids and call ``memory_app.services``; the only logic here is Celery's: when a
transient model error is retried (exponential backoff, full jitter) and when a job is dead.
"""

import logging
import random

from celery import shared_task
from django.conf import settings

from core.background import task_retry
from core.llm import ModelError
from memory_app import services
from memory_app.embedding import embedder_get
from memory_app.models import EmbeddingWarning
from memory_app.services.embedding_warnings import (
    embedding_warning_record,
    embedding_warnings_resolve,
)

logger = logging.getLogger(__name__)


@shared_task(
    name="memory_app.tasks.memory_job_run",
    bind=True,
    acks_late=True,
    max_retries=None,
)
def memory_job_run(self, *, job_id: str) -> str:
    """Run a generation job; returns its final status (or ``queued`` while a retry waits).

    Idempotent (see ``services.memory_job_run``), so a redelivery after a worker crash is safe.
    A transient ModelError (the model server down, busy, timing out) is retried with
    exponential backoff and full jitter up to ``MEMORY_JOB_RETRY_MAX_SECONDS`` (an hour) for
    as long as the job is younger than ``MEMORY_JOB_RETRY_FOR_SECONDS`` (a day), then the job
    is ``dead`` with the error kept; any other error makes it ``failed`` at once. A wait longer
    than a task may wait in the broker is left to the periodic redispatch
    (``services.memory_job_retry_note``).
    """
    try:
        job = services.memory_job_run(job_id=job_id)
    except ModelError as error:
        if error.transient and services.memory_job_retries_left(job_id=job_id):
            ceiling = settings.MEMORY_JOB_RETRY_BASE_SECONDS * 2 ** min(self.request.retries, 30)
            countdown = random.uniform(0, min(settings.MEMORY_JOB_RETRY_MAX_SECONDS, ceiling))
            by_task = services.memory_job_retry_note(job_id=job_id, error=error, wait=countdown)
            if not by_task:
                logger.info(
                    "memory job %s: %s; retry in %.2fs by redispatch", job_id, error, countdown
                )
                return "queued"
            raise task_retry(self, exc=error, countdown=countdown) from error
        services.memory_job_fail(job_id=job_id, error=error, dead=error.transient)
        return "dead" if error.transient else "failed"
    except Exception as error:
        logger.exception("memory job %s failed", job_id)
        services.memory_job_fail(job_id=job_id, error=error, dead=False)
        return "failed"
    if job.status == "succeeded":
        services.memory_jobs_waiting_wake(app_name=job.app_name)
    return job.status


@shared_task(name="memory_app.tasks.memory_sessions_idle_enqueue")
def memory_sessions_idle_enqueue() -> int:
    """Queue jobs for sessions idle past their app's threshold; returns how many."""
    return services.memory_sessions_idle_enqueue()


@shared_task(name="memory_app.tasks.memory_sessions_left_enqueue")
def memory_sessions_left_enqueue() -> int:
    """Queue jobs for sessions the user left longer ago than their quiet period; returns how
    many."""
    return services.memory_sessions_left_enqueue()


@shared_task(name="memory_app.tasks.memory_jobs_redispatch")
def memory_jobs_redispatch() -> int:
    """Send again the jobs whose enqueue was lost and release those whose worker was lost
    (sent again, or finished as dead or failed); returns how many were sent."""
    return services.memory_jobs_redispatch()


@shared_task(name="memory_app.tasks.memories_forget")
def memories_forget() -> dict[str, int]:
    """Expire, decay and prune memories; returns the counts."""
    report = services.memories_forget()
    return {"expired": report.expired, "decayed": report.decayed, "pruned": report.pruned}


@shared_task(name="memory_app.tasks.session_rewound_memories_release", acks_late=True)
def session_rewound_memories_release(*, session_id: str) -> dict[str, int]:
    """Revise the memories of the session's rewound turns; returns how many were deleted and
    revised. Idempotent: a second run finds nothing left to revise."""
    report = services.session_rewound_memories_release(session_id=session_id)
    return {"deleted": len(report.deleted), "revised": len(report.revised)}


@shared_task(name="memory_app.tasks.rewind_releases_sweep")
def rewind_releases_sweep() -> int:
    """Revise the memories of rewinds whose revision task was lost; returns how many sessions
    were revised."""
    return services.rewind_releases_sweep()


# What an embedder's call raises when the service is away or busy a moment: retried.
_TRANSIENT_EMBEDDING_ERRORS = (ConnectionError, TimeoutError, OSError)


def _embedding_error_transient(error: Exception) -> bool:
    if isinstance(error, ModelError):
        return error.transient
    return isinstance(error, _TRANSIENT_EMBEDDING_ERRORS)


@shared_task(
    name="memory_app.tasks.embeddings_compute", bind=True, acks_late=True, max_retries=None
)
def embeddings_compute(
    self, *, memory_ids: list[str] | None = None, session_key: str | None = None
) -> dict[str, int] | str:
    """Embed these memories and the chat's user turns that have no vector yet; returns how
    many of each were stored, or ``failed``.

    Idempotent (see ``services.embeddings_compute``). A transient error of the embedder is
    retried ``MEMORY_TASK_MAX_RETRIES`` times with exponential backoff and full jitter;
    then, or at once for any other error, the task ends as an ``EmbeddingFailure`` row staff
    see in the console, and the items stay searchable by their words.
    """
    memory_ids = memory_ids or []
    try:
        report = services.embeddings_compute(memory_ids=memory_ids, session_key=session_key)
    except Exception as error:
        embedding_warning_record(
            kind=_embedding_warning_kind(error),
            embedder=embedder_get().name,
            error=f"{type(error).__name__}: {error}",
        )
        retries = self.request.retries
        if _embedding_error_transient(error) and retries < settings.MEMORY_TASK_MAX_RETRIES:
            ceiling = settings.MEMORY_JOB_RETRY_BASE_SECONDS * 2**retries
            countdown = random.uniform(0, min(settings.MEMORY_JOB_RETRY_MAX_SECONDS, ceiling))
            raise self.retry(exc=error, countdown=countdown) from error
        logger.exception(
            "embedding of %s memories and chat %s failed", len(memory_ids), session_key
        )
        services.embedding_failure_record(
            memory_ids=memory_ids, session_key=session_key, attempts=retries + 1, error=error
        )
        return "failed"
    if report.memories or report.turns:
        embedding_warnings_resolve(embedder=embedder_get().name)
    return {"memories": report.memories, "turns": report.turns}


def _embedding_warning_kind(error: Exception) -> str:
    """Which warning an embedding task's error is: vectors of the wrong shape (no vector a
    text, or vectors of several widths: numpy's ValueError), else a failure."""
    invalid = isinstance(error, ModelError) and error.code == "model_invalid_output"
    if invalid or isinstance(error, ValueError):
        return EmbeddingWarning.Kind.WRONG_SHAPE
    return EmbeddingWarning.Kind.FAILED


@shared_task(name="memory_app.tasks.embeddings_sweep")
def embeddings_sweep() -> dict[str, int]:
    """Embed what has no vector of the current embedder yet: turns stored by doors that ask
    for no task, and anything a lost or failed task left; returns the counts stored."""
    report = services.embeddings_missing_fill()
    return {"memories": report.memories, "turns": report.turns}


@shared_task(name="memory_app.tasks.memory_rederive", bind=True, acks_late=True, max_retries=None)
def memory_rederive(self, *, memory_id: str) -> str:
    """Derive a memory again from the sources it keeps; returns what happened (see
    ``services.memory_rederive``). Idempotent. A transient ModelError is retried with backoff up
    to ``MEMORY_TASK_MAX_RETRIES`` times; then, or on any other error, the request keeps the
    error (``failed``) and waits for a new one."""
    try:
        return services.memory_rederive(memory_id=memory_id)
    except ModelError as error:
        retries = self.request.retries
        if error.transient and retries < settings.MEMORY_TASK_MAX_RETRIES:
            ceiling = settings.MEMORY_JOB_RETRY_BASE_SECONDS * 2**retries
            countdown = random.uniform(0, min(settings.MEMORY_JOB_RETRY_MAX_SECONDS, ceiling))
            raise self.retry(exc=error, countdown=countdown) from error
        services.memory_rederive_fail(memory_id=memory_id, error=error)
        return "failed"
    except Exception as error:
        logger.exception("deriving memory %s again failed", memory_id)
        services.memory_rederive_fail(memory_id=memory_id, error=error)
        return "failed"


@shared_task(name="memory_app.tasks.memory_rederivations_sweep")
def memory_rederivations_sweep() -> int:
    """Send again the derivations whose task was lost; returns how many were sent."""
    return services.memory_rederivations_sweep()
