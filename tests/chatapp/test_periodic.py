"""The periodic tasks are django-celery-beat rows staff can edit, and a restart of beat keeps
what they changed."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from chatapp.celery import app
from chatapp.periodic import (
    EditableDatabaseScheduler,
    periodic_due,
    periodic_entries,
    periodic_run_record,
    periodic_start,
    periodic_tasks_install,
)
from tests.factories import UserFactory


@pytest.mark.django_db
def test_every_scheduled_task_is_a_row_after_migrate():
    rows = {task.name: task for task in PeriodicTask.objects.all()}

    for name, entry in settings.CELERY_BEAT_SCHEDULE.items():
        assert rows[name].task == entry["task"]
        assert rows[name].interval.every == int(entry["schedule"])
        assert rows[name].enabled


@pytest.mark.django_db
def test_staff_sees_and_edits_the_schedules_in_the_console():
    member = UserFactory(is_staff=True)
    member.user_permissions.set(
        Permission.objects.filter(
            content_type__app_label="django_celery_beat",
            codename__in=["view_periodictask", "change_periodictask"],
        )
    )
    client = Client()
    client.force_login(member)

    page = client.get(reverse("admin:django_celery_beat_periodictask_changelist"))

    assert page.status_code == 200
    for name in settings.CELERY_BEAT_SCHEDULE:
        assert name in page.content.decode()


@pytest.mark.django_db(transaction=True)
def test_beat_start_keeps_an_edited_schedule_and_fills_in_a_missing_one():
    forget = PeriodicTask.objects.get(name="memories-forget")
    forget.interval = IntervalSchedule.objects.create(every=7, period=IntervalSchedule.HOURS)
    forget.enabled = False
    forget.save()
    PeriodicTask.objects.filter(name="memory-jobs-redispatch").delete()

    EditableDatabaseScheduler(app=app)

    forget.refresh_from_db()
    assert (forget.interval.every, forget.interval.period, forget.enabled) == (7, "hours", False)
    assert PeriodicTask.objects.filter(name="memory-jobs-redispatch").exists()
    assert periodic_tasks_install() == []


@pytest.mark.django_db
def test_the_in_process_runner_follows_the_edited_rows():
    forget = PeriodicTask.objects.get(name="memories-forget")
    forget.interval = IntervalSchedule.objects.create(every=2, period=IntervalSchedule.HOURS)
    forget.save()
    PeriodicTask.objects.filter(name="sessions-expire-idle").update(enabled=False)

    entries = periodic_entries()
    last_run: dict = {}
    started = periodic_due(entries=entries, last_run=last_run)
    an_hour_ago = {name: when - timedelta(hours=1) for name, when in last_run.items()}
    three_hours_ago = {name: when - timedelta(hours=3) for name, when in last_run.items()}

    assert "sessions-expire-idle" not in entries
    assert started == []
    forget_only = {"memories-forget": entries["memories-forget"]}
    assert periodic_due(entries=forget_only, last_run=an_hour_ago) == []
    assert sorted(periodic_due(entries=entries, last_run=three_hours_ago)) == sorted(entries)
    assert three_hours_ago["memories-forget"] > last_run["memories-forget"]


@pytest.mark.django_db
def test_a_run_in_the_web_process_shows_in_the_console_as_beats_would():
    """Issue 17: on the embedded default every task read "Last run: -", though they ran."""
    member = UserFactory(is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(member)
    sweep = PeriodicTask.objects.get(name="turns-sweep")
    before = timezone.now()

    periodic_run_record(name="turns-sweep")
    periodic_run_record(name="turns-sweep")

    sweep.refresh_from_db()
    assert sweep.last_run_at >= before
    assert sweep.total_run_count == 2
    assert not PeriodicTask.objects.exclude(name="turns-sweep").filter(last_run_at__isnull=False)
    page = client.get(reverse("admin:django_celery_beat_periodictask_change", args=[sweep.pk]))
    shown = re.search(
        r"Last Run Datetime:</label>\s*<div class=\"readonly\">(.*?)</div>",
        page.content.decode(),
        re.S,
    )
    assert shown and shown.group(1).strip() not in ("", "-")


def test_the_periodic_thread_starts_only_where_the_web_process_keeps_the_schedule(settings):
    settings.BACKGROUND_TASKS = "celery"
    settings.PERIODIC_IN_PROCESS = True
    assert periodic_start() is None, "beat keeps the schedule when there is a broker"

    settings.BACKGROUND_TASKS = "inprocess"
    settings.PERIODIC_IN_PROCESS = False
    assert periodic_start() is None, "the test suite keeps periodic work out of its databases"


@pytest.mark.django_db
def test_entries_of_other_kinds_are_made_as_beat_makes_them():
    from celery.schedules import crontab

    created = periodic_tasks_install(
        schedule={
            "nightly-forget": {
                "task": "memory_app.tasks.memories_forget",
                "schedule": crontab(hour=3, minute=0),
            },
            "sweep-on-its-queue": {
                "task": "agents_app.tasks.turns_sweep",
                "schedule": 60.0,
                "options": {"queue": "slow"},
            },
            "memories-forget": {"task": "memory_app.tasks.memories_forget", "schedule": 1.0},
        }
    )

    assert sorted(created) == ["nightly-forget", "sweep-on-its-queue"]
    nightly = PeriodicTask.objects.get(name="nightly-forget")
    assert (nightly.crontab.hour, nightly.crontab.minute, nightly.interval) == ("3", "0", None)
    sweep = PeriodicTask.objects.get(name="sweep-on-its-queue")
    assert (sweep.interval.every, sweep.queue) == (60, "slow")
    assert PeriodicTask.objects.get(name="memories-forget").interval.every != 1


@pytest.mark.django_db
def test_an_interval_staff_made_twice_does_not_stop_the_install():
    """IntervalSchedule rows are not unique: staff can make the same interval twice in the
    console, and the next migrate must still fill in the missing schedules."""
    PeriodicTask.objects.filter(name="memories-forget").delete()
    every = int(settings.CELERY_BEAT_SCHEDULE["memories-forget"]["schedule"])
    IntervalSchedule.objects.create(every=every, period=IntervalSchedule.SECONDS)
    IntervalSchedule.objects.create(every=every, period=IntervalSchedule.SECONDS)

    assert periodic_tasks_install() == ["memories-forget"]
    assert PeriodicTask.objects.get(name="memories-forget").interval.every == every
