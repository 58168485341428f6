"""The Celery application: broker and schedules come from Django settings (CELERY_*)."""

import os

from celery import Celery
from celery.signals import worker_process_init, worker_ready, worker_shutdown

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

    from chatapp.heartbeat import WorkerHeartbeat

    if not settings.REDIS_URL:
        return
    _heartbeat = WorkerHeartbeat(worker=sender.hostname).start()


@worker_shutdown.connect
def _heartbeat_stop(**kwargs) -> None:
    if _heartbeat is not None:
        _heartbeat.stop()
