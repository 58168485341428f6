"""Searching one's chats (``GET /api/search/``), on whichever database the run uses:
PostgreSQL's full-text search, or SQLite's FTS5 on the embedded default."""

import pytest
from django.conf import settings
from django.db import connection
from google.genai import types
from rest_framework.test import APIClient

from sessions_app import services
from sessions_app.events import Event, new_invocation_id

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
    """The words are a generated column, filled on append and indexed by migrations (the
    expression index of 0008 gone), which the search reads."""
    _, found_id = _turn(_session(user, "Trip"), "The Douro valley in September")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT is_generated FROM information_schema.columns"
            " WHERE table_name = 'sessions_app_eventrecord' AND column_name = 'search_vector'"
        )
        assert cursor.fetchall() == [("ALWAYS",)]
        cursor.execute(
            "SELECT indexname, indexdef LIKE '%%USING gin (search_vector)%%' FROM pg_indexes"
            " WHERE tablename = 'sessions_app_eventrecord' AND indexname LIKE 'event_search%%'"
        )
        assert cursor.fetchall() == [("event_search_vector", True)]
        cursor.execute(
            "SELECT search_vector::text FROM sessions_app_eventrecord WHERE search_vector IS"
            " NOT NULL ORDER BY sequence"
        )
        assert cursor.fetchall() == [
            ("'douro':2 'in':4 'september':5 'the':1 'valley':3",),
            ("'noted':1",),
        ]
    assert [hit["event_id"] for hit in _search(api_client, "sept")] == [found_id]
