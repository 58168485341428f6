"""Consent reaches every door: what a person said while memory creation was off is never found
by the past-conversations search either (the preload, the agent's tool and MCP all read
through ``past_conversations_search``), and a chat with creation off says what it keeps."""

import pytest

from memory_app import selectors, services
from sessions_app import services as session_services
from sessions_app.models import EventRecord
from tests.factories import UserFactory, session_key
from tests.memory_app.support import (
    APP,
    lexical_only,  # noqa: F401 (fixture)
    session_make,
    turn_add,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_only")]


def search(user, query, *, session=None):
    return selectors.past_conversations_search(
        app_name=APP,
        user_pk=user.pk,
        query=query,
        session_id=session_key(session) if session else None,
        limit=5,
    )


def titled(user, title):
    session = session_make(user)
    session_services.session_rename(user_pk=user.pk, session_id=session.id, title=title)
    return session


def test_words_said_while_creation_was_off_are_never_found():
    owner = UserFactory()
    health = titled(owner, "Health")
    services.memory_settings_update(user_pk=owner.pk, create_enabled=False)
    turn_add(health, "Remember that my blood type is O negative.")
    services.memory_settings_update(user_pk=owner.pk, create_enabled=True)
    turn_add(health, "My blood pressure was fine at the check-up.")
    current = titled(owner, "Today")

    found = [turn.excerpt for turn in search(owner, "blood type pressure", session=current)]

    assert found == ["My blood pressure was fine at the check-up."]
    assert EventRecord.objects.filter(session__session_id=health.id, memory_excluded=True).exists()
    assert not [t for t in search(owner, "O negative", session=current) if "type" in t.excerpt]


def test_the_mark_is_data_every_later_read_honours():
    """Turning creation back on does not bring back what was said while it was off."""
    owner = UserFactory()
    said = titled(owner, "Said")
    services.memory_settings_update(user_pk=owner.pk, create_enabled=False)
    turn_add(said, "My passport number is in the blue folder.")
    services.memory_settings_update(user_pk=owner.pk, create_enabled=True)
    current = titled(owner, "Today")

    turn_add(said, "The spare key is under the mat.")

    assert [t.excerpt for t in search(owner, "passport blue folder key", session=current)] == [
        "The spare key is under the mat."
    ]
