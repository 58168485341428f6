"""The REST API's rate limits: per signed-in user and per anonymous address, counted in the
default cache (local memory in the embedded shape, Redis when ``REDIS_URL`` is set), with a
429, a JSON error and ``Retry-After`` once a budget is spent."""

from __future__ import annotations

import pytest
from django.core.cache import caches
from rest_framework.test import APIClient

from tests.factories import UserFactory


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
def test_behind_a_trusted_proxy_a_forged_forwarded_address_buys_no_budget(
    settings, cache_backend, clock
):
    """With --proxy-headers the left-most entry was counted: rotating it never hit the limit."""
    settings.API_THROTTLE_ANON_RATE = "2/minute"
    settings.TRUSTED_PROXIES = ["10.0.0.1"]
    proxy = APIClient(REMOTE_ADDR="10.0.0.1")

    forged = [
        proxy.get("/api/schema/", HTTP_X_FORWARDED_FOR=f"6.6.6.{n}, 203.0.113.5").status_code
        for n in range(3)
    ]
    another_client = proxy.get("/api/schema/", HTTP_X_FORWARDED_FOR="6.6.6.1, 203.0.113.6")

    assert forged == [200, 200, 429]
    assert another_client.status_code == 200


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
    count = fresh.get(f"throttle_user_{user.pk}:{int(clock[0] // 60)}")

    assert count == 2
    if cache_backend == "redis":
        assert type(fresh).__name__ == "RedisCache"
        # Made with its expiry (two windows), so a window's counter does not outlive it long.
        key = fresh.make_and_validate_key(f"throttle_user_{user.pk}:{int(clock[0] // 60)}")
        assert 0 < fresh._cache.get_client(key).ttl(key) <= 120


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
    assert "rate limit not checked, no cache" in caplog.text


@pytest.mark.django_db(transaction=True)
def test_parallel_clients_of_the_api_never_get_more_than_the_rate_through(
    settings, cache_backend, clock, concurrently
):
    settings.API_THROTTLE_USER_RATE = "20/hour"
    user = UserFactory()

    def requests() -> list[int]:
        client = _signed_in(user)
        return [client.get("/api/access/grants/").status_code for _ in range(4)]

    statuses = [status for batch in concurrently(16, requests) for status in batch]

    assert statuses.count(200) == 20
    assert statuses.count(429) == 16 * 4 - 20
