"""The REST API's rate limits: per signed-in user and per anonymous address, counted in the
default cache (local memory in the embedded shape, Redis when ``REDIS_URL`` is set), with a
429, a JSON error and ``Retry-After`` once a budget is spent."""

from __future__ import annotations

import os
import uuid

import pytest
from django.core.cache import caches
from rest_framework.test import APIClient

from chatapp.throttling import APIAnonRateThrottle, APIUserRateThrottle
from tests.factories import UserFactory

NOW = 1_800_000_000.0
REDIS_URL = os.environ.get("REDIS_URL", "")


@pytest.fixture(params=["locmem", "redis"])
def cache_backend(request, settings):
    """Each test on both cache backends, with counters of its own (even in a shared Redis)."""
    prefix = f"throttle-test-{uuid.uuid4().hex}"
    if request.param == "locmem":
        backend = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": prefix}
    else:
        if not REDIS_URL:
            pytest.skip("needs REDIS_URL; runs in CI's PostgreSQL + Redis pass")
        backend = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    settings.CACHES = {"default": {**backend, "KEY_PREFIX": prefix}}
    return request.param


@pytest.fixture
def clock(monkeypatch):
    """The throttles' clock, held still and moved on by the test."""
    now = [NOW]
    for throttle in (APIUserRateThrottle, APIAnonRateThrottle):
        monkeypatch.setattr(throttle, "timer", staticmethod(lambda: now[0]))
    return now


def _signed_in(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.mark.django_db
def test_a_user_over_the_rate_gets_429_with_a_json_error_and_retry_after(
    settings, cache_backend, clock
):
    settings.API_THROTTLE_USER_RATE = "3/minute"
    client = _signed_in(UserFactory())

    statuses = [client.get("/api/sessions/").status_code for _ in range(3)]
    clock[0] += 20
    refused = client.get("/api/sessions/")

    assert statuses == [200, 200, 200]
    assert refused.status_code == 429
    assert refused["Content-Type"] == "application/json"
    assert "throttled" in refused.json()["detail"].lower()
    assert int(refused["Retry-After"]) == 40


@pytest.mark.django_db
def test_a_refused_write_writes_nothing(settings, cache_backend, clock):
    settings.API_THROTTLE_USER_RATE = "1/minute"
    client = _signed_in(UserFactory())
    client.get("/api/sessions/")

    refused = client.post("/api/sessions/", {"session_id": "late"}, format="json")

    assert refused.status_code == 429
    settings.API_THROTTLE_USER_RATE = ""
    assert client.get("/api/sessions/late/").status_code == 404


@pytest.mark.django_db
def test_users_have_budgets_of_their_own_and_the_budget_comes_back(settings, cache_backend, clock):
    settings.API_THROTTLE_USER_RATE = "2/minute"
    first, second = _signed_in(UserFactory()), _signed_in(UserFactory())
    for _ in range(2):
        first.get("/api/sessions/")

    assert first.get("/api/sessions/").status_code == 429
    assert second.get("/api/sessions/").status_code == 200
    clock[0] += 61
    assert first.get("/api/sessions/").status_code == 200


@pytest.mark.django_db
def test_anonymous_clients_are_limited_per_address(settings, cache_backend, clock):
    settings.API_THROTTLE_ANON_RATE = "2/minute"
    client = APIClient()

    statuses = [client.get("/api/schema/").status_code for _ in range(3)]
    other_address = client.get("/api/schema/", REMOTE_ADDR="10.0.0.9")
    forged = client.get("/api/schema/", HTTP_X_FORWARDED_FOR="10.0.0.10")

    assert statuses == [200, 200, 429]
    assert other_address.status_code == 200
    assert forged.status_code == 429, "a forged X-Forwarded-For must not buy a new budget"


@pytest.mark.django_db
def test_an_empty_rate_turns_the_limit_off(settings, cache_backend, clock):
    settings.API_THROTTLE_USER_RATE = ""
    client = _signed_in(UserFactory())

    assert {client.get("/api/sessions/").status_code for _ in range(30)} == {200}


@pytest.mark.django_db
def test_the_counts_live_in_the_configured_cache(settings, cache_backend, clock):
    """With Redis, the count is in Redis: what a fresh connection (another process) reads."""
    settings.API_THROTTLE_USER_RATE = "5/minute"
    user = UserFactory()
    client = _signed_in(user)
    for _ in range(2):
        client.get("/api/sessions/")

    caches.close_all()
    fresh = caches.create_connection("default")
    history = fresh.get(f"throttle_user_{user.pk}")

    assert history == [NOW, NOW]
    if cache_backend == "redis":
        assert type(fresh).__name__ == "RedisCache"


def test_the_schema_documents_429_on_every_operation(client):
    schema = client.get("/api/schema/?format=json").json()

    operations = [op for path in schema["paths"].values() for op in path.values()]
    assert operations
    for operation in operations:
        throttled = operation["responses"]["429"]
        assert "Retry-After" in throttled["headers"]


@pytest.mark.django_db
def test_without_a_reachable_cache_requests_go_through(settings, unreachable_cache, caplog):
    settings.API_THROTTLE_USER_RATE = "1/minute"
    client = _signed_in(UserFactory())

    statuses = [client.get("/api/sessions/").status_code for _ in range(3)]

    assert statuses == [200, 200, 200]
    assert "API rate limit not checked, no cache" in caplog.text
