"""The Celery application: broker and schedules come from Django settings (CELERY_*)."""

import os

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")

app = Celery("chatapp")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_process_init.connect
def _tune_worker_process(**kwargs) -> None:
    from chatapp.process import process_tune_gc

    process_tune_gc()
