"""Generation jobs: opt-out, idempotence, serialisation, retries, redispatch, notices (what
requests them: test_triggers.py)."""

import threading
import time
from datetime import timedelta

import numpy as np
import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings as django_settings
from django.core.cache import cache
from django.db import connection, connections
from django.test import Client
from django.utils import timezone

from chatapp.asgi import application
from core.background import background_submit, background_wait_idle
from core.llm import ModelError
from memory_app import services
from memory_app import tasks as memory_tasks
from memory_app.consolidation import preparation
from memory_app.embedding import vector_from_bytes
from memory_app.extraction import ExtractedFact
from memory_app.models import (
    GenerationJob,
    Memory,
    MemoryRevision,
    MemoryStatus,
    MemoryWatermark,
    SourceType,
)
from memory_app.services import jobs as job_services
from memory_app.services.job_heartbeats import (
    job_heartbeat_beat,
    job_heartbeat_expiry_seconds,
    jobs_beating,
)
from memory_app.tasks import memories_forget, memory_job_run, memory_jobs_redispatch
from sessions_app import selectors as session_selectors
from sessions_app import services as session_services
from sessions_app.events import Event
from sessions_app.models import SessionRecord
from tests.factories import UserFactory, session_key
from tests.fake_gemini import HttpError
from tests.memory_app.support import (
    APP,
    completed,
    job_for,
    lexical_only,  # noqa: F401 (fixture)
    memory_make,
    session_make,
    turn_add,
)
from tests.websocket_client import WebsocketClient

pytestmark = pytest.mark.usefixtures("lexical_only")

Trigger = GenerationJob.Trigger
Status = GenerationJob.Status


def run(job):
    return memory_job_run.apply(kwargs={"job_id": str(job.id)}).get()


# --- Running ------------------------------------------------------------------------------------


def test_a_job_turns_new_events_into_memories_with_sources(user, enqueued):
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    turn_add(session, "I have a cat named Tom.")
    job = job_for(user, session)

    assert run(job) == Status.SUCCEEDED

    job.refresh_from_db()
    assert (job.first_sequence, job.last_sequence, job.attempts) == (1, 4, 1)
    assert job.started_at and job.finished_at and job.error == ""
    assert MemoryWatermark.objects.get(session__session_id=session.id).last_sequence == 4
    memories = Memory.objects.filter(user=user)
    assert memories.count() >= 2
    assert all(memory.sources.exists() for memory in memories)
    assert all(memory.job_id == job.pk for memory in memories)


def test_running_a_job_twice_changes_nothing(user, enqueued):
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    job = job_for(user, session)
    run(job)
    before = list(Memory.objects.values_list("id", "text", "updated_at"))

    assert run(job) == Status.SUCCEEDED
    second = job_for(user, session)
    assert run(second) == Status.SKIPPED

    assert list(Memory.objects.values_list("id", "text", "updated_at")) == before
    second.refresh_from_db()
    assert "no new events" in second.error


def test_only_events_after_the_watermark_are_processed(user, enqueued, monkeypatch):
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    run(job_for(user, session))
    seen = []
    real = job_services.facts_extract
    monkeypatch.setattr(
        job_services,
        "facts_extract",
        lambda **kwargs: seen.append([e.text() for e in kwargs["events"]]) or real(**kwargs),
    )
    turn_add(session, "I have a dog.", reply=None)

    job = job_for(user, session)
    run(job)

    assert seen == [["I have a dog."]]
    job.refresh_from_db()
    assert (job.first_sequence, job.last_sequence) == (3, 3)


def test_a_job_reads_the_turns_before_its_batch_as_context(user, enqueued):
    session = session_make(user)
    turn_add(session, "I'm planning a trip.", reply="Where are you flying?")
    run(job_for(user, session))

    turn_add(session, "Lisbon.", reply="Lovely!")
    run(job_for(user, session))

    texts = Memory.objects.filter(user=user, status="active").values_list("text", flat=True)
    assert "The user is flying to Lisbon." in texts
    assert sorted(texts).count("The user is planning a trip.") == 1


def test_a_job_rechecks_the_users_choice_when_it_runs(user, enqueued):
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    job = job_for(user, session)
    services.memory_settings_update(user_pk=user.pk, create_enabled=False)

    assert run(job) == Status.SKIPPED

    assert not Memory.objects.exists()
    job.refresh_from_db()
    assert "off" in job.error


def test_opting_out_during_extraction_skips_the_write(user, enqueued, monkeypatch):
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    job = job_for(user, session)
    real = job_services.facts_extract

    def extract_then_opt_out(**kwargs):
        facts = real(**kwargs)
        services.memory_settings_update(user_pk=user.pk, create_enabled=False)
        return facts

    monkeypatch.setattr(job_services, "facts_extract", extract_then_opt_out)

    assert run(job) == Status.SKIPPED
    assert not Memory.objects.exists()
    assert not MemoryWatermark.objects.exists()


def test_a_temporary_session_job_is_skipped(user, enqueued):
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    job = job_for(user, session)
    SessionRecord.objects.filter(session_id=session.id).update(temporary=True)

    assert run(job) == Status.SKIPPED
    assert not Memory.objects.exists()


class RecordingEmbedder:
    """Vectors from word hashes, and for each call whether it ran inside a transaction."""

    name = "recording"

    def __init__(self):
        self.calls_in_transaction = []

    def encode(self, texts):
        self.calls_in_transaction.append(connection.in_atomic_block)
        rows = np.zeros((len(texts), 32), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for word in text.lower().split():
                row[hash(word) % 32] += 1
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.django_db(transaction=True)
def test_no_embedder_call_happens_under_the_user_s_lock(user, enqueued, monkeypatch):
    embedder = RecordingEmbedder()
    monkeypatch.setattr(preparation, "embedder_get", lambda: embedder)
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    assert run(job_for(user, session)) == Status.SUCCEEDED
    turn_add(session, "Actually, I live in Lisbon.")
    assert run(job_for(user, session)) == Status.SUCCEEDED
    fact = ExtractedFact(
        text="The user has a cat.",
        topic="personal_info",
        source_type=SourceType.EXPLICIT,
        confidence=0.9,
        importance=0.5,
    )
    services.memory_facts_store(app_name=APP, user_pk=user.pk, session_id=None, facts=[fact])

    assert embedder.calls_in_transaction == [False, False, False]
    updated = Memory.objects.get(user=user, text="The user lives in Lisbon.")
    assert updated.revisions.filter(action=MemoryRevision.Action.UPDATED).exists()
    assert updated.embedding_model == "recording"
    expected = embedder.encode([updated.text])[0]
    assert np.allclose(vector_from_bytes(updated.embedding), expected)
    assert Memory.objects.get(user=user, text="The user has a cat.").embedding_model == "recording"


# --- Failures -----------------------------------------------------------------------------------


def test_transient_model_errors_are_retried_until_the_job_is_a_day_old_then_it_is_dead(
    user, enqueued, fake_gemini, settings, monkeypatch
):
    settings.MEMORY_JOB_RETRY_BASE_SECONDS = 0
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    job = job_for(user, session)
    fake_gemini.push(HttpError(500), HttpError(503), HttpError(500))
    attempts = []
    real = services.memory_job_run

    def aged(**kwargs):
        attempts.append(1)
        if len(attempts) == 3:
            a_day_ago = timezone.now() - timedelta(seconds=24 * 3600 + 1)
            GenerationJob.objects.filter(pk=job.pk).update(created_at=a_day_ago)
        return real(**kwargs)

    monkeypatch.setattr(services, "memory_job_run", aged)

    run(job)

    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert job.attempts == 3
    assert "500" in job.error or "INTERNAL" in job.error
    assert len(fake_gemini.requests) == 3
    assert not MemoryWatermark.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_in_process_a_retry_waits_as_long_as_logged(user, enqueued, monkeypatch, settings, caplog):
    """The job runs once from here (``enqueued`` keeps the request's own dispatch, which
    would otherwise run it beside this one), then again when its retry is due."""
    settings.MEMORY_JOB_RETRY_BASE_SECONDS = 0.3
    monkeypatch.setattr(memory_tasks.random, "uniform", lambda low, high: high)
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    job = job_for(user, session)
    real = job_services.facts_extract
    tried_at = []

    def down_once(**kwargs):
        tried_at.append(time.monotonic())
        if len(tried_at) == 1:
            raise ModelError("connection refused", code="model_unavailable", transient=True)
        return real(**kwargs)

    monkeypatch.setattr(job_services, "facts_extract", down_once)
    caplog.set_level("INFO", logger="core.background")

    background_submit(task=memory_job_run, kwargs={"job_id": str(job.id)}, log_context={})
    background_wait_idle()

    job.refresh_from_db()
    assert (job.status, job.attempts) == (Status.SUCCEEDED, 2)
    assert tried_at[1] - tried_at[0] >= 0.3
    assert "retry in 0.30s" in caplog.text


def test_a_wait_longer_than_the_broker_keeps_a_task_is_left_to_the_redispatch(
    user, enqueued, monkeypatch, settings
):
    settings.MEMORY_JOB_RETRY_BASE_SECONDS = 2 * settings.TASK_VISIBILITY_TIMEOUT_SECONDS
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    job = job_for(user, session)

    def down(**kwargs):
        raise ModelError("connection refused", code="model_unavailable", transient=True)

    monkeypatch.setattr(job_services, "facts_extract", down)
    monkeypatch.setattr(memory_tasks.random, "uniform", lambda low, high: high)
    enqueued.clear()

    assert run(job) == "queued"

    job.refresh_from_db()
    assert (job.status, job.attempts) == (Status.QUEUED, 1)
    assert "connection refused" in job.error
    assert enqueued == []
    an_hour_ago = timezone.now() - timedelta(hours=1)
    GenerationJob.objects.filter(pk=job.pk).update(created_at=an_hour_ago)
    memory_jobs_redispatch.apply().get()
    assert enqueued == [], "the redispatch waits out the retry delay"
    cache.delete(job_services.DISPATCHED_KEY.format(job_id=job.id))  # the delay is over
    memory_jobs_redispatch.apply().get()
    assert enqueued == [{"job_id": str(job.id)}]


def test_a_success_sends_the_apps_jobs_waiting_for_a_retry_at_once(user, enqueued, settings):
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    waiting = job_for(user, session)
    GenerationJob.objects.filter(pk=waiting.pk).update(
        attempts=2, error="ModelError: connection refused"
    )
    other = session_make(user)
    turn_add(other, "I have a cat.")
    done = job_for(user, other)
    enqueued.clear()

    assert run(done) == Status.SUCCEEDED

    assert enqueued == [{"job_id": str(waiting.id)}]


def test_a_transient_error_then_success(user, enqueued, monkeypatch, settings):
    settings.MEMORY_JOB_RETRY_BASE_SECONDS = 0
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    job = job_for(user, session)
    real = job_services.facts_extract
    failures = [ModelError("busy", code="model_unavailable", transient=True)]

    def flaky(**kwargs):
        if failures:
            raise failures.pop()
        return real(**kwargs)

    monkeypatch.setattr(job_services, "facts_extract", flaky)

    run(job)
    job.refresh_from_db()
    assert (job.status, job.attempts) == (Status.SUCCEEDED, 2)
    assert Memory.objects.exists()


def test_a_non_transient_error_fails_the_job_at_once(user, enqueued, monkeypatch):
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    job = job_for(user, session)

    def broken(**kwargs):
        raise ModelError("bad request", code="model_invalid_request")

    monkeypatch.setattr(job_services, "facts_extract", broken)

    assert run(job) == Status.FAILED
    job.refresh_from_db()
    assert (job.status, job.attempts, job.error) == (
        Status.FAILED,
        1,
        "ModelError: bad request",
    )


# --- Periodic tasks -----------------------------------------------------------------------------


def test_jobs_left_queued_are_dispatched_again(user, enqueued, settings):
    session = session_make(user)
    lost = job_for(user, session)
    fresh = job_for(user, session_make(user))
    GenerationJob.objects.filter(pk=lost.pk).update(
        created_at=timezone.now()
        - timedelta(seconds=settings.MEMORY_JOB_REDISPATCH_AFTER_SECONDS + 60)
    )
    enqueued.clear()
    job_services.cache.delete(job_services.DISPATCHED_KEY.format(job_id=lost.id))

    assert memory_jobs_redispatch.apply().get() == 1
    assert enqueued == [{"job_id": str(lost.id)}]
    assert memory_jobs_redispatch.apply().get() == 0, "just dispatched: not again yet"
    assert fresh.status == Status.QUEUED


def running_since(job, seconds_ago, *, attempts=1):
    GenerationJob.objects.filter(pk=job.pk).update(
        status=Status.RUNNING,
        attempts=attempts,
        started_at=timezone.now() - timedelta(seconds=seconds_ago),
    )


def test_jobs_stuck_running_are_queued_and_sent_again(user, enqueued, settings):
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    stuck = job_for(user, session)
    running_since(stuck, settings.MEMORY_JOB_STUCK_AFTER_SECONDS + 60)
    busy = job_for(user, session_make(user))
    running_since(busy, settings.MEMORY_JOB_STUCK_AFTER_SECONDS - 60)
    job_heartbeat_beat(busy.id)
    enqueued.clear()

    assert memory_jobs_redispatch.apply().get() == 1
    assert memory_jobs_redispatch.apply().get() == 0, "released once, not again"

    assert enqueued == [{"job_id": str(stuck.id)}]
    stuck.refresh_from_db()
    assert (stuck.status, stuck.attempts) == (Status.QUEUED, 1)
    assert stuck.error.startswith("worker lost")
    busy.refresh_from_db()
    assert busy.status == Status.RUNNING
    assert run(stuck) == Status.SUCCEEDED
    stuck.refresh_from_db()
    assert (stuck.attempts, stuck.error) == (2, "")
    assert Memory.objects.filter(user=user, text="The user lives in Porto.").count() == 1


def test_a_killed_workers_job_is_sent_again_within_a_minute_a_beating_one_is_not(user, enqueued):
    assert (
        job_heartbeat_expiry_seconds() + django_settings.MEMORY_JOB_REDISPATCH_INTERVAL_SECONDS
        <= 60
    )
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    killed = job_for(user, session)
    running_since(killed, job_heartbeat_expiry_seconds() + 1)
    alive = job_for(user, session_make(user))
    running_since(alive, job_heartbeat_expiry_seconds() + 1)
    job_heartbeat_beat(alive.id)
    enqueued.clear()

    assert memory_jobs_redispatch.apply().get() == 1

    assert enqueued == [{"job_id": str(killed.id)}]
    killed.refresh_from_db()
    assert killed.status == Status.QUEUED
    assert killed.error.startswith("worker lost") and "no heartbeat" in killed.error
    alive.refresh_from_db()
    assert alive.status == Status.RUNNING
    assert run(killed) == Status.SUCCEEDED


def test_a_running_job_beats_until_it_ends(user, enqueued, monkeypatch, settings):
    settings.MEMORY_JOB_HEARTBEAT_SECONDS = 0.1
    beats = []
    renewed = threading.Event()

    def counted_beat(job_id):
        beats.append(str(job_id))
        if len(beats) >= 3:
            renewed.set()
        job_heartbeat_beat(job_id)

    monkeypatch.setattr(
        "memory_app.services.job_heartbeats.job_heartbeat_beat", counted_beat, raising=True
    )
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    job = job_for(user, session)
    seen_while_running = []
    extract = job_services.facts_extract

    def extract_watched(**kwargs):
        assert renewed.wait(10), "the heartbeat was not renewed while the job ran"
        seen_while_running.append(jobs_beating(job_ids=[job.id]))
        return extract(**kwargs)

    monkeypatch.setattr(job_services, "facts_extract", extract_watched)

    assert run(job) == Status.SUCCEEDED

    assert seen_while_running == [{str(job.id)}]
    assert set(beats) == {str(job.id)}
    assert jobs_beating(job_ids=[job.id]) == set()


def test_a_stuck_job_out_of_attempts_is_dead_and_a_stuck_tool_job_failed(user, enqueued, settings):
    settings.MEMORY_JOB_RETRY_FOR_SECONDS = settings.MEMORY_JOB_STUCK_AFTER_SECONDS
    session = session_make(user)
    turn_add(session, "I live in Porto.")
    exhausted = job_for(user, session)
    running_since(exhausted, settings.MEMORY_JOB_STUCK_AFTER_SECONDS + 60, attempts=3)
    GenerationJob.objects.filter(pk=exhausted.pk).update(
        created_at=timezone.now() - timedelta(seconds=settings.MEMORY_JOB_STUCK_AFTER_SECONDS + 60)
    )
    direct = GenerationJob.objects.create(
        user=user, app_name=APP, session_id=session_key(session), trigger=Trigger.TOOL
    )
    running_since(direct, settings.MEMORY_JOB_STUCK_AFTER_SECONDS + 60)
    enqueued.clear()

    assert memory_jobs_redispatch.apply().get() == 0

    assert enqueued == []
    exhausted.refresh_from_db()
    direct.refresh_from_db()
    assert (exhausted.status, exhausted.attempts) == (Status.DEAD, 3)
    assert direct.status == Status.FAILED
    for job in (exhausted, direct):
        assert job.error.startswith("worker lost") and job.finished_at is not None
    assert not Memory.objects.exists()


def test_forgetting_expires_decays_and_prunes(user, settings):
    settings.MEMORY_DECAY_AFTER_DAYS = 30
    settings.MEMORY_DECAY_FACTOR = 0.5
    settings.MEMORY_PRUNE_AFTER_DAYS = 90
    settings.MEMORY_PRUNE_BELOW_CONFIDENCE = 0.2
    expired = memory_make(user=user, text="Parked on level 2", expires_in_days=-1)
    unused = memory_make(user=user, text="Likes jazz", confidence=0.8, age_days=40)
    explicit = memory_make(
        user=user,
        text="Allergic to nuts",
        confidence=0.8,
        age_days=400,
        source_type=SourceType.EXPLICIT,
    )
    recent = memory_make(user=user, text="Likes tea", confidence=0.8, age_days=1)
    stale = memory_make(user=user, text="Maybe likes golf", confidence=0.3, age_days=200)

    assert memories_forget.apply().get() == {"expired": 1, "decayed": 2, "pruned": 1}

    assert not Memory.objects.filter(pk=expired.pk).exists()
    values = dict(Memory.objects.values_list("pk", "confidence"))
    assert values[unused.pk] == pytest.approx(0.4)
    assert values[explicit.pk] == pytest.approx(0.8)
    assert values[recent.pk] == pytest.approx(0.8)
    stale.refresh_from_db()
    assert stale.status == MemoryStatus.INVALIDATED
    revision = MemoryRevision.objects.get(memory=stale)
    assert revision.action == MemoryRevision.Action.INVALIDATED
    assert "Pruned" in revision.reason


# --- Serialisation per user (PostgreSQL) ----------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_jobs_of_one_user_write_one_at_a_time(requires_postgres, user, enqueued, monkeypatch):
    sessions = [session_make(user), session_make(user), session_make(user)]
    for session in sessions:
        turn_add(session, "I live in Porto.")
    same_session_twice = [
        GenerationJob.objects.create(
            user=user, app_name=APP, session_id=session_key(sessions[0]), trigger=Trigger.MANUAL
        )
        for _ in range(2)
    ]
    jobs = same_session_twice + [job_for(user, s) for s in sessions[1:]]
    active, overlaps = [0], []
    lock = threading.Lock()
    real = job_services.memories_consolidate

    def slow_consolidate(**kwargs):
        with lock:
            active[0] += 1
            overlaps.append(active[0])
        time.sleep(0.3)
        try:
            return real(**kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(job_services, "memories_consolidate", slow_consolidate)
    barrier = threading.Barrier(len(jobs))
    results = {}

    def worker(job):
        barrier.wait()
        try:
            results[job.pk] = services.memory_job_run(job_id=str(job.id)).status
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert max(overlaps) == 1, "two jobs of one user were writing at once"
    # The second job of the first session waited for the running one, which sent it on.
    assert sorted(results.values()) == [
        Status.QUEUED,
        Status.SUCCEEDED,
        Status.SUCCEEDED,
        Status.SUCCEEDED,
    ]
    [waited] = [job for job in jobs[:2] if results[job.pk] == Status.QUEUED]
    assert {"job_id": str(waited.id)} in enqueued
    assert services.memory_job_run(job_id=str(waited.id)).status == Status.SKIPPED
    for session in sessions:
        assert MemoryWatermark.objects.get(session__session_id=session.id).last_sequence == 2
    # The two jobs of the first session processed its events once.
    first_session_jobs = GenerationJob.objects.filter(session__session_id=sessions[0].id)
    assert sorted(first_session_jobs.values_list("status", flat=True)) == [
        Status.SKIPPED,
        Status.SUCCEEDED,
    ]


# --- Notices --------------------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_the_user_s_open_chat_gets_a_notice_from_the_job(monkeypatch):
    monkeypatch.setattr(job_services, "task_enqueue", lambda **kwargs: None)
    owner = await sync_to_async(UserFactory)()
    client = Client()
    await sync_to_async(client.force_login)(owner)
    name = django_settings.SESSION_COOKIE_NAME
    cookie = f"{name}={client.cookies[name].value}"
    session = await sync_to_async(session_make)(owner)
    await sync_to_async(turn_add)(session, "I live in Porto.")
    job = await sync_to_async(job_for)(owner, session)
    socket = WebsocketClient(
        application,
        f"/ws/chat/{session.id}/",
        headers=[
            (b"origin", b"http://testserver"),
            (b"host", b"testserver"),
            (b"cookie", cookie.encode()),
        ],
    )
    connected, _ = await socket.connect(timeout=20)
    assert connected

    await database_sync_to_async(services.memory_job_run)(job_id=str(job.id))
    frame = await socket.receive_json_from(timeout=20)

    memory = await Memory.objects.aget(user=owner)
    assert frame == {
        "type": "notice",
        "notice": {
            "kind": "memory",
            "message": "Remembered: you live in Porto.",
            "memory_ids": [str(memory.id)],
        },
    }
    await socket.disconnect()
    await database_sync_to_async(connections.close_all)()


# --- Consent decided when a turn is said (issue 26) ---------------------------------------------


def _miso_said_while_creation_was_off(user):
    services.memory_settings_update(user_pk=user.pk, create_enabled=False)
    session = session_make(user)
    invocation = turn_add(session, "Remember that my cat is called Miso.", reply="Not saved.")
    services.memory_settings_update(user_pk=user.pk, create_enabled=True)
    return session, invocation


# Every trigger whose job reads the session's new turns (the tool's job stores the one fact the
# agent chose: test_create_memory_saves_nothing_for_a_turn_said_while_creation_was_off).
@pytest.mark.parametrize("trigger", [t for t in Trigger if t != Trigger.TOOL])
def test_a_turn_said_while_creation_was_off_is_never_remembered(user, enqueued, trigger):
    session, _invocation = _miso_said_while_creation_was_off(user)
    turn_add(session, "I live in Porto.")

    assert run(job_for(user, session, trigger=trigger)) == Status.SUCCEEDED

    assert list(Memory.objects.values_list("text", flat=True)) == ["The user lives in Porto."]
    assert MemoryWatermark.objects.get(session__session_id=session.id).last_sequence == 4
    assert run(job_for(user, session, trigger=trigger)) == Status.SKIPPED
    assert not Memory.objects.filter(text__icontains="Miso").exists()


def test_no_turn_trigger_fires_on_a_turn_said_while_creation_was_off(user, enqueued, triggers):
    triggers(explicit=True, every_n_turns=1)
    session, invocation = _miso_said_while_creation_was_off(user)

    assert completed(user, session, invocation) is None
    assert GenerationJob.objects.count() == 0


def test_create_memory_saves_nothing_for_a_turn_said_while_creation_was_off(user, enqueued):
    session, invocation = _miso_said_while_creation_was_off(user)

    report = services.memory_create_explicit(
        app_name=APP,
        user_pk=user.pk,
        session_id=session_key(session),
        invocation_id=invocation,
        text="my cat is called Miso",
    )

    assert report is None and not Memory.objects.exists()


def test_the_assistants_part_of_a_turn_said_while_off_is_skipped_too(user, enqueued):
    session, invocation = _miso_said_while_creation_was_off(user)
    # The agent's answer came after creation was back on: still part of the excluded turn.
    session_services.event_append(
        session=session,
        event=Event(
            invocation_id=invocation,
            author="assistant",
            content={"role": "model", "parts": [{"text": "My cat is called Miso."}]},
        ),
    )
    page = session_selectors.stored_events_page(
        session_key=session_key(session), after_sequence=0, page_size=10, for_memory=True
    )

    assert page.events == []
