"""The periodic tasks as rows staff can edit: django-celery-beat's ``PeriodicTask``.

``CELERY_BEAT_SCHEDULE`` in settings holds the defaults. Each becomes a ``PeriodicTask`` row
when it has none (after ``migrate``, and again when beat starts), so the schedules are in the
staff console from the start. A row that exists is never overwritten: django-celery-beat's own
``DatabaseScheduler`` rewrites the rows from the settings at every start, which would undo what
staff changed (interval, enabled) at the next deploy; :class:`EditableDatabaseScheduler` only
adds what is missing. Without a broker, the web process's own runner
(:func:`periodic_start`) reads the same rows through :func:`periodic_entries`, so
an edit applies in both modes.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import schedules
from django.conf import settings
from django.db import DatabaseError, connections, transaction
from django.db.models import F
from django.utils import timezone
from django_celery_beat.schedulers import DatabaseScheduler, ModelEntry

from core.background import background_submit

logger = logging.getLogger(__name__)

# How often the in-process runner reads the schedules again, so staff edits apply.
PERIODIC_REFRESH_SECONDS = 30.0


def periodic_tasks_install(*, schedule: dict | None = None) -> list[str]:
    """Create a ``PeriodicTask`` for each schedule entry that has no row of that name; returns
    the names created. Existing rows, edited or not, are left as they are.

    Entries that run every so many seconds (all of the settings' own) are made together, with
    one note to beat's schedulers that the schedules changed: this runs after every
    ``migrate``, and django-celery-beat's ``ModelEntry.from_entry``, which makes any other
    kind of entry, takes some twenty queries and commits an entry.
    """
    from django_celery_beat.models import IntervalSchedule, PeriodicTask, PeriodicTasks

    from chatapp.celery import app

    schedule = settings.CELERY_BEAT_SCHEDULE if schedule is None else schedule
    existing = set(PeriodicTask.objects.filter(name__in=schedule).values_list("name", flat=True))
    missing = {name: entry for name, entry in schedule.items() if name not in existing}
    every_so_often = {
        name: entry
        for name, entry in missing.items()
        if set(entry) == {"task", "schedule"} and isinstance(entry["schedule"], int | float)
    }
    if every_so_often:
        with transaction.atomic():
            rows = []
            for name, entry in every_so_often.items():
                # beat's own lookup, which takes the first of rows staff made twice.
                interval = IntervalSchedule.from_schedule(
                    schedules.schedule(timedelta(seconds=entry["schedule"]))
                )
                if interval.pk is None:
                    interval.save()
                rows.append(PeriodicTask(name=name, task=entry["task"], interval=interval))
            PeriodicTask.objects.bulk_create(rows)
            PeriodicTasks.update_changed()
    for name, entry in missing.items():
        if name not in every_so_often:
            ModelEntry.from_entry(name, app=app, **entry)
    return list(missing)


def periodic_tasks_install_after_migrate(sender, using, **kwargs) -> None:
    """``post_migrate`` receiver: the defaults become rows once beat's tables exist."""
    periodic_tasks_install()


class EditableDatabaseScheduler(DatabaseScheduler):
    """django-celery-beat's scheduler, except that the settings' schedule only fills in rows
    that are missing instead of resetting every row at start."""

    def setup_schedule(self) -> None:
        periodic_tasks_install(schedule=self.app.conf.beat_schedule)
        self.install_default_entries(self.schedule)


@dataclass(frozen=True)
class PeriodicEntry:
    """A recurring task as the in-process runner keeps it."""

    task: str
    schedule: schedules.BaseSchedule


def periodic_entries() -> dict[str, PeriodicEntry]:
    """The enabled recurring ``PeriodicTask`` rows by name (one-off clocked rows are beat's);
    the settings' schedule when the table cannot be read yet (a database not migrated)."""
    from django_celery_beat.models import PeriodicTask

    try:
        rows = list(
            PeriodicTask.objects.filter(enabled=True, one_off=False, clocked__isnull=True)
            .select_related("interval", "crontab", "solar")
            .order_by("name")
        )
    except DatabaseError:
        return {
            name: PeriodicEntry(
                task=entry["task"],
                schedule=schedules.schedule(timedelta(seconds=float(entry["schedule"]))),
            )
            for name, entry in settings.CELERY_BEAT_SCHEDULE.items()
        }
    return {row.name: PeriodicEntry(task=row.task, schedule=row.schedule) for row in rows}


def periodic_due(*, entries: dict[str, PeriodicEntry], last_run: dict[str, datetime]) -> list[str]:
    """The names of the entries due now, with ``last_run`` moved on for them. An entry seen for
    the first time starts its clock now, so nothing runs at process start."""
    due = []
    for name, entry in entries.items():
        if name not in last_run:
            last_run[name] = entry.schedule.now()
            continue
        if entry.schedule.is_due(last_run[name]).is_due:
            last_run[name] = entry.schedule.now()
            due.append(name)
    return due


def periodic_run_record(*, name: str) -> None:
    """Note on the ``PeriodicTask`` row that its task was started now, as beat does, so
    the console's "Last run" and run count are true in the embedded mode too. An update, not a
    save: a save would tell beat's schedulers the schedules changed."""
    from django_celery_beat.models import PeriodicTask

    PeriodicTask.objects.filter(name=name).update(
        last_run_at=timezone.now(), total_run_count=F("total_run_count") + 1
    )


def periodic_start() -> threading.Thread | None:
    """In the embedded mode, run the periodic tasks on a daemon thread.

    Celery beat does this job when there is a broker; without one the web
    process is the only process there is, so it keeps the schedule itself:
    the enabled ``PeriodicTask`` rows staff edit in the console, read again
    every ``PERIODIC_REFRESH_SECONDS`` (see ``periodic_entries``).
    Task modules are imported first, as a worker does at start, so every
    scheduled task is registered.
    Returns the thread, or None when beat is in charge or ``PERIODIC_IN_PROCESS`` is off.
    """
    if settings.BACKGROUND_TASKS != "inprocess" or not settings.PERIODIC_IN_PROCESS:
        return None
    from chatapp.celery import app

    app.loader.import_default_modules()
    stop = threading.Event()

    def loop() -> None:
        entries: dict = {}
        last_run: dict = {}
        refreshed = float("-inf")
        while not stop.wait(1.0):
            if time.monotonic() - refreshed >= PERIODIC_REFRESH_SECONDS:
                try:
                    entries = periodic_entries()
                finally:
                    connections.close_all()
                refreshed = time.monotonic()
            for name in periodic_due(entries=entries, last_run=last_run):
                task = app.tasks.get(entries[name].task)
                if task is None:
                    logger.error("periodic task %s is not a registered task", entries[name].task)
                    continue
                background_submit(task=task, kwargs={}, log_context={})
                try:
                    periodic_run_record(name=name)
                except DatabaseError:
                    logger.exception("could not record the run of periodic task %s", name)
                finally:
                    connections.close_all()

    thread = threading.Thread(target=loop, name="periodic", daemon=True)
    thread.start()
    return thread
