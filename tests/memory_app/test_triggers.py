"""What requests a generation job: the app's turn triggers, the session's end, the user's
departure (issue 13: freshness) and idle sessions."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from memory_app import services
from memory_app.models import (
    GenerationJob,
    Memory,
    MemoryWatermark,
)
from memory_app.services import jobs as job_services
from sessions_app.models import SessionRecord
from tests.factories import session_key
from tests.memory_app.support import (
    APP,
    completed,
    lexical_only,  # noqa: F401 (fixture)
    session_make,
    turn_add,
)

pytestmark = pytest.mark.usefixtures("lexical_only")

Trigger = GenerationJob.Trigger
Status = GenerationJob.Status


# --- Triggers -------------------------------------------------------------------------------


def test_every_n_turns_queues_a_job_on_the_nth_unprocessed_turn(user, enqueued, triggers):
    triggers(every_n_turns=2, explicit=False)
    session = session_make(user)

    assert completed(user, session, turn_add(session, "I like tea")) is None
    job = completed(user, session, turn_add(session, "I live in Porto"))

    assert job.trigger == Trigger.EVERY_N_TURNS and job.status == Status.QUEUED
    assert enqueued == [{"job_id": str(job.id)}]


def test_every_turn_and_explicit_remember(user, enqueued, triggers):
    triggers(every_n_turns=0, every_turn=True)
    session = session_make(user)
    assert completed(user, session, turn_add(session, "Hello")).trigger == Trigger.EVERY_TURN

    triggers(every_n_turns=0, every_turn=False, explicit=True)
    other = session_make(user)
    assert completed(user, other, turn_add(other, "Hello")) is None
    job = completed(user, other, turn_add(other, "Please remember that my locker is 42"))
    assert job.trigger == Trigger.EXPLICIT


def test_a_queued_job_absorbs_later_triggers(user, enqueued, triggers):
    triggers(every_turn=True)
    session = session_make(user)

    first = completed(user, session, turn_add(session, "I like tea"))
    second = completed(user, session, turn_add(session, "I like coffee"))

    assert first is not None and second is None
    assert list(GenerationJob.objects.values_list("pk", flat=True)) == [first.pk]
    assert len(enqueued) == 1


def test_no_job_for_a_user_who_opted_out_or_a_temporary_chat(user, other_user, enqueued, triggers):
    triggers(every_turn=True)
    services.memory_settings_update(user_pk=user.pk, create_enabled=False)
    session = session_make(user)
    temporary = session_make(other_user, temporary=True)

    assert completed(user, session, turn_add(session, "I like tea")) is None
    assert completed(other_user, temporary, turn_add(temporary, "I like tea")) is None
    assert (
        services.memory_session_end(app_name=APP, user_pk=user.pk, session_id=session_key(session))
        is None
    )
    assert not GenerationJob.objects.exists() and enqueued == []


def test_idle_sessions_with_unprocessed_events_get_a_job(user, other_user, enqueued, triggers):
    triggers(session_idle_seconds=600)
    idle = session_make(user)
    turn_add(idle, "I live in Porto")
    fresh = session_make(user)
    turn_add(fresh, "I live in Porto")
    processed = session_make(user)
    turn_add(processed, "I live in Porto")
    MemoryWatermark.objects.create(session_id=session_key(processed), last_sequence=2)
    temporary = session_make(other_user, temporary=True)
    turn_add(temporary, "I live in Porto")
    long_ago = time.time() - 3600
    SessionRecord.objects.exclude(session_id=fresh.id).update(last_update_time=long_ago)

    assert services.memory_sessions_idle_enqueue() == 1
    [job] = GenerationJob.objects.all()
    assert (job.session.session_id, job.trigger) == (idle.id, Trigger.SESSION_IDLE)
    assert services.memory_sessions_idle_enqueue() == 0, "a queued job is not queued again"


# --- Leaving a session (issue 13: freshness) ----------------------------------------------------


def later(seconds):
    return timezone.now() + timedelta(seconds=seconds)


def test_a_session_the_user_left_is_generated_after_the_quiet_period(user, enqueued, triggers):
    triggers(session_left_seconds=120, every_n_turns=5)
    session = session_make(user)
    turn_add(session, "My name is Dana and I live in Lisbon.")

    assert services.memory_session_left(user_pk=user.pk, session_id=session_key(session))
    assert services.memory_sessions_left_enqueue() == 0, "still within the quiet period"
    assert services.memory_sessions_left_enqueue(now=later(121)) == 1

    [job] = GenerationJob.objects.all()
    assert (job.session.session_id, job.trigger, job.status) == (
        session.id,
        Trigger.SESSION_LEFT,
        "queued",
    )
    assert enqueued == [{"job_id": str(job.id)}]
    assert services.memory_sessions_left_enqueue(now=later(500)) == 0, "a departure is used once"


def test_coming_back_within_the_quiet_period_generates_nothing(user, enqueued, triggers):
    triggers(session_left_seconds=120)
    session = session_make(user)
    turn_add(session, "I live in Lisbon.")

    services.memory_session_left(user_pk=user.pk, session_id=session_key(session))
    services.memory_session_opened(
        user_pk=user.pk, session_id=session_key(session)
    )  # a page reload

    assert services.memory_sessions_left_enqueue(now=later(600)) == 0
    assert not GenerationJob.objects.exists()


def test_opening_another_chat_leaves_the_chats_with_unprocessed_turns(
    user, other_user, enqueued, triggers
):
    triggers(session_left_seconds=120)
    unprocessed = session_make(user)
    turn_add(unprocessed, "I live in Lisbon.")
    processed = session_make(user)
    turn_add(processed, "I like tea.")
    MemoryWatermark.objects.create(session_id=session_key(processed), last_sequence=2)
    temporary = session_make(user, temporary=True)
    turn_add(temporary, "I live in Lisbon.")
    someone_elses = session_make(other_user)
    turn_add(someone_elses, "I live in Lisbon.")
    new_chat = session_make(user)

    assert services.memory_session_opened(user_pk=user.pk, session_id=session_key(new_chat)) == 1
    assert services.memory_sessions_left_enqueue(now=later(121)) == 1
    [job] = GenerationJob.objects.all()
    assert job.session.session_id == unprocessed.id


def test_a_session_written_in_after_leaving_it_waits_for_its_next_departure(
    user, enqueued, triggers
):
    triggers(session_left_seconds=120)
    session = session_make(user)
    turn_add(session, "I live in Lisbon.")
    services.memory_session_left(user_pk=user.pk, session_id=session_key(session), now=later(-300))
    turn_add(session, "I moved to Porto.")  # through the API, with no socket

    assert services.memory_sessions_left_enqueue() == 0
    assert not GenerationJob.objects.exists()


def test_leaving_a_temporary_chat_or_with_creation_off_records_nothing(user, enqueued, triggers):
    temporary = session_make(user, temporary=True)
    turn_add(temporary, "I live in Lisbon.")
    assert not services.memory_session_left(user_pk=user.pk, session_id=session_key(temporary))
    services.memory_settings_update(user_pk=user.pk, create_enabled=False)
    session = session_make(user)
    turn_add(session, "I live in Lisbon.")
    assert not services.memory_session_left(user_pk=user.pk, session_id=session_key(session))

    assert services.memory_sessions_left_enqueue(now=later(600)) == 0


def test_the_quiet_period_is_per_app_and_zero_turns_it_off(user, enqueued, triggers):
    triggers(session_left_seconds=0)
    session = session_make(user)
    turn_add(session, "I live in Lisbon.")
    services.memory_session_left(user_pk=user.pk, session_id=session_key(session))

    assert services.memory_sessions_left_enqueue(now=later(3600)) == 0
    assert not GenerationJob.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_left_trigger_never_processes_a_turn_twice_with_two_workers(
    requires_postgres, user, enqueued, monkeypatch, triggers
):
    """Two workers run the departure sweep and the session-end trigger at the same moment,
    then every job that came of it, at once: each turn is read by one extraction only."""
    triggers(session_left_seconds=60)
    session = session_make(user)
    for text in ("My name is Dana.", "I live in Lisbon.", "I have a cat named Miso."):
        turn_add(session, text)
    services.memory_session_left(user_pk=user.pk, session_id=session_key(session), now=later(-120))
    extracted, lock = [], threading.Lock()
    real = job_services.facts_extract

    def slow_extract(**kwargs):
        with lock:
            extracted.extend(event.id for event in kwargs["events"])
        time.sleep(0.3)
        return real(**kwargs)

    monkeypatch.setattr(job_services, "facts_extract", slow_extract)
    barrier = threading.Barrier(2)
    job_ids = set()

    def worker(trigger):
        try:
            barrier.wait()
            job = trigger()
            if job is not None:
                with lock:
                    job_ids.add(str(job.id))
            barrier.wait()
            for job_id in sorted(job_ids):
                services.memory_job_run(job_id=job_id)
        finally:
            connections.close_all()

    def sweep():
        services.memory_sessions_left_enqueue()
        return GenerationJob.objects.filter(session__session_id=session.id).first()

    def end():
        return services.memory_session_end(
            app_name=APP, user_pk=user.pk, session_id=session_key(session)
        )

    threads = [threading.Thread(target=worker, args=(trigger,)) for trigger in (sweep, end)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for job_id in GenerationJob.objects.filter(status=Status.QUEUED).values_list("pk", flat=True):
        services.memory_job_run(job_id=str(job_id))  # what the dispatch after a job would run

    assert len(extracted) == len(set(extracted)) == 6, "an event was extracted twice"
    texts = list(Memory.objects.filter(user=user).values_list("text", flat=True))
    assert len(texts) == len(set(texts)) == 3
    assert MemoryWatermark.objects.get(session__session_id=session.id).last_sequence == 6
