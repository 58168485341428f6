"""The idle-session TTL as the periodic task runs it, and how background work is dispatched."""

import os
import subprocess
import sys
import time

import pytest
from django.conf import settings as django_settings
from django.db import transaction
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from chatapp.celery import app
from core.background import background_wait_idle, task_enqueue
from sessions_app import services
from sessions_app.events import Event, EventActions
from sessions_app.models import EventRecord, SessionRecord, SessionState, UserState
from sessions_app.tasks import sessions_expire_idle

DAY = 24 * 3600


def session_with_history(*, user, idle_seconds: float) -> str:
    """A session with one event and session and user state, last updated ``idle_seconds`` ago."""
    session = services.session_create(app_name="chat", user_id=str(user.pk))
    services.event_append(
        session=session,
        event=Event(
            invocation_id="inv-1",
            author="user",
            actions=EventActions(state_delta={"topic": "tea", "user:name": "Ada"}),
        ),
    )
    SessionRecord.objects.filter(session_id=session.id).update(
        last_update_time=time.time() - idle_seconds
    )
    return session.id


@pytest.fixture
def ttl_one_day(settings):
    settings.SESSION_IDLE_TTL_SECONDS = DAY


def test_task_deletes_idle_sessions_with_their_events_and_state(user, ttl_one_day):
    idle = session_with_history(user=user, idle_seconds=2 * DAY)
    fresh = session_with_history(user=user, idle_seconds=60)

    assert sessions_expire_idle.apply().get() == 1

    assert list(SessionRecord.objects.values_list("session_id", flat=True)) == [fresh]
    assert not EventRecord.objects.filter(session__session_id=idle).exists()
    assert not SessionState.objects.filter(session__session_id=idle).exists()
    assert EventRecord.objects.filter(session__session_id=fresh).count() == 1
    assert UserState.objects.filter(user=user, key="name").exists(), "user: state is shared"


def test_task_is_idempotent(user, ttl_one_day):
    session_with_history(user=user, idle_seconds=2 * DAY)

    assert sessions_expire_idle.apply().get() == 1
    assert sessions_expire_idle.apply().get() == 0


def test_batches_smaller_than_the_backlog_still_delete_everything(user, settings, ttl_one_day):
    settings.SESSION_CLEANUP_BATCH_SIZE = 2
    for _ in range(5):
        session_with_history(user=user, idle_seconds=2 * DAY)
    fresh = session_with_history(user=user, idle_seconds=60)

    assert sessions_expire_idle.apply().get() == 5
    assert list(SessionRecord.objects.values_list("session_id", flat=True)) == [fresh]


def test_ttl_zero_keeps_sessions_forever(user, settings):
    settings.SESSION_IDLE_TTL_SECONDS = 0
    ancient = session_with_history(user=user, idle_seconds=3650 * DAY)

    assert sessions_expire_idle.apply().get() == 0
    assert SessionRecord.objects.filter(session_id=ancient).exists()


def test_beat_schedule_names_a_task_that_a_fresh_worker_registers():
    """A worker registers tasks by autodiscovery at start; do that in a new process."""
    entry = django_settings.CELERY_BEAT_SCHEDULE["sessions-expire-idle"]
    discover = (
        "from chatapp.celery import app; app.loader.import_default_modules(); "
        "print('\\n'.join(app.tasks))"
    )
    result = subprocess.run(
        [sys.executable, "-c", discover],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=django_settings.BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "chatapp.settings"},
        check=True,
    )

    assert entry["task"] in result.stdout.splitlines()
    assert float(entry["schedule"]) == django_settings.SESSION_CLEANUP_INTERVAL_SECONDS


@pytest.mark.django_db(transaction=True)
def test_database_scheduler_stores_the_schedule_as_a_periodic_task():
    """Beat runs in autocommit, and the scheduler closes connections left inside a transaction."""
    scheduler = DatabaseScheduler(app=app)

    stored = PeriodicTask.objects.get(name="sessions-expire-idle")
    assert stored.task == "sessions_app.tasks.sessions_expire_idle"
    assert stored.enabled
    assert stored.interval.every == django_settings.SESSION_CLEANUP_INTERVAL_SECONDS
    assert stored.interval.period == "seconds"
    assert "sessions-expire-idle" in scheduler.schedule


@pytest.fixture
def inprocess(settings):
    settings.BACKGROUND_TASKS = "inprocess"
    settings.SESSION_IDLE_TTL_SECONDS = DAY


@pytest.mark.django_db(transaction=True)
def test_enqueued_task_runs_in_process_after_commit(user, inprocess):
    with transaction.atomic():
        idle = session_with_history(user=user, idle_seconds=2 * DAY)
        task_enqueue(task=sessions_expire_idle)
        background_wait_idle()
        assert SessionRecord.objects.filter(session_id=idle).exists(), "ran before the commit"

    background_wait_idle()
    assert not SessionRecord.objects.filter(session_id=idle).exists()


@pytest.mark.django_db(transaction=True)
def test_enqueued_task_never_runs_when_the_transaction_rolls_back(user, inprocess):
    idle = session_with_history(user=user, idle_seconds=2 * DAY)

    with pytest.raises(RuntimeError), transaction.atomic():
        task_enqueue(task=sessions_expire_idle)
        raise RuntimeError("the turn failed")

    background_wait_idle()
    assert SessionRecord.objects.filter(session_id=idle).exists()
