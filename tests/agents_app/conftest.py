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


@pytest.fixture
def round_trips_recorded(monkeypatch):
    """Call it to record from then on each round trip the event loop makes to PostgreSQL
    (``core.async_database.fetch_each``), as its statements' SQL joined by " ; "; it answers
    the list the trips go to."""
    from core import async_database

    def start() -> list[str]:
        trips: list[str] = []
        fetch_each = async_database.fetch_each

        async def recorded(statements, **options):
            trips.append(" ; ".join(sql for sql, _ in statements))
            return await fetch_each(statements, **options)

        monkeypatch.setattr(async_database, "fetch_each", recorded)
        return trips

    return start
