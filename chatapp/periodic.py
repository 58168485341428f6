"""The periodic tasks as rows staff can edit: django-celery-beat's ``PeriodicTask``.

``CELERY_BEAT_SCHEDULE`` in settings holds the defaults. Each becomes a ``PeriodicTask`` row
when it has none (after ``migrate``, and again when beat starts), so the schedules are in the
staff console from the start. A row that exists is never overwritten: django-celery-beat's own
``DatabaseScheduler`` rewrites the rows from the settings at every start, which would undo what
staff changed (interval, enabled) at the next deploy; :class:`EditableDatabaseScheduler` only
adds what is missing.
"""

from __future__ import annotations

from django.conf import settings
from django_celery_beat.schedulers import DatabaseScheduler, ModelEntry


def periodic_tasks_install(*, schedule: dict | None = None) -> list[str]:
    """Create a ``PeriodicTask`` for each schedule entry that has no row of that name; returns
    the names created. Existing rows, edited or not, are left as they are."""
    from django_celery_beat.models import PeriodicTask

    from chatapp.celery import app

    schedule = settings.CELERY_BEAT_SCHEDULE if schedule is None else schedule
    existing = set(PeriodicTask.objects.filter(name__in=schedule).values_list("name", flat=True))
    created = []
    for name, entry in schedule.items():
        if name not in existing:
            ModelEntry.from_entry(name, app=app, **entry)
            created.append(name)
    return created


def periodic_tasks_install_after_migrate(sender, using, **kwargs) -> None:
    """``post_migrate`` receiver: the defaults become rows once beat's tables exist."""
    periodic_tasks_install()


class EditableDatabaseScheduler(DatabaseScheduler):
    """django-celery-beat's scheduler, except that the settings' schedule only fills in rows
    that are missing instead of resetting every row at start."""

    def setup_schedule(self) -> None:
        periodic_tasks_install(schedule=self.app.conf.beat_schedule)
        self.install_default_entries(self.schedule)
