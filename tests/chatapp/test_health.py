"""Liveness (/healthz) and readiness (/readyz), as an orchestrator calls them.

On the embedded default the readiness checks are the database and the
in-process pool; with ``REDIS_URL`` (CI's second pass) they run against the
real local PostgreSQL and Redis, and a real Celery worker's heartbeat.
"""

import os
import signal
import subprocess
import sys
import time
import uuid
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

from core.heartbeat import WorkerHeartbeat, worker_heartbeat_publish, workers_alive

UNREACHABLE_REDIS = "redis://127.0.0.1:1/0"
# Probes come by address, over plain HTTP, from outside ALLOWED_HOSTS.
PROBE_HOST = "10.1.2.3:8000"


@pytest.fixture
def probe_client(settings):
    """A client as an orchestrator is: production's HTTPS redirect on, an unknown Host."""
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    return Client(HTTP_HOST=PROBE_HOST)


@pytest.fixture
def own_heartbeats(settings):
    """Heartbeats under a key prefix of this test only, even in a shared Redis."""
    settings.CACHE_KEY_PREFIX = f"test-{uuid.uuid4().hex}"
    return settings.CACHE_KEY_PREFIX


@pytest.fixture
def requires_redis():
    if not settings.REDIS_URL:
        pytest.skip("needs Redis (REDIS_URL); runs in CI's PostgreSQL + Redis pass")


@pytest.fixture
def celery_mode(settings, requires_redis, own_heartbeats):
    settings.BACKGROUND_TASKS = "celery"
    settings.CELERY_BROKER_URL = settings.REDIS_URL


def test_healthz_answers_by_address_over_http_without_the_database(probe_client):
    """No ``db`` mark: pytest-django would fail any query this request made."""
    response = probe_client.get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_other_paths_still_get_the_host_check_and_the_https_redirect(probe_client, settings):
    assert probe_client.get("/accounts/login/").status_code == 400
    assert Client(HTTP_HOST="chat.example.com").get("/accounts/login/").status_code == 301


@pytest.mark.django_db
def test_readyz_on_the_embedded_default_lists_what_applies(probe_client, settings):
    settings.REDIS_URL = ""
    settings.BACKGROUND_TASKS = "inprocess"

    response = probe_client.get("/readyz")

    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ready"
    assert set(body["checks"]) == {"database", "workers"}
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["database"]["detail"] == connection.vendor
    assert "thread pool" in body["checks"]["workers"]["detail"]


@pytest.mark.django_db
def test_readyz_is_not_ready_when_redis_cannot_be_reached(probe_client, settings, own_heartbeats):
    settings.REDIS_URL = UNREACHABLE_REDIS
    settings.BACKGROUND_TASKS = "celery"
    settings.CELERY_BROKER_URL = UNREACHABLE_REDIS

    started = time.monotonic()
    response = probe_client.get("/readyz")
    elapsed = time.monotonic() - started

    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not_ready"
    assert body["checks"]["database"]["ok"] is True
    for name in ("redis", "broker", "workers"):
        assert body["checks"][name]["ok"] is False
        assert "ConnectionError" in body["checks"][name]["detail"]
    assert elapsed < 30, "a probe must give up on a dead Redis, not hang"


@pytest.mark.django_db
def test_readiness_is_logged_when_it_changes_not_at_every_probe(
    probe_client, settings, own_heartbeats, caplog
):
    settings.BACKGROUND_TASKS = "inprocess"
    probe_client.get("/readyz")
    settings.REDIS_URL = UNREACHABLE_REDIS
    caplog.clear()

    for _ in range(3):
        assert probe_client.get("/readyz").status_code == 503
    settings.REDIS_URL = ""
    for _ in range(2):
        assert probe_client.get("/readyz").status_code == 200

    lines = [(record.levelname, record.getMessage()) for record in caplog.records]
    assert [level for level, _ in lines] == ["WARNING", "INFO"]
    assert lines[0][1].startswith("not ready: redis: ConnectionError")
    assert lines[1][1] == "ready"


@pytest.mark.django_db
def test_readyz_with_celery_wants_a_worker_heartbeat(probe_client, celery_mode):
    response = probe_client.get("/readyz")

    assert response.status_code == 503
    checks = response.json()["checks"]
    assert set(checks) == {"database", "redis", "broker", "workers"}
    assert checks["database"]["ok"] and checks["redis"]["ok"] and checks["broker"]["ok"]
    assert checks["workers"] == {
        **checks["workers"],
        "ok": False,
        "required": True,
        "detail": "no Celery worker heartbeat in the last 30 s",
    }


@pytest.mark.django_db
def test_a_missing_worker_can_be_reported_without_making_web_unready(
    probe_client, celery_mode, settings
):
    settings.READYZ_REQUIRE_WORKERS = False

    response = probe_client.get("/readyz")

    assert response.status_code == 200
    assert response.json()["checks"]["workers"]["ok"] is False
    assert response.json()["checks"]["workers"]["required"] is False


@pytest.mark.django_db
def test_a_heartbeat_makes_readyz_ready_and_expires(
    probe_client, celery_mode, settings, monkeypatch
):
    settings.WORKER_HEARTBEAT_INTERVAL_SECONDS = 0.2

    heartbeat = WorkerHeartbeat(worker="celery@test-host").start()
    try:
        response = probe_client.get("/readyz")
        assert response.status_code == 200
        assert response.json()["checks"]["workers"]["detail"] == "1 alive: celery@test-host"
    finally:
        heartbeat.stop()

    assert workers_alive() == [], "a worker that stops says goodbye"
    # The heartbeat's clock is held still and then moved on, so that a slow machine's pause
    # between the beat and the reads cannot expire the beat early.
    now = time.time()
    monkeypatch.setattr("core.heartbeat.time", SimpleNamespace(time=lambda: now))
    worker_heartbeat_publish(worker="celery@vanished")
    now += 0.59
    assert workers_alive() == ["celery@vanished"]
    now += 0.02
    assert workers_alive() == [], "a worker that vanished drops out after three beats"
    assert probe_client.get("/readyz").status_code == 503


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_a_real_celery_worker_makes_readyz_ready_until_it_stops(probe_client, celery_mode):
    """A worker process started as compose starts it, on a queue of its own."""
    hostname = f"readiness-{uuid.uuid4().hex[:8]}@test"
    worker = subprocess.Popen(
        [
            *(sys.executable, "-m", "celery", "-A", "chatapp", "worker"),
            *("--pool", "solo", "--hostname", hostname, "--queues", f"{hostname}-only"),
            *("--without-mingle", "--without-gossip", "--loglevel", "WARNING"),
        ],
        cwd=settings.BASE_DIR,
        env={
            **os.environ,
            "REDIS_URL": settings.REDIS_URL,
            "CACHE_KEY_PREFIX": settings.CACHE_KEY_PREFIX,
            "WORKER_HEARTBEAT_INTERVAL_SECONDS": "1",
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while probe_client.get("/readyz").status_code != 200:
            assert worker.poll() is None, worker.stderr.read()
            assert time.monotonic() < deadline, "the worker never reported"
            time.sleep(0.5)
        assert hostname in probe_client.get("/readyz").json()["checks"]["workers"]["detail"]
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)

    response = probe_client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["workers"]["ok"] is False


def _connections_drop() -> None:
    """Close the connection and its pool, if any, so the next one uses the settings anew."""
    connection.close()
    if connection.settings_dict["OPTIONS"].get("pool"):
        connection.close_pool()


@pytest.mark.django_db(transaction=True)
def test_readyz_reports_a_database_outage_and_recovers_without_a_restart(
    probe_client, requires_postgres, settings
):
    settings.READYZ_REQUIRE_WORKERS = False
    original_port = connection.settings_dict["PORT"]
    pool = connection.settings_dict["OPTIONS"].get("pool")
    original_pool = dict(pool) if pool else None
    _connections_drop()
    connection.settings_dict["PORT"] = "1"
    if pool:
        pool["timeout"] = 0.5  # the pool's wait for a connection, before it gives up
    try:
        down = probe_client.get("/readyz")
    finally:
        connection.settings_dict["PORT"] = original_port
        if pool:
            pool.update(original_pool)
        _connections_drop()
    up = probe_client.get("/readyz")

    assert down.status_code == 503
    assert down.json()["checks"]["database"]["ok"] is False
    assert "OperationalError" in down.json()["checks"]["database"]["detail"]
    assert up.status_code == 200
    assert up.json()["checks"]["database"]["ok"] is True
