"""The Celery application: broker and schedules come from Django settings (CELERY_*)."""

import os

from celery import Celery
from celery.signals import (
    task_postrun,
    task_prerun,
    worker_process_init,
    worker_ready,
    worker_shutdown,
)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")

app = Celery("chatapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_heartbeat = None


@worker_process_init.connect
def _tune_worker_process(**kwargs) -> None:
    from chatapp.process import process_tune_gc

    process_tune_gc()


@worker_ready.connect
def _heartbeat_start(sender, **kwargs) -> None:
    """Tell readiness probes (``/readyz``) that this worker is up, until it stops."""
    global _heartbeat
    from django.conf import settings

    from core.heartbeat import WorkerHeartbeat

    if not settings.REDIS_URL:
        return
    _heartbeat = WorkerHeartbeat(worker=sender.hostname).start()


@worker_shutdown.connect
def _heartbeat_stop(**kwargs) -> None:
    if _heartbeat is not None:
        _heartbeat.stop()


@task_prerun.connect
def _log_context_bind(task, **kwargs) -> None:
    """Put the ids of the request that enqueued the task on the task's log lines.

    They travel as a message header (``core.background.task_headers``); a
    worker puts custom headers on the request, eager runs under ``headers``.
    """
    from core.log_context import FIELDS, log_context_bind

    request = task.request
    context = getattr(request, "log_context", None) or (request.headers or {}).get("log_context")
    if isinstance(context, dict):
        log_context_bind(**{name: context.get(name) for name in FIELDS})


@task_postrun.connect
def _log_context_clear(task, **kwargs) -> None:
    """A worker's next task starts without them; an eager run leaves its caller's alone."""
    from core.log_context import log_context_clear

    if not task.request.is_eager:
        log_context_clear()
