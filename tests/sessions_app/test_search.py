"""Searching one's chats (``GET /api/search/``), on whichever database the run uses:
PostgreSQL's full-text search, or SQLite's FTS5 on the embedded default."""

import pytest
from django.conf import settings
from django.db import connection
from google.genai import types
from rest_framework.test import APIClient

from sessions_app import services
from sessions_app.events import Event, new_invocation_id
from sessions_app.models import EventRecord
from sessions_app.selectors import search
from tests.factories import session_key

APP = "chat"


def _session(user, title="", app_name=APP):
    session = services.session_create(app_name=app_name, user_id=str(user.pk))
    if title:
        services.session_rename(user_pk=user.pk, session_id=session.id, title=title)
    return session


def _turn(session, text, reply="Noted."):
    invocation_id = new_invocation_id()
    message = Event(
        invocation_id=invocation_id,
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )
    services.event_append(session=session, event=message)
    services.event_append(
        session=session,
        event=Event(
            invocation_id=invocation_id,
            author="assistant",
            content=types.Content(role="model", parts=[types.Part(text=reply)]),
        ),
    )
    return invocation_id, message.id


def _search(client, q, **params):
    response = client.get("/api/search/", {"q": q, **params})
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_a_message_in_an_old_chat_is_found_by_word_prefixes(api_client, user):
    old = _session(user, "Holiday plans")
    _, found_id = _turn(old, "We could visit the Douro valley in September,\nthen Porto.")
    _turn(_session(user, "Groceries"), "Buy bread and olive oil")

    [hit] = _search(api_client, "douro SEPT")

    assert hit["session_id"] == old.id
    assert hit["event_id"] == found_id
    assert hit["title"] == "Holiday plans"
    assert hit["author"] == "user"
    assert "Douro valley in September, then Porto." in hit["snippet"]
    assert _search(api_client, "douro winter") == []


def test_replies_are_searched_and_titles_match_first(api_client, user):
    chat = _session(user, "Rivers of Portugal")
    _turn(chat, "Tell me about one", reply="The Tagus is the longest river.")

    hits = _search(api_client, "rivers")
    assert [(hit["session_id"], hit["event_id"]) for hit in hits] == [(chat.id, None)]
    [reply] = _search(api_client, "tagus")
    assert reply["author"] == "assistant"
    assert reply["snippet"] == "The Tagus is the longest river."


def test_one_hit_per_chat_with_the_matching_words_marked_in_any_form(api_client, user):
    chat = _session(user, "Douro trip")
    _turn(chat, "Which wineries along the Douro?", reply="Three wineries on the Douro.")
    other = _session(user)
    _turn(other, "A winery near Porto", reply="Noted.")

    [by_title] = _search(api_client, "douro")
    found = _search(api_client, "winery")

    assert by_title["session_id"] == chat.id
    assert by_title["title_marks"] == [[0, 5]]
    assert sorted(hit["session_id"] for hit in found) == sorted([chat.id, other.id])
    for hit in found:
        marked = [hit["snippet"][start:end] for start, end in hit["snippet_marks"]]
        assert marked in (["wineries"], ["winery"]), hit


def test_another_users_chats_never_appear(api_client, user, other_user):
    theirs = _session(other_user, "Secret marmalade recipe")
    _turn(theirs, "The secret is marmalade with cardamom")
    _turn(_session(user, "Mine"), "I like marmalade")

    [hit] = _search(api_client, "marmalade")

    assert hit["title"] == "Mine"
    assert _search(api_client, "cardamom") == []
    assert _search(api_client, "secret") == []
    other_client = APIClient()
    other_client.force_authenticate(other_user)
    assert {hit["session_id"] for hit in _search(other_client, "marmalade")} == {theirs.id}


def test_only_the_apps_chats_and_the_history_as_it_stands_are_searched(api_client, user):
    chat = _session(user)
    invocation_id, _ = _turn(chat, "My cat is called Miso")
    _turn(chat, "I have a dog too")
    _turn(_session(user, app_name="support"), "Miso is on the invoice")
    services.session_rewind(
        app_name=APP,
        user_id=str(user.pk),
        session_id=chat.id,
        rewind_before_invocation_id=invocation_id,
    )

    assert _search(api_client, "miso") == []
    assert len(_search(api_client, "miso", app_name="support")) == 1


def test_a_deleted_chat_is_found_no_more(api_client, user):
    chat = _session(user)
    _turn(chat, "Quokkas are small wallabies")
    assert _search(api_client, "quokkas")

    services.session_delete(app_name=APP, user_id=str(user.pk), session_id=chat.id)

    assert _search(api_client, "quokkas") == []


@pytest.mark.parametrize(
    "query",
    ['"', '"tea"*', "tea AND NOT x", "tea:* & !x", "(tea | x)", "NEAR(tea x)", "tea'", "*", "-tea"],
)
def test_query_syntax_of_either_database_is_taken_as_words(api_client, user, query):
    _turn(_session(user), "Green tea please")

    hits = _search(api_client, query)

    words = [word for word in ("tea", "x", "and", "not", "near") if word in query.lower()]
    if words == ["tea"]:
        assert len(hits) == 1
    else:
        assert all("tea" in hit["snippet"].lower() for hit in hits)


@pytest.mark.parametrize(
    "params", [{}, {"q": "   "}, {"q": "x" * 201}, {"q": "a", "app_name": "a b"}]
)
def test_bad_queries_are_refused(api_client, params):
    response = api_client.get("/api/search/", params)
    assert response.status_code == 400


@pytest.mark.django_db
def test_search_needs_a_signed_in_user():
    assert APIClient().get("/api/search/", {"q": "tea"}).status_code == 403


@pytest.mark.skipif(settings.USING_SQLITE, reason="PostgreSQL's stored words; SQLite has FTS5")
def test_postgresql_keeps_each_events_words_with_it_under_one_index(api_client, user):
    """The words are a generated column, filled on append and indexed by migrations under
    their owner (the expression index of 0008 and the words-alone index of 0012 gone), which
    the search reads."""
    _, found_id = _turn(_session(user, "Trip"), "The Douro valley in September")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT is_generated FROM information_schema.columns"
            " WHERE table_name = 'sessions_app_eventrecord' AND column_name = 'search_vector'"
        )
        assert cursor.fetchall() == [("ALWAYS",)]
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'sessions_app_eventrecord'"
            " AND indexdef LIKE '%%USING gin%%'"
        )
        assert cursor.fetchall() == [("event_owner_words",)]
        cursor.execute(
            "SELECT sessions_app_owner_words(user_id, search_vector)::text"
            " FROM sessions_app_eventrecord WHERE search_vector IS NOT NULL ORDER BY sequence"
        )
        assert cursor.fetchall() == [
            (
                f"'{user.pk}_douro' '{user.pk}_in' '{user.pk}_september' '{user.pk}_the' "
                f"'{user.pk}_valley'",
            ),
            (f"'{user.pk}_noted'",),
        ]
        # A row version without an owner (before 0013 filled it), which building the index
        # reads while another transaction may still see it: no entries, and no error.
        cursor.execute("SELECT sessions_app_owner_words(NULL, to_tsvector('simple', 'tea'))")
        assert cursor.fetchall() == [(None,)]
        cursor.execute(
            "SELECT search_vector::text FROM sessions_app_eventrecord WHERE search_vector IS"
            " NOT NULL ORDER BY sequence"
        )
        assert cursor.fetchall() == [
            ("'douro':2 'in':4 'september':5 'the':1 'valley':3",),
            ("'noted':1",),
        ]
    assert [hit["event_id"] for hit in _search(api_client, "sept")] == [found_id]


def test_every_stored_event_carries_its_sessions_owner(user):
    """What the search finds a person's events by: appends, a rewind's own event and the
    events of a memory-only session all carry their session's user and app."""
    session = _session(user, app_name="other-app")
    invocation_id, _ = _turn(session, "Tea with lemon")
    _turn(session, "Coffee later")
    services.session_rewind(
        app_name="other-app",
        user_id=str(user.pk),
        session_id=session.id,
        rewind_before_invocation_id=invocation_id,
    )
    _turn(services.session_create(app_name=APP, user_id=str(user.pk), memory_only=True), "Kept")

    owners = EventRecord.objects.filter(session__user=user).values_list(
        "session__app_name", "user_id", "app_name"
    )
    assert sorted(set(owners)) == [
        (APP, user.pk, APP),
        ("other-app", user.pk, "other-app"),
    ]
    assert len(owners) == 7


@pytest.mark.skipif(settings.USING_SQLITE, reason="PostgreSQL's two steps; SQLite has FTS5")
@pytest.mark.parametrize("recent_events", [1, 9, 11, 1000])
def test_the_newest_matches_are_the_same_whether_found_among_the_newest_events_or_not(
    monkeypatch, user, recent_events
):
    """The newest matches of a word come from the person's newest events when enough of them
    match, else from all their matches: either way the same events, with hidden chats,
    rewound turns and the chat searched from left out by both steps.

    Newest first, the events are: the rewind, a rewound turn of "piano" and its reply, two
    turns of "piano" in a temporary chat with their replies, then "piano" 3, 2 and 1 each
    with its reply: the newest 9 hold one match to keep, the newest 11 two."""
    monkeypatch.setattr(search, "RECENT_EVENTS", recent_events)
    kept = _session(user, "Lessons")
    said = {number: _turn(kept, f"Piano lesson {number}") for number in (1, 2, 3)}
    temporary = services.session_create(app_name=APP, user_id=str(user.pk), temporary=True)
    _turn(temporary, "Secret piano plans")
    _turn(temporary, "More piano secrets")
    rewound_invocation, _ = _turn(kept, "Piano lesson rewound")
    services.session_rewind(
        app_name=APP,
        user_id=str(user.pk),
        session_id=kept.id,
        rewind_before_invocation_id=rewound_invocation,
    )

    def found(**kwargs):
        windows = search.turn_windows(
            user_pk=user.pk,
            app_name=APP,
            words=[("piano",)],
            per_word=2,
            before=0,
            after=0,
            **kwargs,
        )
        return [row[2] for row in windows.rows]

    sequence = dict(
        EventRecord.objects.filter(session__session_id=kept.id).values_list("event_id", "sequence")
    )
    assert found() == [sequence[said[2][1]], sequence[said[3][1]]]
    assert found(session_key=session_key(kept)) == []
    hits = search.chats_search(user_pk=user.pk, app_name=APP, query="piano lesson")
    assert [(hit.title, hit.event_id) for hit in hits] == [("Lessons", said[3][1])]


@pytest.mark.skipif(settings.USING_SQLITE, reason="PostgreSQL's two steps; SQLite has FTS5")
@pytest.mark.parametrize("recent_events", [0, 1000])
def test_a_word_the_parser_splits_is_found_by_either_step(monkeypatch, user, recent_events):
    """ "piano_duet" is a phrase of two words to PostgreSQL's parser, which the owner's index
    holds without positions: it is looked up there as both words, then matched as a phrase."""
    monkeypatch.setattr(search, "RECENT_EVENTS", recent_events)
    session = _session(user, "Music")
    _turn(session, "The piano_duet went well")
    _turn(session, "A duet on the piano, not the same")

    windows = search.turn_windows(
        user_pk=user.pk, app_name=APP, words=[("piano_duet",)], per_word=5, before=0, after=0
    )
    assert [row[5]["parts"][0]["text"] for row in windows.rows] == ["The piano_duet went well"]


@pytest.mark.parametrize("recent_events", [0, 1000])
def test_only_a_words_newest_matches_bring_the_turns_around_them(monkeypatch, user, recent_events):
    """With ``windowed``, a word's older matches up to ``per_word`` come without their
    neighbours (on PostgreSQL from either step: among the newest events or all of them)."""
    monkeypatch.setattr(search, "RECENT_EVENTS", recent_events)
    session = _session(user, "Lessons")
    for number in (1, 2, 3):
        _turn(session, f"Piano lesson {number}", reply=f"Well played, {number}.")

    def texts(**kwargs):
        windows = search.turn_windows(
            user_pk=user.pk, app_name=APP, words=[("piano",)], before=1, after=1, **kwargs
        )
        return [row[5]["parts"][0]["text"] for row in windows.rows]

    assert texts(per_word=3, windowed=1) == [
        "Piano lesson 1",
        "Piano lesson 2",
        "Well played, 2.",
        "Piano lesson 3",
        "Well played, 3.",
    ]
    assert texts(per_word=2, windowed=1) == [
        "Piano lesson 2",
        "Well played, 2.",
        "Piano lesson 3",
        "Well played, 3.",
    ]
    assert len(texts(per_word=3)) == 6


@pytest.mark.skipif(settings.USING_SQLITE, reason="PostgreSQL's two steps; SQLite has FTS5")
def test_a_word_common_among_the_newest_events_takes_its_older_matches_from_them(monkeypatch, user):
    """A word the newest events hold ``windowed`` times has its windowed matches there, exact,
    and its older ones come from those events too, not from reading all its matches; a rarer
    word's come from the whole history."""
    monkeypatch.setattr(search, "RECENT_EVENTS", 4)  # lesson 2 and 3 with their replies
    session = _session(user, "Lessons")
    for number in (1, 2, 3):
        _turn(session, f"Piano lesson {number}", reply=f"Well played, {number}.")

    def texts(**kwargs):
        windows = search.turn_windows(
            user_pk=user.pk, app_name=APP, words=[("piano",)], before=1, after=1, **kwargs
        )
        return [row[5]["parts"][0]["text"] for row in windows.rows if row[4] == "user"]

    assert texts(per_word=3, windowed=2) == ["Piano lesson 2", "Piano lesson 3"]
    assert texts(per_word=3, windowed=3) == ["Piano lesson 1", "Piano lesson 2", "Piano lesson 3"]


@pytest.mark.skipif(settings.USING_SQLITE, reason="PostgreSQL's two steps; SQLite has FTS5")
def test_a_related_word_is_looked_for_among_the_newest_events_alone(monkeypatch, user):
    """The words a query relates to (from ``related_from`` on) never make a search read all of
    their matches: an old turn holding one is not read, one holding the query's own word is."""
    monkeypatch.setattr(search, "RECENT_EVENTS", 2)  # the newest turn and its reply
    session = _session(user, "Food")
    _turn(session, "I am allergic to peanuts", reply="Noted.")
    _turn(session, "My piano teacher brings a snack", reply="Nice.")
    _turn(session, "Any lunch idea?", reply="Soup.")

    def texts(**kwargs):
        windows = search.turn_windows(
            user_pk=user.pk,
            app_name=APP,
            words=[("piano",), ("allergic",)],
            per_word=5,
            before=0,
            after=0,
            **kwargs,
        )
        return [row[5]["parts"][0]["text"] for row in windows.rows]

    both = ["I am allergic to peanuts", "My piano teacher brings a snack"]
    assert texts() == both
    assert texts(related_from=1) == ["My piano teacher brings a snack"]
    assert texts(related_from=2) == both


def test_chats_come_in_the_order_they_began_whatever_their_keys():
    """Rows of a chat keyed "b" that began first, then of one keyed "a": the order a ranking's
    ties follow is when each chat began (then its key), each chat's rows by sequence."""
    rows = [
        (4, "a", 1, 200.0, "user", {}, None),
        (5, "a", 2, 201.0, "user", {}, None),
        (2, "b", 2, 101.0, "user", {}, None),
        (1, "b", 1, 100.0, "user", {}, None),
        (7, "c", 1, 200.0, "user", {}, None),
    ]

    assert [row[0] for row in search.chats_ordered(rows)] == [1, 2, 4, 5, 7]
