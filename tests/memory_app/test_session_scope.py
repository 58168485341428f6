"""Session-scope memories (issue 26, item 4): made when a fact holds for this conversation only
("for this trip ...") and by the API (``add_memory`` with scope session), recalled in that
session alone, removed with it."""

import pytest
from asgiref.sync import async_to_sync

from memory_app import selectors, services
from memory_app.adk import MemoryService
from memory_app.extraction import ExtractedFact
from memory_app.models import Memory, MemoryScope, SourceType
from sessions_app import services as session_services
from tests.factories import session_key
from tests.memory_app.support import (  # noqa: F401
    APP,
    generate,
    lexical_only,
    offline,
    session_make,
    turn_add,
    user_events,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_only", "offline")]


def recalled(user, query, session):
    return [
        memory.text
        for memory in selectors.memory_search(
            app_name=APP, user_pk=user.pk, query=query, session_id=session_key(session)
        )
    ]


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        ("For this trip, I am vegetarian.", "The user is vegetarian."),
        ("I am vegetarian for this trip.", "The user is vegetarian."),
        ("In this chat, my name is Doc.", "The user's name is Doc."),
        ("Just for this conversation, I prefer short answers.", "The user prefers short answers."),
    ],
)
def test_a_fact_said_for_this_conversation_only_is_a_session_memory(user, said, kept):
    session = session_make(user)
    turn_add(session, said)

    generate(user, session)

    [memory] = Memory.objects.filter(user=user)
    assert (memory.text, memory.scope, memory.session.session_id) == (
        kept,
        MemoryScope.SESSION,
        session.id,
    )
    assert memory.structured is None, "a session fact is not the person's profile"
    assert memory.sources.get().excerpt.rstrip(".") in said


def test_it_sits_beside_the_lasting_facts_of_the_same_turn(user):
    session = session_make(user)
    turn_add(session, "I live in Lisbon. For this trip, I am vegetarian.")

    generate(user, session)

    scopes = dict(Memory.objects.filter(user=user).values_list("text", "scope"))
    assert scopes == {
        "The user lives in Lisbon.": MemoryScope.USER,
        "The user is vegetarian.": MemoryScope.SESSION,
    }


def test_a_session_fact_leaves_the_persons_memories_alone(user):
    before = session_make(user)
    turn_add(before, "I am vegan.")
    generate(user, before)
    trip = session_make(user)
    turn_add(trip, "For this trip, I am vegetarian.")

    generate(user, trip)

    lasting = Memory.objects.get(user=user, scope=MemoryScope.USER)
    assert (lasting.text, lasting.status) == ("The user is vegan.", "active")
    assert lasting.revisions.count() == 1


def test_it_is_recalled_in_its_session_only(user, other_user):
    trip = session_make(user)
    turn_add(trip, "For this trip, I am vegetarian.")
    generate(user, trip)
    later = session_make(user)

    assert recalled(user, "am I vegetarian", trip) == ["The user is vegetarian."]
    assert recalled(user, "am I vegetarian", later) == []
    assert recalled(other_user, "am I vegetarian", session_make(other_user)) == []


def test_it_goes_with_its_session(user):
    trip = session_make(user)
    turn_add(trip, "For this trip, I am vegetarian.")
    generate(user, trip)

    session_services.session_delete(app_name=APP, user_id=str(user.pk), session_id=trip.id)

    assert not Memory.objects.filter(user=user).exists()


def test_stating_it_again_in_the_session_keeps_one_memory(user):
    trip = session_make(user)
    turn_add(trip, "For this trip, I am vegetarian.")
    turn_add(trip, "Remember: for this trip, I am vegetarian.")
    [first, second] = user_events(trip.id)

    for event in (first, second, second):
        services.memory_facts_store(
            app_name=APP,
            user_pk=user.pk,
            session_id=session_key(trip),
            facts=[
                ExtractedFact(
                    text="The user is vegetarian.",
                    topic="personal_info",
                    source_type=SourceType.EXPLICIT,
                    confidence=0.9,
                    importance=0.5,
                    event_ids=[event.event_id],
                    scope=MemoryScope.SESSION,
                )
            ],
        )

    [memory] = Memory.objects.filter(user=user)
    assert memory.scope == MemoryScope.SESSION
    assert set(memory.sources.values_list("event_id", flat=True)) == {first.pk, second.pk}


def test_add_memory_with_scope_session(user):
    trip = session_make(user)
    other = session_make(user)
    service = MemoryService()

    [memory_id] = async_to_sync(service.add_memory)(
        app_name=APP,
        user_id=str(user.pk),
        text="The user's hotel is the Grand Hotel in Braga.",
        session_id=trip.id,
        scope="session",
    )

    memory = Memory.objects.get(pk=memory_id)
    assert (memory.scope, memory.session.session_id) == (MemoryScope.SESSION, trip.id)
    found = async_to_sync(service.search_memory)(
        app_name=APP, user_id=str(user.pk), query="hotel", session_id=other.id
    )
    assert found.memories == []
    with pytest.raises(ValueError, match="session_id"):
        async_to_sync(service.add_memory)(
            app_name=APP, user_id=str(user.pk), text="The user is on a trip.", scope="session"
        )
    with pytest.raises(ValueError, match="scope"):
        async_to_sync(service.add_memory)(
            app_name=APP, user_id=str(user.pk), text="The user is on a trip.", scope="app"
        )
