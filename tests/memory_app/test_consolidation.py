"""Consolidation as a user of their memories would check it: what is remembered, changed,
invalidated or held for review, where each memory came from, and that nothing is half-written."""

import itertools
import re

import numpy as np
import pytest

from memory_app.consolidation import consolidation_prepare, memories_consolidate, preparation
from memory_app.consolidation.writes import MemoryWrites
from memory_app.embedding import vector_from_bytes
from memory_app.extraction import ExtractedFact, FactKind, facts_extract
from memory_app.models import GenerationJob, Memory, MemoryRevision, MemorySource
from memory_app.ranking import NoEmbedder
from memory_app.topics import MANAGED_TOPICS
from sessions_app import services
from sessions_app.events import Event
from sessions_app.models import EventRecord
from tests.factories import session_key

pytestmark = pytest.mark.django_db

APP = "chat"
_clock = itertools.count(1_700_000_000)


class SynonymEmbedder:
    """A stand-in for MiniLM: one axis per meaning, so synonyms get the same unit vector."""

    name = "synonyms"
    AXES = (
        {"love", "loves", "adore", "adores"},
        {"cat", "cats", "kitten", "kittens"},
        {"lisbon"},
        {"porto"},
        {"live", "lives"},
        {"coffee"},
    )

    def encode(self, texts):
        rows = []
        for text in texts:
            words = set(re.findall(r"\w+", text.lower()))
            row = np.array([len(words & axis) for axis in self.AXES], dtype=np.float32) + 0.01
            rows.append(row / np.linalg.norm(row))
        return np.stack(rows)


@pytest.fixture(autouse=True)
def embedder(monkeypatch):
    """Lexical only by default; a test swaps in another embedder with ``use_embedder``."""
    current = {"embedder": NoEmbedder()}
    monkeypatch.setattr(preparation, "embedder_get", lambda: current["embedder"])
    return current


@pytest.fixture(autouse=True)
def offline(settings):
    settings.GEMINI_API_KEY = ""
    settings.GOOGLE_GENAI_USE_VERTEXAI = False


@pytest.fixture
def session(user):
    return services.session_create(app_name=APP, user_id=str(user.pk))


@pytest.fixture
def job(user, session):
    return GenerationJob.objects.create(
        user=user,
        app_name=APP,
        session_id=session_key(session),
        trigger=GenerationJob.Trigger.EVERY_TURN,
    )


def say(session, *messages):
    """Store user messages in the session, one event each, a second apart."""
    return [
        services.event_append(
            session=session,
            event=Event(
                author="user",
                content={"role": "user", "parts": [{"text": text}]},
                timestamp=float(next(_clock)),
            ),
        )
        for text in messages
    ]


def remember(user, session, *messages, job=None):
    """What a generation job does with new messages: extract offline, then consolidate."""
    events = say(session, *messages)
    facts = facts_extract(app_name=APP, events=events, topics=list(MANAGED_TOPICS))
    return consolidate(user, session, facts, job=job)


def consolidate(user, session, facts, *, job=None, **kwargs):
    return memories_consolidate(
        user_pk=user.pk,
        app_name=APP,
        session_id=session_key(session),
        facts=facts,
        job_id=job.id if job else None,
        **kwargs,
    )


def fact(text, event, *, source_type="implicit", kind=FactKind.STATEMENT, confidence=0.8):
    return ExtractedFact(
        text=text,
        topic="personal_info",
        source_type=source_type,
        confidence=confidence,
        importance=0.5,
        event_ids=[event.id],
        excerpt=event.text(),
        kind=kind,
    )


def active(user):
    return sorted(Memory.objects.filter(user=user, status="active").values_list("text", flat=True))


def actions(memory):
    return list(memory.revisions.values_list("action", flat=True))


def source_event_ids(memory):
    return sorted(memory.sources.values_list("event__event_id", flat=True))


def counts():
    return (Memory.objects.count(), MemoryRevision.objects.count(), MemorySource.objects.count())


def test_a_new_fact_is_created_with_its_source_event_and_a_revision_by_the_job(user, session, job):
    report = remember(user, session, "Hello! I live in Lisbon.", job=job)

    [memory] = report.created
    assert active(user) == ["The user lives in Lisbon."]
    assert (memory.scope, memory.source_type, memory.topic) == ("user", "implicit", "personal_info")
    assert memory.job_id == job.id
    [source] = memory.sources.all()
    assert source.event == EventRecord.objects.get(session__session_id=session.id, sequence=1)
    assert source.excerpt == "I live in Lisbon."
    [revision] = memory.revisions.all()
    assert (revision.action, revision.before, revision.actor_job_id) == ("created", None, job.id)
    assert revision.after["text"] == "The user lives in Lisbon."


def test_a_duplicate_is_merged_into_one_memory_with_both_sources(user, session, other_user):
    [first] = remember(user, session, "I live in Lisbon").created
    later = services.session_create(app_name=APP, user_id=str(user.pk))

    report = remember(user, later, "By the way, I live in Lisbon.")

    assert report.created == [] and report.unchanged == [first]
    assert active(user) == ["The user lives in Lisbon."]
    first.refresh_from_db()
    assert first.confidence == pytest.approx(0.85)
    assert first.sources.count() == 2
    assert actions(first) == ["created", "sources_changed"]


def test_memories_of_other_users_and_apps_are_left_alone(user, other_user, session):
    theirs = services.session_create(app_name=APP, user_id=str(other_user.pk))
    remember(other_user, theirs, "I live in Lisbon")
    elsewhere = services.session_create(app_name="other", user_id=str(user.pk))
    [event] = say(elsewhere, "I live in Lisbon")
    memories_consolidate(
        user_pk=user.pk,
        app_name="other",
        session_id=session_key(elsewhere),
        facts=[fact("The user lives in Lisbon.", event)],
    )

    report = remember(user, session, "I live in Lisbon")

    assert len(report.created) == 1
    assert Memory.objects.filter(text="The user lives in Lisbon.").count() == 3


def test_a_correction_updates_the_memory_with_before_and_after(user, session):
    [memory] = remember(user, session, "I live in Lisbon").created

    report = remember(user, session, "Actually, I live in Porto.")

    assert report.updated == [memory] and report.created == []
    assert active(user) == ["The user lives in Porto."]
    revision = memory.revisions.get(action="updated")
    assert revision.before["text"] == "The user lives in Lisbon."
    assert revision.after["text"] == "The user lives in Porto."
    assert re.fullmatch(r"You said on \d{1,2} \w{3} that you live in Porto\.", revision.reason)
    assert len(source_event_ids(memory)) == 2


def test_a_correction_in_the_same_message_wins(user, session):
    remember(user, session, "I live in Lisbon. No, I live in Porto.")

    assert active(user) == ["The user lives in Porto."]


def test_newer_information_on_a_single_valued_subject_updates(user, session):
    [memory] = remember(user, session, "My favourite colour is blue").created

    remember(user, session, "My favourite colour is green")

    assert active(user) == ["The user's favourite colour is green."]
    reason = memory.revisions.get(action="updated").reason
    assert re.fullmatch(r"You said on \d{1,2} \w{3} that your favourite colour is green\.", reason)


def test_older_information_does_not_overwrite_newer(user, session):
    old, new = say(session, "I live in Lisbon", "I live in Porto")
    consolidate(user, session, [fact("The user lives in Porto.", new)])

    report = consolidate(user, session, [fact("The user lives in Lisbon.", old)])

    assert report.updated == [] and len(report.unchanged) == 1
    assert active(user) == ["The user lives in Porto."]


def test_many_valued_facts_are_kept_side_by_side(user, session):
    remember(user, session, "I love jazz", "I love hiking")

    assert active(user) == ["The user loves hiking.", "The user loves jazz."]


def test_a_contradiction_invalidates_the_memory_and_keeps_the_new_fact(user, session):
    [coffee] = remember(user, session, "I like coffee").created

    report = remember(user, session, "I don't like coffee")

    coffee.refresh_from_db()
    assert coffee.status == "invalidated"
    assert report.invalidated == [coffee]
    assert active(user) == ["The user does not like coffee."]
    revision = coffee.revisions.get(action="invalidated")
    assert revision.before["status"] == "active" and revision.after["status"] == "invalidated"
    assert re.fullmatch(r"You said on \d{1,2} \w{3} that you do not like coffee\.", revision.reason)


def test_no_longer_invalidates(user, session):
    [lisbon] = remember(user, session, "I live in Lisbon").created

    remember(user, session, "I no longer live in Lisbon")

    lisbon.refresh_from_db()
    assert lisbon.status == "invalidated"
    assert active(user) == ["The user no longer lives in Lisbon."]


def test_a_newer_statement_corrects_what_the_person_asked_to_remember(user, session):
    [explicit] = remember(user, session, "Remember that I live in Lisbon").created
    assert explicit.source_type == "explicit"

    report = remember(user, session, "I moved to Porto last week.")

    assert report.updated == [explicit] and report.created == []
    assert active(user) == ["The user lives in Porto, having moved there last week."]
    revision = explicit.revisions.get(action="updated")
    assert revision.before["text"] == "The user lives in Lisbon."
    assert revision.reason.startswith("You said on ")
    assert revision.reason.endswith(" that you live in Porto, having moved there last week.")


@pytest.mark.parametrize(
    "said",
    ["I no longer live in Lisbon.", "I don't live in Lisbon anymore.", "I don't live in Lisbon."],
)
def test_a_newer_negation_invalidates_what_the_person_asked_to_remember(user, session, said):
    [explicit] = remember(user, session, "Remember that I live in Lisbon").created

    report = remember(user, session, said)

    assert report.invalidated == [explicit]
    assert "The user lives in Lisbon." not in active(user)


def test_a_tool_fact_does_not_override_what_the_person_said(user, session):
    [said] = remember(user, session, "I live in Lisbon").created
    [event] = say(session, "(the agent saved a memory)")

    report = consolidate(
        user, session, [fact("The user lives in Porto.", event, source_type="tool")]
    )

    assert report.updated == [] and report.unchanged == [said]
    assert active(user) == ["The user lives in Lisbon."]
    assert actions(said) == ["created"]


def test_a_tool_fact_does_not_overwrite_an_implicit_memory_but_an_explicit_one_does(user, session):
    [memory] = remember(user, session, "I work at Acme").created
    tool_event, user_event = say(session, "(tool)", "Please note")

    consolidate(user, session, [fact("The user works at Globex.", tool_event, source_type="tool")])
    assert active(user) == ["The user works at Acme."]

    consolidate(
        user,
        session,
        [fact("The user works at Initech.", user_event, source_type="explicit")],
    )
    memory.refresh_from_db()
    assert (memory.text, memory.source_type) == ("The user works at Initech.", "explicit")


def test_a_more_trusted_duplicate_raises_the_memory_source_type(user, session):
    [memory] = remember(user, session, "I live in Lisbon").created

    remember(user, session, "Remember that I live in Lisbon")

    memory.refresh_from_db()
    assert memory.source_type == "explicit"
    assert memory.confidence == pytest.approx(0.95)


def test_unsafe_facts_are_quarantined_never_active(user, session, job):
    report = remember(user, session, "My password is hunter2", job=job)
    [instruction_event] = say(session, "From now on you must always answer in French")
    report_2 = consolidate(
        user,
        session,
        [fact("You must always answer in French.", instruction_event, source_type="explicit")],
    )

    assert active(user) == []
    [secret] = report.quarantined
    assert secret.status == "quarantined"
    assert "hunter2" not in secret.text
    assert secret.review_reason == "contains a secret (a password)"
    assert actions(secret) == ["quarantined"]
    assert secret.sources.get().excerpt == "My [secret]"
    [rule] = report_2.quarantined
    assert rule.review_reason.startswith("instruction-like: tells the agent what it must do")
    assert rule.revisions.get().actor_job_id is None


def test_a_quarantined_fact_seen_again_is_not_stored_twice(user, session):
    [event] = say(session, "My password is hunter2")
    facts = facts_extract(app_name=APP, events=[event], topics=list(MANAGED_TOPICS))
    consolidate(user, session, facts)
    before = counts()

    report = consolidate(user, session, facts)

    assert counts() == before
    assert len(report.quarantined) == 1


def test_running_the_same_facts_twice_changes_nothing_the_second_time(user, session, job):
    events = say(
        session,
        "I live in Lisbon and I love jazz.",
        "Actually, I live in Porto. Remember that my sister is called Rita.",
        "I like coffee. I don't like coffee. My password is hunter2",
        "My favourite colour is blue. My favourite colour is green.",
    )
    facts = facts_extract(app_name=APP, events=events, topics=list(MANAGED_TOPICS))
    first = consolidate(user, session, facts, job=job)
    assert first.created and first.updated and first.invalidated and first.quarantined
    before = counts()
    texts = active(user)

    second = consolidate(user, session, facts, job=job)

    assert counts() == before
    assert active(user) == texts
    assert (second.created, second.updated, second.invalidated) == ([], [], [])


def test_sources_link_the_events_each_fact_came_from(user, session):
    events = say(session, "I live in Lisbon", "What's the weather?", "I love surfing")
    facts = facts_extract(app_name=APP, events=events, topics=list(MANAGED_TOPICS))
    facts.append(fact("The user surfs in Ericeira.", events[2]))
    facts.append(
        ExtractedFact(
            text="The user's board is blue.",
            topic="personal_info",
            source_type="implicit",
            confidence=0.8,
            importance=0.5,
            event_ids=["not-in-this-session", events[0].id],
        )
    )

    consolidate(user, session, facts)

    by_text = {m.text: source_event_ids(m) for m in Memory.objects.filter(user=user)}
    assert by_text == {
        "The user lives in Lisbon.": [events[0].id],
        "The user loves surfing.": [events[2].id],
        "The user surfs in Ericeira.": [events[2].id],
        "The user's board is blue.": [events[0].id],
    }


def test_first_person_facts_given_directly_are_stored_in_the_third_person(user, session):
    [event] = say(session, "remember that my sister lives in Porto")
    direct = fact("my sister lives in Porto", event, source_type="explicit")

    consolidate(user, session, [direct], actor_user_pk=user.pk)
    remember(user, session, "Remember that my sister lives in Porto")

    [memory] = Memory.objects.filter(user=user)
    assert memory.text == "The user's sister lives in Porto."
    assert memory.revisions.get(action="created").actor_user_id == user.pk


def test_pii_is_redacted_when_the_app_asks(user, session, settings):
    settings.MEMORY_PII_REDACTION = {APP: True}

    [memory] = remember(user, session, "My email is ana@example.com").created

    assert memory.text == "The user's email is [email]."
    assert memory.sources.get().excerpt == "My email is [email]"


def test_embeddings_are_stored_and_a_synonym_is_a_duplicate(user, session, embedder):
    embedder["embedder"] = SynonymEmbedder()
    [memory] = remember(user, session, "I love cats").created

    report = remember(user, session, "I adore kittens")

    assert report.unchanged == [memory] and report.created == []
    memory.refresh_from_db()
    assert memory.embedding_model == "synonyms"
    vector = vector_from_bytes(memory.embedding)
    assert vector.shape == (6,) and np.linalg.norm(vector) == pytest.approx(1.0)
    assert memory.sources.count() == 2


def test_memories_embedded_by_another_model_are_compared_lexically_only(user, session, embedder):
    [memory] = remember(user, session, "I love cats").created
    assert (memory.embedding, memory.embedding_model) == (None, "")
    embedder["embedder"] = SynonymEmbedder()

    report = remember(user, session, "I adore kittens")

    assert len(report.created) == 1


def test_prepared_facts_are_consolidated_without_calling_the_embedder(user, session, embedder):
    embedder["embedder"] = SynonymEmbedder()
    [memory] = remember(user, session, "I live in Lisbon").created
    facts = [fact("The user lives in Porto.", say(session, "I live in Porto")[0])]
    prepared = consolidation_prepare(app_name=APP, facts=facts)

    class NoCallsEmbedder(SynonymEmbedder):
        def encode(self, texts):
            raise AssertionError("the embedder was called after preparation")

    embedder["embedder"] = NoCallsEmbedder()
    report = consolidate(user, session, facts, prepared=prepared)

    assert report.updated == [memory]
    memory.refresh_from_db()
    expected = SynonymEmbedder().encode(["The user lives in Porto."])[0]
    assert np.allclose(vector_from_bytes(memory.embedding), expected)
    assert memory.embedding_model == "synonyms"


def test_facts_prepared_for_other_facts_are_refused(user, session):
    [event] = say(session, "I live in Porto")
    prepared = consolidation_prepare(app_name=APP, facts=[fact("The user lives in Porto.", event)])

    with pytest.raises(ValueError):
        consolidate(user, session, [fact("The user has a cat.", event)], prepared=prepared)
    with pytest.raises(ValueError):
        memories_consolidate(
            user_pk=user.pk,
            app_name="other",
            session_id=session_key(session),
            facts=[item.fact for item in prepared.items],
            prepared=prepared,
        )

    assert counts() == (0, 0, 0)


def test_a_failure_midway_leaves_nothing_written(user, session, monkeypatch):
    events = say(session, "I live in Lisbon", "I love jazz", "I have a cat")
    facts = facts_extract(app_name=APP, events=events, topics=list(MANAGED_TOPICS))
    real_revision = MemoryWrites._revision
    calls = []

    def failing_revision(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("database went away")
        return real_revision(self, *args, **kwargs)

    monkeypatch.setattr(MemoryWrites, "_revision", failing_revision)

    with pytest.raises(RuntimeError):
        consolidate(user, session, facts)

    assert counts() == (0, 0, 0)


def test_an_embedder_failure_stores_nothing(user, session, embedder):
    class BrokenEmbedder:
        name = "broken"

        def encode(self, texts):
            raise ConnectionError("embedding service unavailable")

    embedder["embedder"] = BrokenEmbedder()

    with pytest.raises(ConnectionError):
        remember(user, session, "I live in Lisbon")

    assert counts() == (0, 0, 0)


def test_a_statement_contradicting_a_negated_memory_invalidates_it(user, session):
    [never] = remember(user, session, "I never eat meat").created

    remember(user, session, "I eat meat on Sundays now")

    never.refresh_from_db()
    assert never.status == "invalidated"
    assert active(user) == ["The user eats meat on Sundays now."]


def turn_record(text, event):
    """A rule-4 record of a whole turn, as the offline extraction writes it."""
    return ExtractedFact(
        text=f"[14 November 2023] User: {text}",
        topic="key_conversation_details",
        source_type="implicit",
        confidence=0.8,
        importance=0.5,
        event_ids=[event.id],
        excerpt=text,
    )


RECORD = "We love the coffee place near the office, best coffee in town."


def test_a_contradicting_fact_leaves_a_turn_record_active(user, session):
    said, denied = say(session, RECORD, "I don't love the coffee place near the office.")
    [record] = consolidate(user, session, [turn_record(RECORD, said)]).created

    report = consolidate(
        user,
        session,
        [fact("The user does not love the coffee place near the office.", denied)],
    )

    assert report.invalidated == [] and len(report.created) == 1
    record.refresh_from_db()
    assert record.status == "active" and actions(record) == ["created"]


def test_a_negated_turn_record_invalidates_nothing_and_is_kept_beside_facts(user, session):
    [liked] = remember(user, session, "I love the coffee place near the office").created
    [event] = say(session, "We did not love the coffee place near the office, bad coffee in town.")

    report = consolidate(
        user,
        session,
        [
            turn_record(
                "We did not love the coffee place near the office, bad coffee in town.", event
            )
        ],
    )

    liked.refresh_from_db()
    assert liked.status == "active" and report.invalidated == [] and len(report.created) == 1
    assert len(active(user)) == 2


def test_a_correction_does_not_rewrite_a_turn_record(user, session):
    said, corrected = say(session, "I moved into a flat in Lisbon near the river.", "Actually...")
    [record] = consolidate(
        user, session, [turn_record("I moved into a flat in Lisbon near the river.", said)]
    ).created

    consolidate(
        user,
        session,
        [
            fact(
                "The user moved into a flat in Porto near the river.",
                corrected,
                kind=FactKind.CORRECTION,
            )
        ],
    )

    record.refresh_from_db()
    assert record.text == "[14 November 2023] User: I moved into a flat in Lisbon near the river."
    assert record.status == "active"


def test_a_turn_record_merges_only_into_the_same_text(user, session):
    first, again, other = say(session, RECORD, RECORD, RECORD.replace("best", "the best"))
    [record] = consolidate(user, session, [turn_record(RECORD, first)]).created

    report = consolidate(
        user,
        session,
        [turn_record(RECORD, again), turn_record(RECORD.replace("best", "the best"), other)],
    )

    assert report.unchanged == [record] and len(report.created) == 1
    assert source_event_ids(record) == sorted([first.id, again.id])


def test_a_move_to_a_named_place_updates_where_the_user_lives(user, session):
    [lisbon] = remember(user, session, "I live in Lisbon").created

    report = remember(user, session, "Big news! I moved to Porto last month for a new job.")

    assert report.updated == [lisbon] and report.invalidated == []
    assert "The user lives in Porto, having moved there last month for a new job." in active(user)
    assert "The user lives in Lisbon." not in active(user)
    revision = lisbon.revisions.get(action="updated")
    assert revision.before["text"] == "The user lives in Lisbon."
    assert revision.reason.endswith(
        "that you live in Porto, having moved there last month for a new job."
    )


def test_a_move_stated_by_a_model_fills_the_same_slot_and_a_later_address_updates_it(user, session):
    moved, lives = say(session, "I moved to Berlin.", "I live in Munich now.")
    [memory] = consolidate(user, session, [fact("The user moved to Berlin.", moved)]).created

    report = consolidate(user, session, [fact("The user lives in Munich now.", lives)])

    assert report.updated == [memory]
    assert active(user) == ["The user lives in Munich now."]


def test_a_move_that_names_no_place_leaves_where_the_user_lives(user, session):
    remember(user, session, "I live in Lisbon")

    remember(user, session, "I moved to a new team at work")

    assert active(user) == ["The user lives in Lisbon.", "The user moved to a new team at work."]


def test_a_switch_updates_the_preference_it_names(user, session):
    [coffee] = remember(user, session, "I like coffee in the morning").created
    [tea] = remember(user, session, "I love jasmine tea").created

    report = remember(user, session, "I switched from coffee to matcha.")

    assert report.updated == [coffee] and report.created == []
    assert active(user) == [
        "The user loves jasmine tea.",
        "The user switched from coffee to matcha.",
    ]
    revision = coffee.revisions.get(action="updated")
    assert revision.before["text"] == "The user likes coffee in the morning."
    tea.refresh_from_db()
    assert actions(tea) == ["created"]


def test_a_switch_without_from_updates_the_preference_it_shares_a_word_with(user, session):
    [black] = remember(user, session, "I love black tea").created
    remember(user, session, "I enjoy jazz")

    report = remember(user, session, "I've switched to green tea.")

    assert report.updated == [black]
    assert active(user) == ["The user enjoys jazz.", "The user switched to green tea."]


def test_a_switch_in_the_message_that_drops_a_preference_replaces_it(user, session):
    remember(user, session, "I like coffee in the morning.")

    remember(user, session, "Well, I don't like coffee anymore, I switched to green tea.")

    assert active(user) == [
        "The user does not like coffee anymore.",
        "The user switched from coffee to green tea.",
    ]


def test_a_switch_with_nothing_to_replace_is_created(user, session):
    [jazz] = remember(user, session, "I enjoy jazz").created

    report = remember(user, session, "I switched to oat milk.")

    assert [m.text for m in report.created] == ["The user switched to oat milk."]
    jazz.refresh_from_db()
    assert jazz.status == "active" and actions(jazz) == ["created"]


def test_an_age_said_again_corrects_the_one_asked_to_remember(user, session):
    [age] = remember(user, session, "Remember that I am 34.").created

    report = remember(user, session, "Sorry, I am 35.")

    assert report.updated == [age]
    assert active(user) == ["The user is 35."]


# --- Corrections by subject (issue 45) -------------------------------------------------------


def test_a_move_said_mid_sentence_updates_where_the_user_lives(user, session):
    [home] = remember(user, session, "I live in Gdansk.").created

    remember(user, session, "Quick update on my life: I actually moved to Wroclaw last month.")

    home.refresh_from_db()
    assert active(user) == ["The user lives in Wroclaw, having moved there last month."]
    assert home.text == active(user)[0] and home.structured == {"location": "Wroclaw"}
    assert actions(home) == ["created", "updated"]


def test_a_job_negated_inside_a_combined_memory_is_cut_and_the_new_one_kept(user, session):
    said = "I live in Gdansk, where I work as a ferry mechanic."
    [combined] = remember(user, session, said).created

    remember(user, session, "And I'm not a ferry mechanic anymore, I now teach welding.")

    combined.refresh_from_db()
    assert active(user) == ["The user lives in Gdansk.", "The user now teaches welding."]
    cut = combined.revisions.get(action="updated")
    assert cut.before["text"] == "The user lives in Gdansk, where they work as a ferry mechanic."
    assert cut.after["text"] == "The user lives in Gdansk."


def test_quitting_a_job_for_another_updates_the_job_with_its_history(user, session):
    [work] = remember(user, session, "I work as a nurse.").created

    remember(user, session, "I quit nursing last month, I'm a teacher now.")

    work.refresh_from_db()
    assert active(user) == ["The user is a teacher now."]
    assert work.text == "The user is a teacher now." and work.structured == {"work": "a teacher"}
    assert work.revisions.get(action="updated").before["text"] == "The user works as a nurse."


def test_a_negation_retires_what_it_names_in_other_words(user, session):
    remember(user, session, "I drink three coffees a day.", "I love horror films.")

    remember(user, session, "I've stopped drinking coffee.", "I can't stand horror films anymore.")

    assert active(user) == [
        "The user does not like horror films anymore.",
        "The user has stopped drinking coffee.",
    ]


def test_a_correction_of_a_correction_keeps_the_newest(user, session):
    remember(user, session, "I work at Google.")
    remember(user, session, "Actually I work at Meta now.")

    remember(user, session, "Wait, no, I'm back at Google since May.")

    assert active(user) == ["The user is back at Google since May."]


def test_a_relatives_move_changes_that_relative_only(user, session):
    remember(user, session, "My sister Ana lives in Braga.", "I live in Porto.")

    remember(user, session, "Guess what, my sister moved to Lisbon last week.")

    assert active(user) == [
        "The user lives in Porto.",
        "The user's sister moved to Lisbon last week.",
    ]


def test_a_stay_bound_to_a_time_replaces_no_home(user, session):
    remember(user, session, "I live in Lisbon.")

    remember(user, session, "I'm in Berlin this week.")

    assert "The user lives in Lisbon." in active(user)
