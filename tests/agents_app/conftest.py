"""Fixtures of the agents app's tests: chat turns (claims and the sweeper), and the memory
provider's turns."""

import pytest

from sessions_app import services
from tests.factories import UserFactory


@pytest.fixture
def turn_leases(settings):
    """A turn's lease of 15 s, and a silent turn interrupted after 90 s."""
    settings.TURN_LEASE_SECONDS = 15.0
    settings.TURN_INTERRUPTED_AFTER_SECONDS = 90.0


@pytest.fixture
def session(user):
    """A chat session of the test's user."""
    return services.session_create(app_name="chat", user_id=str(user.pk))


@pytest.fixture
def owner(transactional_db):
    """A user, made on the main thread: an async fixture's database context would leak into
    teardown."""
    return UserFactory()
