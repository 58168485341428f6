"""``manage.py expire_sessions``: the idle-session TTL on demand."""

import time
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sessions_app import services
from sessions_app.events import Event, EventActions
from sessions_app.models import EventRecord, SessionRecord

DAY = 24 * 3600


def session_idle_for(*, user, seconds: float) -> str:
    session = services.session_create(app_name="chat", user_id=str(user.pk))
    services.event_append(
        session=session,
        event=Event(author="user", actions=EventActions(state_delta={"step": 1})),
    )
    SessionRecord.objects.filter(session_id=session.id).update(
        last_update_time=time.time() - seconds
    )
    return session.id


@pytest.fixture(autouse=True)
def ttl_one_day(settings):
    settings.SESSION_IDLE_TTL_SECONDS = DAY


def run(*args: str) -> str:
    out = StringIO()
    call_command("expire_sessions", *args, stdout=out)
    return out.getvalue()


def test_deletes_idle_sessions_and_keeps_fresh_ones(user):
    idle = [session_idle_for(user=user, seconds=2 * DAY) for _ in range(3)]
    fresh = session_idle_for(user=user, seconds=60)

    output = run("--batch-size", "2")

    assert "Deleted 3 idle session(s)" in output
    assert list(SessionRecord.objects.values_list("session_id", flat=True)) == [fresh]
    assert not EventRecord.objects.filter(session__session_id__in=idle).exists()


def test_dry_run_counts_without_deleting(user):
    session_idle_for(user=user, seconds=2 * DAY)
    session_idle_for(user=user, seconds=3 * DAY)
    session_idle_for(user=user, seconds=60)

    output = run("--dry-run")

    assert "2 idle session(s) would be deleted" in output
    assert SessionRecord.objects.count() == 3


def test_ttl_zero_deletes_nothing(user, settings):
    settings.SESSION_IDLE_TTL_SECONDS = 0
    session_idle_for(user=user, seconds=3650 * DAY)

    output = run()

    assert "never expire" in output
    assert SessionRecord.objects.count() == 1


@pytest.mark.django_db
def test_refuses_a_batch_size_below_one():
    with pytest.raises(CommandError, match="at least 1"):
        run("--batch-size", "0")
