"""/metrics as Prometheus scrapes it: off without a token, counts real turns, reads the
database and the broker at scrape time."""

import pytest
from asgiref.sync import sync_to_async
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from memory_app.models import GenerationJob
from tests.chatapp.support import turn
from tests.fake_gemini import HttpError

TOKEN = "scrape-token-for-tests"


@pytest.fixture
def metrics_on(settings):
    settings.METRICS_TOKEN = TOKEN


def scrape() -> dict[tuple[str, tuple], float]:
    """Every sample of an authorised scrape: (name, sorted labels) -> value."""
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


def test_metrics_are_off_until_a_token_is_configured(settings):
    settings.METRICS_TOKEN = ""

    assert Client().get("/metrics").status_code == 404


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}", TOKEN])
def test_metrics_want_the_bearer_token(metrics_on, authorization):
    headers = {"HTTP_AUTHORIZATION": authorization} if authorization else {}

    response = Client().get("/metrics", **headers)

    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert b"chatapp_" not in response.content


@pytest.mark.django_db
def test_memory_jobs_by_status_come_from_the_database(metrics_on, user):
    before = scrape()
    for status in ("queued", "queued", "running", "failed", "dead"):
        GenerationJob.objects.create(user=user, app_name="chat", trigger="manual", status=status)

    after = scrape()

    def jobs(samples, status):
        return samples[("chatapp_memory_jobs", (("status", status),))]

    assert jobs(after, "queued") - jobs(before, "queued") == 2
    assert jobs(after, "running") - jobs(before, "running") == 1
    assert jobs(after, "failed") - jobs(before, "failed") == 1
    assert jobs(after, "dead") - jobs(before, "dead") == 1
    assert jobs(after, "succeeded") == jobs(before, "succeeded")


@pytest.mark.django_db
def test_queue_depth_on_the_embedded_default_is_the_in_process_pool(metrics_on, settings):
    settings.BACKGROUND_TASKS = "inprocess"

    samples = scrape()

    assert samples[("chatapp_queue_depth", (("queue", "inprocess"),))] == 0
    assert samples[("chatapp_workers_alive", ())] == 1


@pytest.mark.django_db
def test_queue_depth_is_the_broker_queue_length(metrics_on, settings):
    """Real messages published to the real Redis broker, counted, then taken back off."""
    if not settings.REDIS_URL:
        pytest.skip("needs Redis (REDIS_URL); runs in CI's PostgreSQL + Redis pass")
    from chatapp.celery import app
    from core.redis_clients import redis_client

    settings.BACKGROUND_TASKS = "celery"
    settings.CELERY_BROKER_URL = settings.REDIS_URL
    queue = app.conf.task_default_queue
    key = ("chatapp_queue_depth", (("queue", queue),))
    before = scrape()[key]
    for _ in range(3):
        app.send_task("sessions_app.tasks.sessions_expire_idle", queue=queue)
    try:
        after = scrape()[key]
    finally:
        client = redis_client(settings.REDIS_URL)
        for _ in range(3):
            client.lpop(queue)

    assert after - before == 3


def turn_samples(samples):
    return {
        outcome: samples[("chatapp_turns_total", (("outcome", outcome),))]
        for outcome in ("completed", "error", "interrupted", "incomplete")
    } | {"latency_count": samples[("chatapp_turn_duration_seconds_count", ())]}


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
async def test_a_completed_turn_is_counted_with_its_latency(metrics_on, chat_settings, user):
    before = turn_samples(await sync_to_async(scrape)())

    await turn(user)

    after = turn_samples(await sync_to_async(scrape)())
    assert after["completed"] - before["completed"] == 1
    assert after["latency_count"] - before["latency_count"] == 1
    assert after["error"] == before["error"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
async def test_a_turn_the_model_fails_is_counted_as_an_error(
    metrics_on, chat_settings, user, fake_gemini
):
    fake_gemini.push(HttpError(400, "bad request"))
    before = turn_samples(await sync_to_async(scrape)())

    frames = await turn(user)

    assert "error" in [frame["type"] for frame in frames]
    after = turn_samples(await sync_to_async(scrape)())
    assert after["error"] - before["error"] == 1
    assert after["completed"] == before["completed"]
