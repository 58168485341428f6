"""Search of past conversations: the user's own turns, read from the session store as it is."""

from datetime import UTC, datetime
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_app import selectors, services
from memory_app.models import Memory
from memory_app.selectors import past_conversations as past_selectors
from sessions_app import services as session_services
from sessions_app.models import EventRecord, SessionRecord
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


@pytest.mark.parametrize("chat_weight", [past_selectors.CHAT_WEIGHT, 0.0])
def test_an_answer_spread_over_a_chat_is_found_by_the_chat_holding_both_parts(owner, chat_weight):
    """ "Which book was I reading while my ankle healed?": one turn of a chat says the ankle,
    another, later in it, the reading; no turn says both. The reading said in the chat of the
    ankle ranks above a shorter turn of another chat about reading, which matches as much of
    the question alone (and ranks first with no weight on a chat's words)."""
    chat(
        owner,
        "Football",
        "I sprained my ankle at football, the doctor says it takes weeks to heal.",
        "The weather was lovely for a picnic with my cousins today.",
        "Meanwhile I am reading Dune on the sofa, it is gripping.",
    )
    chat(owner, "Evenings", "I love reading thrillers.")

    with mock.patch.object(past_selectors, "CHAT_WEIGHT", chat_weight):
        found = search(owner, "Which book was I reading while my ankle healed?", limit=3)

    excerpts = [t.excerpt for t in found]
    dune = excerpts.index("Meanwhile I am reading Dune on the sofa, it is gripping.")
    other = excerpts.index("I love reading thrillers.")
    assert (dune < other) == bool(chat_weight)


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


def history_make(user, *, turns: int, needles: int = 3) -> None:
    """A chat of ``turns`` user turns, one in ``turns // needles`` about the piano, written in
    bulk as a long history would be (replies left out: they change nothing here)."""
    session = session_make(user)
    record = SessionRecord.objects.get(session_id=session.id, user=user)
    every = turns // needles
    EventRecord.objects.bulk_create(
        EventRecord(
            session=record,
            user=user,
            app_name=record.app_name,
            sequence=number,
            event_id=f"e-{number}",
            author="user",
            timestamp=1_700_000_000 + number,
            content={
                "role": "user",
                "parts": [
                    {
                        "text": f"My piano lesson number {number} went well."
                        if number % every == 0
                        else f"Filler remark {number} about the weather and the traffic."
                    }
                ],
            },
        )
        for number in range(1, turns + 1)
    )
    SessionRecord.objects.filter(pk=record.pk).update(last_sequence=turns)


def search_read(user, query):
    """The search's statements and the rows its database search handed back."""
    read: list[int] = []
    found_windows = past_selectors.turn_windows

    def counted(**kwargs):
        windows = found_windows(**kwargs)
        read.append(len(windows.rows))
        return windows

    with (
        mock.patch.object(past_selectors, "turn_windows", counted),
        CaptureQueriesContext(connection) as queries,
    ):
        found = search(user, query)
    return found, len(queries), sum(read)


def test_a_search_reads_what_its_words_match_not_the_history():
    """A first search of a person, as any process serves it: the statements and rows read
    are the same for 50 and 500 turns of history holding the same three matches."""
    short, long = UserFactory(), UserFactory()
    history_make(short, turns=50)
    history_make(long, turns=500)

    found_short, statements_short, rows_short = search_read(short, "How was my piano lesson?")
    found_long, statements_long, rows_long = search_read(long, "How was my piano lesson?")

    assert len(found_short) == len(found_long)
    assert all("piano lesson" in turn.excerpt for turn in found_short[:3] + found_long[:3])
    # PostgreSQL runs the search statement in a transaction with its JIT off (search.py)
    assert statements_short == statements_long <= (6 if connection.vendor == "postgresql" else 3)
    assert rows_short == rows_long <= 3 * 5


def test_turns_of_a_temporary_chat_are_never_returned(owner):
    chat(owner, "Secret", "The tomato seeds are in the drawer.", temporary=True)
    chat(owner, "Garden", "My tomato plants are on the balcony.")

    assert [t.title for t in search(owner, "Where are the tomato seeds?")] == ["Garden"]


def test_the_same_history_ranks_alike_whatever_its_chats_keys():
    """Four chats each say the same of the dog, so their turns tie on the question's words,
    and the search's feedback pass takes the words of three of them. Five people with that
    same history (their chats' random keys ordered differently) get the same turns with the
    same scores: which three tie first follows when the chats began, not their keys."""
    places = ["river", "lake", "park", "beach"]
    people = [UserFactory() for _ in range(5)]
    for person in people:
        for place in places:
            chat(person, place.title(), f"I walked the dog by the {place} this morning.")

    answers = [
        [(turn.excerpt, turn.score) for turn in search(person, "Where did I walk the dog?")]
        for person in people
    ]

    assert len(answers[0]) == len(places)
    assert all(answer == answers[0] for answer in answers[1:])
