"""Periodic work of the session store, run by Celery beat or the in-process runner."""

from celery import shared_task

from sessions_app import services


@shared_task(name="sessions_app.tasks.sessions_expire_idle")
def sessions_expire_idle() -> int:
    """Delete sessions idle past ``SESSION_IDLE_TTL_SECONDS``; return how many went.

    Safe to run twice or concurrently: it only deletes what is idle at the
    time it runs, so a second run finds nothing left to do.
    """
    return services.sessions_expire_idle()


@shared_task(name="sessions_app.tasks.artifact_files_orphaned_delete")
def artifact_files_orphaned_delete() -> int:
    """Delete stored files no artifact names, a day after they were written (see
    ``services.artifact_files_orphaned_delete``); safe to run twice or concurrently."""
    return services.artifact_files_orphaned_delete()


@shared_task(name="sessions_app.tasks.sessions_temporary_expire")
def sessions_temporary_expire() -> int:
    """Delete temporary chats older than ``TEMPORARY_CHAT_RETENTION_DAYS``; return how many
    went. Safe to run twice or concurrently."""
    return services.sessions_temporary_expire()
