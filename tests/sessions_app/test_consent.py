"""Consent to memory is decided when a turn is said: an append marks what is kept from memory
(sessions_app.consent, sessions_app.storage), on SQLite and in PostgreSQL's one statement."""

import pytest
from asgiref.sync import async_to_sync
from google.genai import types

from memory_app import services as memory_services
from sessions_app import services
from sessions_app.events import Event, new_invocation_id
from sessions_app.models import EventRecord
from tests.memory_app.support import session_make

pytestmark = pytest.mark.django_db(transaction=True)


def said(text):
    return Event(
        invocation_id=new_invocation_id(),
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


def excluded(session):
    return list(
        EventRecord.objects.filter(session__session_id=session.id)
        .order_by("sequence")
        .values_list("memory_excluded", flat=True)
    )


def test_what_is_said_while_creation_is_off_is_marked_and_stays_marked(user):
    session = session_make(user)
    services.event_append(session=session, event=said("I live in Porto."))
    memory_services.memory_settings_update(user_pk=user.pk, create_enabled=False)
    services.event_append(session=session, event=said("My cat is called Miso."))
    memory_services.memory_settings_update(user_pk=user.pk, create_enabled=True)
    services.event_append(session=session, event=said("I like tea."))

    assert excluded(session) == [False, True, False]


def test_everything_said_in_a_temporary_chat_is_marked(user):
    session = session_make(user, temporary=True)
    services.event_append(session=session, event=said("My cat is called Miso."))

    assert excluded(session) == [True]


def test_another_users_choice_does_not_mark_this_users_turns(user, other_user):
    memory_services.memory_settings_update(user_pk=other_user.pk, create_enabled=False)
    session = session_make(user)
    services.event_append(session=session, event=said("I live in Porto."))

    assert excluded(session) == [False]


def test_an_append_from_an_event_loop_marks_it_too(user, requires_postgres):
    memory_services.memory_settings_update(user_pk=user.pk, create_enabled=False)
    session = session_make(user)

    async def append():
        await services.SessionService().append_event(session, said("Miso."))

    async_to_sync(append)()

    assert excluded(session) == [True]
