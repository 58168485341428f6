"""Periodic work of the session store, run by Celery beat or the in-process runner."""

import random

from celery import shared_task

from sessions_app import services


@shared_task(name="sessions_app.tasks.sessions_expire_idle")
def sessions_expire_idle() -> int:
    """Delete sessions idle past ``SESSION_IDLE_TTL_SECONDS``; return how many went.

    Safe to run twice or concurrently: it only deletes what is idle at the
    time it runs, so a second run finds nothing left to do.
    """
    return services.sessions_expire_idle()


@shared_task(
    name="sessions_app.tasks.session_compact",
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
    from sessions_app.runtime.compaction import session_compact as compact
    from sessions_app.runtime.llm import ModelError

    try:
        event = compact(app_name=app_name, user_id=user_id, session_id=session_id)
    except ModelError as error:
        if not error.transient:
            raise
        countdown = random.uniform(0, min(300, 2 ** (self.request.retries + 1)))
        raise self.retry(exc=error, countdown=countdown) from error
    return event.id if event else None
