"""Fixtures of the agents app's tests of chat turns (claims and the sweeper)."""

import pytest

from sessions_app import services


@pytest.fixture
def turn_leases(settings):
    """A turn's lease of 15 s, and a silent turn interrupted after 90 s."""
    settings.TURN_LEASE_SECONDS = 15.0
    settings.TURN_INTERRUPTED_AFTER_SECONDS = 90.0


@pytest.fixture
def session(user):
    """A chat session of the test's user."""
    return services.session_create(app_name="chat", user_id=str(user.pk))
