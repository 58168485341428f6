"""memory_search: ranking, scopes, expiry, sources, and what it reads from the database."""

import re
from collections.abc import Sequence

import numpy as np
import pytest
from django.core.cache import cache
from django.db import connection
from django.test import override_settings
from django.utils import timezone
from google.genai import types

from memory_app import selectors, services
from memory_app.models import Memory, MemoryScope, MemorySettings, MemoryStatus
from memory_app.ranking import normalise
from memory_app.selectors import search as search_selectors
from memory_app.topics import KEY_CONVERSATION_DETAILS
from sessions_app import services as session_services
from sessions_app.events import Event, new_invocation_id
from tests.factories import session_key
from tests.memory_app.support import (
    APP,
    lexical_only,  # noqa: F401 (fixture)
    memory_make,
    session_make,
    turn_add,
    user_events,
)

pytestmark = pytest.mark.usefixtures("lexical_only")


def search(user, query, *, session_id=None, limit=10, app_name=APP):
    return selectors.memory_search(
        app_name=app_name, user_pk=user.pk, query=query, session_id=session_id, limit=limit
    )


def texts(results):
    return [result.text for result in results]


def test_the_most_relevant_memory_comes_first_with_a_score(user):
    memory_make(user=user, text="The user prefers tea to coffee")
    memory_make(user=user, text="The user has a golden retriever named Biscuit")
    memory_make(user=user, text="The user's sister lives in Lisbon")

    results = search(user, "What is the name of my dog, the retriever?")

    assert texts(results)[0] == "The user has a golden retriever named Biscuit"
    assert results[0].score > 0
    assert (
        texts(search(user, "Where does my sister live?"))[0] == "The user's sister lives in Lisbon"
    )


def test_no_match_and_empty_queries_return_nothing(user):
    memory_make(user=user, text="The user prefers tea")

    assert search(user, "volcano") == []
    assert search(user, "   ") == []
    assert search(user, "tea", limit=0) == []


def test_recency_and_importance_break_a_tie_of_relevance(user):
    old = memory_make(user=user, text="The user likes jazz", age_days=300)
    recent = memory_make(user=user, text="The user likes jazz", age_days=1)
    minor = memory_make(user=user, text="The user plays chess", importance=0.1)
    major = memory_make(user=user, text="The user plays chess", importance=0.9)

    assert [r.id for r in search(user, "jazz")] == [str(recent.id), str(old.id)]
    assert [r.id for r in search(user, "chess")] == [str(major.id), str(minor.id)]


def test_user_memories_are_private_and_app_memories_shared(user, other_user):
    memory_make(user=user, text="The user owns a red bicycle")
    memory_make(user=other_user, text="The user owns a blue bicycle")
    memory_make(scope=MemoryScope.APP, text="Bicycle repairs are free on Mondays")
    memory_make(scope=MemoryScope.APP, app_name="other-app", text="Bicycle rental costs 5 euros")

    assert sorted(texts(search(user, "bicycle"))) == [
        "Bicycle repairs are free on Mondays",
        "The user owns a red bicycle",
    ]
    assert sorted(texts(search(other_user, "bicycle"))) == [
        "Bicycle repairs are free on Mondays",
        "The user owns a blue bicycle",
    ]


def test_session_memories_are_seen_only_in_their_session(user):
    here = session_make(user)
    there = session_make(user)
    memory_make(
        user=user,
        scope=MemoryScope.SESSION,
        session_id=session_key(here),
        text="Draft title: Rivers",
    )

    assert texts(search(user, "draft title", session_id=session_key(here))) == [
        "Draft title: Rivers"
    ]
    assert search(user, "draft title", session_id=session_key(there)) == []
    assert search(user, "draft title") == []


def test_expired_invalidated_and_quarantined_memories_are_left_out(user):
    memory_make(user=user, text="Parking spot 12 today", expires_in_days=-1)
    memory_make(user=user, text="Parking spot 40 this week", expires_in_days=3)
    gone = memory_make(user=user, text="Parking spot 7")
    Memory.objects.filter(pk=gone.pk).update(status=MemoryStatus.INVALIDATED)
    held = memory_make(user=user, text="Parking spot 9")
    held.status = MemoryStatus.QUARANTINED
    held.save()

    assert texts(search(user, "parking spot")) == ["Parking spot 40 this week"]


def test_session_memories_of_other_sessions_do_not_crowd_out_the_results(user):
    here = session_make(user)
    there = session_make(user)
    for n in range(5):
        memory_make(
            user=user,
            scope=MemoryScope.SESSION,
            session_id=session_key(there),
            text=f"Kiwi {n} kiwi",
        )
    memory_make(user=user, text="The user grows kiwi")

    assert texts(search(user, "kiwi", session_id=session_key(here), limit=1)) == [
        "The user grows kiwi"
    ]


def test_results_carry_their_sources(user):
    session = session_make(user)
    turn_add(session, "I moved to Porto")
    event = user_events(session.id)[0]
    memory_make(user=user, text="The user lives in Porto", sources=[event])

    [result] = search(user, "Porto")

    assert [(s.session_id, s.event_id) for s in result.sources] == [(session.id, event.event_id)]


def test_a_new_memory_is_found_after_the_index_was_built(user):
    memory_make(user=user, text="The user likes sailing")
    assert texts(search(user, "sailing")) == ["The user likes sailing"]

    memory_make(user=user, text="The user went sailing in Greece", importance=0.9)

    assert texts(search(user, "sailing"))[0] == "The user went sailing in Greece"


def test_a_search_reads_its_candidates_and_their_sources_in_two_queries_from_the_first(
    user, other_user, django_assert_num_queries
):
    """Nothing is built first, in this process or any: the first search of a person costs what
    every later one does."""
    shared = "Bicycle repairs are free on Mondays"
    memory_make(scope=MemoryScope.APP, text=shared)
    memory_make(user=other_user, text="The user owns a blue bicycle")

    for _search in range(2):
        with django_assert_num_queries(2):  # the candidates with the collection, their sources
            assert sorted(texts(search(other_user, "bicycle"))) == [
                shared,
                "The user owns a blue bicycle",
            ]
    assert texts(search(user, "bicycle")) == [shared]


def test_what_a_search_reads_grows_with_its_words_not_with_the_memories(user, monkeypatch):
    monkeypatch.setattr(search_selectors, "CANDIDATES_PER_WORD", 5)
    monkeypatch.setattr(search_selectors, "NEWEST_CANDIDATES", 3)
    read = []
    candidates_read = search_selectors.memory_candidates

    def counted(**kwargs):
        found = candidates_read(**kwargs)
        read.append(len(found.rows))
        return found

    monkeypatch.setattr(search_selectors, "memory_candidates", counted)
    memory_make(user=user, text="The user's passport number ends in 4471", age_days=300)
    for n in range(60):
        memory_make(user=user, text=f"The user went sailing on trip number {n} with Ana")

    assert texts(search(user, "passport"))[0] == "The user's passport number ends in 4471"
    assert texts(search(user, "sailing trip"))[0].startswith("The user went sailing on trip")
    assert read[0] <= 1 + 3, "the one match and the newest"
    assert read[1] <= 2 * 5 + 3, "each word's newest matches and the newest memories"
    assert (
        search_selectors.memory_candidates(
            app_name=APP,
            user_pk=user.pk,
            session_id=None,
            words=[("sailing",)],
            per_word=5,
            own_words=1,
            related_per_word=0,
            newest=0,
            important=0,
            shared=0,
            now=timezone.now(),
            vectors=False,
        ).collection
        == 61
    ), "BM25's collection is all of the person's memories"


def test_a_change_written_by_any_process_is_what_the_next_search_finds(user):
    """The database answers every search: a write that no process here saw, made with no
    version replaced, is still what the next search finds."""
    kept = memory_make(user=user, text="The user plays the cello")
    gone = memory_make(user=user, text="The user keeps a locker at the gym")
    assert texts(search(user, "cello")) == ["The user plays the cello"]
    assert texts(search(user, "locker")) == ["The user keeps a locker at the gym"]

    Memory.objects.filter(pk=kept.pk).update(text="The user plays the harp")
    Memory.objects.filter(pk=gone.pk).update(status=MemoryStatus.INVALIDATED)

    assert texts(search(user, "harp")) == ["The user plays the harp"]
    assert search(user, "cello") == []
    assert search(user, "locker") == []


def test_a_deleted_memory_is_never_returned(user):
    memory = memory_make(user=user, text="The user's locker code is near the gym")
    assert search(user, "locker") != []

    assert services.memory_delete(app_name=APP, user_pk=user.pk, memory_id=str(memory.id))

    assert search(user, "locker") == []


@pytest.mark.skipif(
    connection.vendor != "sqlite", reason="PostgreSQL's words are a generated column of the row"
)
def test_sqlites_words_table_follows_every_write_of_a_memory(user):
    kept = memory_make(user=user, text="The user plays the cello")
    gone = memory_make(user=user, text="The user keeps a locker at the gym")
    Memory.objects.filter(pk=kept.pk).update(text="The user plays the harp")
    Memory.objects.filter(pk=gone.pk).delete()

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT row.memory_id, found.text FROM memory_app_memory_search AS found "
            "JOIN memory_app_memory_search_row AS row ON row.id = found.rowid"
        )
        assert cursor.fetchall() == [(kept.pk.hex, "The user plays the harp")]
        cursor.execute("SELECT count(*) FROM memory_app_memory_search_row")
        assert cursor.fetchone() == (1,)


def test_a_deleted_memory_is_not_returned_even_from_a_stale_index(user):
    memory = memory_make(user=user, text="The user keeps bees")
    assert search(user, "bees") != []

    # Deleted behind the cache's back: no signal, no version change.
    Memory.objects.filter(pk=memory.pk)._raw_delete(Memory.objects.db)

    assert search(user, "bees") == []


class TopicEmbedder:
    """One axis per topic word: a query about pets meets a memory about a puppy."""

    name = "topics"
    AXES = {
        "pet": {"pet", "pets", "puppy", "dog", "cat"},
        "food": {"food", "eat", "pasta", "pizza"},
        "travel": {"travel", "trip", "flight", "porto"},
    }

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        rows = []
        for text in texts:
            words = set(re.findall(r"\w+", normalise(text)))
            row = np.array([len(words & axis) for axis in self.AXES.values()], dtype=np.float32)
            row += 0.01
            rows.append(row / np.linalg.norm(row))
        return np.vstack(rows)


def test_semantic_similarity_finds_a_memory_with_no_shared_word(user, monkeypatch):
    monkeypatch.setattr(search_selectors, "embedder_get", TopicEmbedder)
    memory_make(user=user, text="The user adopted a puppy")
    memory_make(user=user, text="The user loves pasta")

    assert texts(search(user, "any pets at home?"))[0] == "The user adopted a puppy"


@pytest.mark.local_embeddings
def test_minilm_finds_a_paraphrase_that_shares_no_word_with_the_memory(user, local_embeddings):
    made = [
        memory_make(user=user, text=text)
        for text in (
            "The user's sister lives in Lisbon",
            "The user plays the cello on weekends",
            "The user is allergic to peanuts",
        )
    ]
    # As the embedding task does once a memory is stored: a search embeds only its query.
    assert services.embeddings_compute(memory_ids=[str(m.id) for m in made]).memories == 3
    services.memory_index_invalidate(app_name=APP, user_pk=user.pk)

    assert texts(search(user, "Which city is my sibling based in?"))[0] == (
        "The user's sister lives in Lisbon"
    )
    assert texts(search(user, "what instrument do I practise?"))[0] == (
        "The user plays the cello on weekends"
    )


def test_search_reads_the_database_when_the_cache_is_unreachable(user, unreachable_cache):
    memory_make(user=user, text="The user lives in Lisbon")
    assert texts(search(user, "where does the user live? Lisbon")) == ["The user lives in Lisbon"]
    services.memory_index_invalidate(app_name=APP, user_pk=user.pk)
    memory_make(user=user, text="The user moved to Porto")
    assert texts(search(user, "Porto")) == ["The user moved to Porto"]


def test_writes_made_while_the_cache_was_down_are_found_once_it_is_back(user, settings):
    """The cache comes back with its data intact, so it must not be what says a write
    happened: the version is written with the memory, in the database."""
    kept = memory_make(user=user, text="The user plays the cello")
    memory_make(user=user, text="The team meets on Mondays", scope=MemoryScope.APP)
    cache.set("still-here", True)
    assert texts(search(user, "cello")) == ["The user plays the cello"]
    assert texts(search(user, "Mondays")) == ["The team meets on Mondays"]
    outage = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",  # nothing listens there
        }
    }

    with override_settings(CACHES=outage):
        memory_make(user=user, text="The user plays the viola", age_days=1)
        memory_make(user=user, text="The team meets on Fridays", scope=MemoryScope.APP)
        services.memory_correct(
            app_name=APP, user_pk=user.pk, memory_id=str(kept.id), text="The user plays the harp"
        )

    assert cache.get("still-here") is True, "the cache is back with what it held"
    assert texts(search(user, "viola"))[0] == "The user plays the viola"
    assert texts(search(user, "Fridays"))[0] == "The team meets on Fridays"
    assert texts(search(user, "harp"))[0] == "The user plays the harp."
    assert "The user plays the cello" not in texts(search(user, "cello"))


def test_a_preload_search_reads_the_database_twice_with_no_version_read(
    user, django_assert_num_queries
):
    session = session_make(user)
    memory_make(user=user, text="The user keeps bees")
    key = session_key(session)

    with django_assert_num_queries(2):  # the candidates, where they were said (for neighbours)
        found = selectors.memory_search(
            app_name=APP, user_pk=user.pk, query="bees", session_id=key, sources=False
        )
    assert texts(found) == ["The user keeps bees"]
    assert found[0].sources == []

    memory_make(user=user, text="The user sells honey from the bees")
    found = selectors.memory_search(app_name=APP, user_pk=user.pk, query="honey", session_id=key)
    assert texts(found) == ["The user sells honey from the bees"]


def test_a_nut_allergy_query_finds_the_peanut_allergy(user):
    memory_make(user=user, text="The user is allergic to peanuts.")
    memory_make(user=user, text="The user plays the violin.")

    assert texts(search(user, "Do I have a nut allergy?"))[0] == "The user is allergic to peanuts."


@pytest.mark.parametrize("query", ["food", "Can you suggest a snack for me?"])
def test_a_question_about_food_brings_up_the_allergy(user, query):
    memory_make(user=user, text="The user is allergic to peanuts.")
    memory_make(user=user, text="The user plays the violin.")
    memory_make(user=user, text="The user's sister lives in Lisbon.")

    assert texts(search(user, query)) == ["The user is allergic to peanuts."]


@pytest.mark.parametrize(
    ("query", "memory"),
    [
        ("Where have I camped?", "The user hikes the coastal trail every spring."),
        ("What outdoor things do I do?", "The user went camping by the lake."),
        ("What volunteering have I done?", "The user donated their old car to a shelter."),
        ("Which charity do I support?", "The user volunteers at the food bank."),
    ],
)
def test_outdoor_and_volunteering_questions_find_what_the_user_did(user, query, memory):
    memory_make(user=user, text=memory)
    memory_make(user=user, text="The user plays the violin.")
    memory_make(user=user, text="The user's sister lives in Lisbon.")

    assert texts(search(user, query)) == [memory]


def test_an_exact_match_still_outranks_a_related_word(user):
    memory_make(user=user, text="The user eats a snack at four.")
    memory_make(user=user, text="The user cooks dinner for the family.")

    assert texts(search(user, "snack"))[0] == "The user eats a snack at four."


def test_a_name_the_question_mentions_lifts_the_memories_holding_it(user):
    memory_make(user=user, text="The user's colleague Ana went hiking in the mountains.")
    memory_make(user=user, text="The user went hiking in the mountains with the dog.")

    found = texts(search(user, "Where did Ana go hiking in the mountains?"))

    assert found[0] == "The user's colleague Ana went hiking in the mountains."


def test_the_turn_said_next_to_a_hit_is_found_with_it(user):
    session = session_make(user)
    turn_add(session, "I went to a pottery workshop on Saturday.")
    turn_add(session, "I made a bowl with a blue glaze there.")
    turn_add(session, "Unrelated: my bike got a flat tyre on the way home.")
    first, second, third = user_events(session.id)
    memory_make(user=user, text="The user went to a pottery workshop.", sources=[first])
    memory_make(user=user, text="The user made a bowl with a blue glaze.", sources=[second])
    memory_make(user=user, text="The user's bike got a flat tyre.", sources=[third])

    found = texts(search(user, "What happened at the pottery workshop?"))

    assert found == [
        "The user went to a pottery workshop.",
        "The user made a bowl with a blue glaze.",
    ]


def transcript_add(session, lines):
    """Store an imported transcript's turns, each naming its speaker as LoCoMo's do; returns
    their events in order."""
    for speaker, text in lines:
        session_services.event_append(
            session=session,
            event=Event(
                invocation_id=new_invocation_id(),
                author="user",
                content=types.Content(role="user", parts=[types.Part(text=text)]),
                custom_metadata={"speaker": speaker},
            ),
        )
    return user_events(session.id)


def test_a_question_naming_a_speaker_finds_what_they_said_before_what_was_said_to_them(user):
    session = session_make(user)
    lines = [
        ("Melanie", "We go camping in the mountains every summer."),
        ("Caroline", "Melanie, camping sounds like so much fun for the kids!"),
        ("Melanie", "Thanks Caroline! I also signed up for a pottery class."),
        ("Caroline", "I joined a support group, it was powerful."),
    ]
    events = transcript_add(session, lines)
    # A fact drawn from Melanie's turn no longer names her; Caroline's turn, kept whole, does.
    memory_make(user=user, text="The user goes camping in the mountains.", sources=[events[0]])
    for (speaker, text), event in zip(lines[1:], events[1:], strict=True):
        memory_make(user=user, text=f"[8 May 2023] {speaker}: {text}", sources=[event])

    found = texts(search(user, "Where does Melanie go camping?"))

    assert found[0] == "The user goes camping in the mountains."
    assert (
        "[8 May 2023] Caroline: Melanie, camping sounds like so much fun for the kids!"
        in (found[1:])
    )


def test_a_turn_kept_whole_and_the_fact_drawn_from_it_come_back_as_one_result(user):
    session = session_make(user)
    turn_add(session, "I adopted a puppy named Biscuit, we walk him by the river.")
    [event] = user_events(session.id)
    whole = memory_make(
        user=user,
        text="[8 May 2023] User: I adopted a puppy named Biscuit, we walk him by the river.",
        sources=[event],
    )
    Memory.objects.filter(pk=whole.pk).update(topic=KEY_CONVERSATION_DETAILS)
    memory_make(user=user, text="The user adopted a puppy named Biscuit.", sources=[event])
    memory_make(user=user, text="The user cycles by the river on Sundays.")

    found = texts(search(user, "puppy Biscuit river", limit=2))

    assert found == [
        "[8 May 2023] User: I adopted a puppy named Biscuit, we walk him by the river.",
        "The user cycles by the river on Sundays.",
    ]


def test_deleting_all_memories_replaces_the_index_version_once_and_search_sees_it(
    user, django_capture_on_commit_callbacks
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for number in range(5):
        memory_make(user=user, text=f"The user keeps note {number} about poetry")
    assert len(search(user, "poetry")) == 5

    with CaptureQueriesContext(connection) as queries:
        assert services.memories_delete_all(app_name=APP, user_pk=user.pk) == 5

    version_writes = [
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].startswith("UPDATE") and "index_version" in query["sql"]
    ]
    assert len(version_writes) == 1
    assert search(user, "poetry") == []


def test_a_merged_block_that_fails_replaces_no_version(user):
    services.user_lock(user.pk)
    version = MemorySettings.objects.get(user=user).index_version

    with pytest.raises(RuntimeError), services.memory_index_invalidations_merged():
        services.memory_index_invalidate(app_name=APP, user_pk=user.pk)
        raise RuntimeError("the writes roll back")

    assert MemorySettings.objects.get(user=user).index_version == version
    with services.memory_index_invalidations_merged():
        services.memory_index_invalidate(app_name=APP, user_pk=user.pk)
        assert MemorySettings.objects.get(user=user).index_version == version
    assert MemorySettings.objects.get(user=user).index_version != version


@pytest.mark.parametrize(
    "query", ["What do you know about me?", "me", "Tell me everything you remember about me"]
)
def test_a_question_about_the_user_as_a_whole_gets_the_most_important_memories(user, query):
    memory_make(user=user, text="The user is allergic to peanuts.", importance=0.9)
    memory_make(user=user, text="The user's name is Dana.", importance=0.8)
    memory_make(user=user, text="The user mentioned the weather.", importance=0.1)

    found = texts(search(user, query, limit=2))

    assert found == ["The user is allergic to peanuts.", "The user's name is Dana."]


def test_an_older_shared_memory_is_found_by_its_words(user, monkeypatch):
    monkeypatch.setattr(search_selectors, "SHARED_CANDIDATES", 2)
    memory_make(scope=MemoryScope.APP, text="Bicycle repairs are free on Mondays", age_days=90)
    for n in range(4):
        memory_make(scope=MemoryScope.APP, text=f"The library closes at {n + 5} pm")

    assert texts(search(user, "bicycle repairs")) == ["Bicycle repairs are free on Mondays"]
