"""Background work of the agents: compaction of a session's old invocations, and the sweep
that ends turns whose process died."""

import random

from celery import shared_task

from agents_app.chat.turn_sweep import turns_sweep as sweep
from agents_app.runtime.compaction import session_compact as compact
from core.background import task_retry
from core.llm import ModelError


@shared_task(
    name="agents_app.tasks.session_compact",
    bind=True,
    acks_late=True,
    max_retries=5,
)
def session_compact(self, *, app_name: str, user_id: str, session_id: str) -> str | None:
    """Summarise a session's old invocations; returns the compaction event id, if one was made.

    Idempotent: a second run finds nothing due. Transient model errors are
    retried with exponential backoff and jitter; the last failure is raised,
    leaving the task failed in Celery's records and the log.
    """
    try:
        event = compact(app_name=app_name, user_id=user_id, session_id=session_id)
    except ModelError as error:
        if not error.transient:
            raise
        countdown = random.uniform(0, min(300, 2 ** (self.request.retries + 1)))
        raise task_retry(self, exc=error, countdown=countdown) from error
    return event.id if event else None


@shared_task(name="agents_app.tasks.turns_sweep")
def turns_sweep() -> dict:
    """End the turns whose process died (see ``agents_app.chat.turn_claims``); returns what it did.

    Idempotent and safe beside another sweep or a client resuming the same turn.
    """
    report = sweep()
    return {
        "released": report.released,
        "interrupted": report.interrupted,
        "waiting": report.waiting,
        "blocked": report.blocked,
    }
