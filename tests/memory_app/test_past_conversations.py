"""Search of past conversations: the user's own turns, read from the session store as it is."""

from datetime import UTC, datetime

import pytest

from memory_app import selectors, services
from memory_app.models import Memory
from sessions_app import services as session_services
from sessions_app.models import EventRecord
from tests.factories import UserFactory, session_key
from tests.memory_app.support import (
    APP,
    lexical_only,  # noqa: F401 (fixture)
    session_make,
    turn_add,
    user_events,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_only")]


def search(user, query, *, session=None, limit=5):
    return selectors.past_conversations_search(
        app_name=APP,
        user_pk=user.pk,
        query=query,
        session_id=session_key(session) if session else None,
        limit=limit,
    )


def chat(user, title, *texts, temporary=False):
    session = session_make(user, temporary=temporary)
    session_services.session_rename(user_pk=user.pk, session_id=session.id, title=title)
    for text in texts:
        turn_add(session, text, reply="Sure, noted.")
    return session


@pytest.fixture
def owner():
    return UserFactory()


def test_finds_a_past_turn_with_its_chat_event_and_date(owner):
    trip = chat(owner, "Trip to Porto", "I left the spare key under the blue flowerpot.")
    chat(owner, "Recipes", "How long should I boil an egg for?")
    current = chat(owner, "Today")

    [found] = search(owner, "Where did I say I keep the spare key?", session=current, limit=1)

    [said] = user_events(trip.id)
    assert found.excerpt == "I left the spare key under the blue flowerpot."
    assert (found.session_id, found.event_id, found.title) == (
        trip.id,
        said.event_id,
        "Trip to Porto",
    )
    assert found.said_at == datetime.fromtimestamp(said.timestamp, tz=UTC)
    assert found.score > 0
    assert not Memory.objects.exists()


def test_only_the_users_own_words_of_other_chats_are_searched(owner):
    other = UserFactory()
    chat(other, "Theirs", "My spare key is in the mailbox.")
    current = chat(owner, "Today", "Where is the spare key?")
    session = session_make(owner)
    turn_add(session, "Hello there", reply="The spare key is under the mat.")

    assert search(owner, "spare key", session=current) == []
    assert [t.excerpt for t in search(other, "spare key")] == ["My spare key is in the mailbox."]


def test_reference_past_chats_off_memory_use_off_and_temporary_chats_find_nothing(owner):
    chat(owner, "Garden", "My tomato plants are on the balcony.")
    temporary = chat(owner, "Secret", "The tomato seeds are in the drawer.", temporary=True)
    current = chat(owner, "Today")
    assert [t.title for t in search(owner, "tomato", session=current)] == ["Garden"]

    assert search(owner, "tomato", session=temporary) == []
    services.memory_settings_update(user_pk=owner.pk, past_chats_enabled=False)
    assert search(owner, "tomato", session=current) == []
    services.memory_settings_update(user_pk=owner.pk, past_chats_enabled=True, use_enabled=False)
    assert search(owner, "tomato", session=current) == []
    access = selectors.session_memory_access(user_pk=owner.pk, session_id=session_key(current))
    assert (access.use, access.past) == (False, False)


def test_a_deleted_chat_is_gone_at_once(owner):
    garden = chat(owner, "Garden", "My tomato plants are on the balcony.")
    assert search(owner, "tomato plants")

    session_services.session_delete(app_name=APP, user_id=str(owner.pk), session_id=garden.id)

    assert search(owner, "tomato plants") == []


def test_an_edited_message_replaces_the_old_words_at_once(owner):
    bike = chat(owner, "Bike", "My bike is a red Brompton.")
    assert [t.excerpt for t in search(owner, "Brompton bike")] == ["My bike is a red Brompton."]
    [first] = user_events(bike.id)

    session_services.session_rewind(
        app_name=APP,
        user_id=str(owner.pk),
        session_id=bike.id,
        rewind_before_invocation_id=first.invocation_id,
    )
    assert search(owner, "Brompton") == []
    turn_add(bike, "My bike is a green Cannondale.")

    assert search(owner, "Brompton") == []
    assert [t.excerpt for t in search(owner, "bike")] == ["My bike is a green Cannondale."]


def test_a_turn_rewound_by_another_process_is_never_returned(owner):
    """Rows marked rewound behind the index's back (its version unchanged) are re-checked."""
    garden = chat(owner, "Garden", "My tomato plants are on the balcony.")
    assert search(owner, "tomato")

    EventRecord.objects.filter(session__session_id=garden.id).update(rewound=True)

    assert search(owner, "tomato") == []


def test_a_short_answer_is_found_by_the_question_it_answers(owner):
    """ "Lisbon, for a conference." says nothing of flying; the assistant's question before it
    does, and comes with it, since the answer alone says little. A match on the turn's own words
    still ranks first."""
    travel = session_make(owner)
    session_services.session_rename(user_pk=owner.pk, session_id=travel.id, title="Travel")
    turn_add(travel, "I have a busy month ahead.", reply="Sounds hectic! Where are you flying?")
    turn_add(travel, "Lisbon, for a conference.", reply="Lovely.")
    chat(owner, "Holidays", "I'm flying to Rome in May with my sister.")

    found = search(owner, "Where was I flying to?")

    assert [(t.excerpt, t.asked) for t in found] == [
        ("I'm flying to Rome in May with my sister.", ""),
        ("Lisbon, for a conference.", "Where are you flying?"),
    ]


def test_only_a_question_of_someone_else_just_before_a_turn_is_the_question_it_answers(owner):
    """The user's own question is not answered by their next words, a reply that ends
    otherwise asks nothing, and a question in another chat is not this chat's."""
    asking = session_make(owner)
    turn_add(asking, "Which bakery sells the rye bread?", reply=None)
    turn_add(asking, "Also, remind me about the dentist.", reply="Will do. Anything else?")
    plain = session_make(owner)
    turn_add(plain, "I started knitting.", reply="Knitting is relaxing. I like it.")
    turn_add(plain, "Scarves mostly, in wool.")

    assert [t.asked for t in search(owner, "rye bakery")] == [""]
    assert search(owner, "dentist")[0].asked == ""
    assert search(owner, "scarves")[0].asked == ""
    assert search(owner, "anything else") == []
