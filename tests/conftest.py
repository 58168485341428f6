import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.factories import UserFactory


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """PBKDF2's deliberate slowness would cost a second per test user."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def user(db):
    return UserFactory()


@pytest.fixture
def other_user(db):
    return UserFactory()


@pytest.fixture
def api_client(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def requires_postgres(db):
    """Skip on SQLite: row locks and true concurrency need PostgreSQL (CI's second pass)."""
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (SQLite ignores row locks); runs in CI's PostgreSQL pass")
