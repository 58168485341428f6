"""Extraction as callers see it: the offline rules one by one, and Gemini structured output."""

import json
from datetime import UTC, datetime

import pytest

from core.llm import ModelError
from memory_app.extraction import (
    ExtractedFact,
    FactKind,
    fact_is_turn_record,
    fact_subject,
    fact_switch,
    fact_text_normalise,
    fact_topic,
    facts_extract,
)
from memory_app.models import Memory
from memory_app.services import memory_job_request, memory_job_run
from memory_app.topics import KEY_CONVERSATION_DETAILS, MANAGED_TOPICS, TopicSpec
from sessions_app.events import Event
from tests.fake_gemini import HttpError, Reply, final_chunk, text_chunk
from tests.memory_app.support import lexical_only, session_make, turn_add  # noqa: F401

APP = "chat"


def user_says(text, *, event_id=None):
    event = Event(author="user", content={"role": "user", "parts": [{"text": text}]})
    if event_id:
        event.id = event_id
    return event


def agent_says(text):
    return Event(author="assistant", content={"role": "model", "parts": [{"text": text}]})


def agent_calls(name, args):
    return Event(
        author="assistant",
        content={"role": "model", "parts": [{"function_call": {"name": name, "args": args}}]},
    )


@pytest.fixture
def offline(settings):
    settings.GEMINI_API_KEY = ""
    settings.GOOGLE_GENAI_USE_VERTEXAI = False


def extract(*events, topics=MANAGED_TOPICS):
    return facts_extract(app_name=APP, events=list(events), topics=list(topics))


def extracted(text):
    """(text, kind, source type, topic) of each fact one user message yields offline."""
    return [
        (fact.text, fact.kind, fact.source_type, fact.topic) for fact in extract(user_says(text))
    ]


@pytest.mark.usefixtures("offline")
class TestOfflineRules:
    @pytest.mark.parametrize(
        ("said", "memory"),
        [
            ("I live in Lisbon.", "The user lives in Lisbon."),
            ("I'm a nurse", "The user is a nurse."),
            ("I am allergic to peanuts!", "The user is allergic to peanuts."),
            ("I'm living in Berlin", "The user lives in Berlin."),
            ("I work at Acme as a designer", "The user works at Acme as a designer."),
            ("Oh, I also study at MIT", "The user also studies at MIT."),
            ("I have a dog named Rex", "The user has a dog named Rex."),
            ("I moved to Berlin in May", "The user lives in Berlin, having moved there in May."),
            ("I moved to a new team at work", "The user moved to a new team at work."),
            ("My name's Ana", "The user's name is Ana."),
            ("My daughter's school is Escola Azul", "The user's daughter's school is Escola Azul."),
        ],
    )
    def test_first_person_facts_become_implicit_personal_info(self, said, memory):
        assert extracted(said) == [(memory, FactKind.STATEMENT, "implicit", "personal_info")]

    @pytest.mark.parametrize(
        ("said", "memory"),
        [
            (
                "Hi! I moved to Lisbon last year for a job at Feedzai.",
                "The user lives in Lisbon, having moved there last year for a job at Feedzai.",
            ),
            (
                "I've moved from Lisbon to Porto.",
                "The user lives in Porto, having moved there from Lisbon.",
            ),
            (
                "I just moved to New York City in 2019 with my wife",
                "The user lives in New York City, having moved there in 2019 with their wife.",
            ),
            (
                "We did it, I moved to the Bay Area, so tired",
                "The user lives in the Bay Area, having moved there.",
            ),
        ],
    )
    def test_a_move_to_a_named_place_says_where_the_user_lives(self, said, memory):
        assert (memory, FactKind.STATEMENT, "implicit", "personal_info") in extracted(said)
        assert fact_subject(text=memory) == "the user lives in"

    @pytest.mark.parametrize(
        ("said", "memory"),
        [
            ("I switched to green tea.", "The user switched to green tea."),
            (
                "I've switched from Android to an iPhone",
                "The user switched from Android to an iPhone.",
            ),
            ("I just changed over to oat milk", "The user switched to oat milk."),
        ],
    )
    def test_a_switch_is_a_lasting_preference(self, said, memory):
        assert extracted(said) == [(memory, FactKind.STATEMENT, "explicit", "preferences")]

    def test_a_switch_names_what_the_same_message_said_is_no_longer_liked(self):
        said = "Well, I don't like coffee anymore, I switched to green tea."

        assert [text for text, *_ in extracted(said)] == [
            "The user does not like coffee anymore.",
            "The user switched from coffee to green tea.",
        ]
        assert fact_switch(text="The user switched from coffee to green tea.") == (
            "coffee",
            "green tea",
        )
        assert fact_switch(text="The user switched to tea.") == ("", "tea")
        assert fact_switch(text="The user likes tea.") is None

    @pytest.mark.parametrize(
        ("said", "memories"),
        [
            ("Actually, I live in Porto, I mixed that up.", ["The user lives in Porto."]),
            ("To be honest, I prefer tea", ["The user prefers tea."]),
        ],
    )
    def test_a_clause_after_a_comma_is_its_own_sentence_unless_an_opening_word(
        self, said, memories
    ):
        assert [text for text, *_ in extracted(said)] == memories

    @pytest.mark.parametrize(
        ("said", "memory"),
        [
            ("I love hiking with my dog", "The user loves hiking with their dog."),
            ("I prefer tea.", "The user prefers tea."),
            ("I really hate cilantro", "The user really hates cilantro."),
            ("My favourite colour is blue", "The user's favourite colour is blue."),
        ],
    )
    def test_likes_and_favourites_are_preferences(self, said, memory):
        assert extracted(said) == [(memory, FactKind.STATEMENT, "implicit", "preferences")]

    @pytest.mark.parametrize(
        ("said", "memory"),
        [
            (
                "Remember that my passport expires in March.",
                "The user's passport expires in March.",
            ),
            ("please remember I'm allergic to peanuts", "The user is allergic to peanuts."),
            ("Don't forget that the dentist is on Monday", "The dentist is on Monday."),
            ("Keep in mind: I work nights", "The user works nights."),
            ("Don't forget that I grow tomatoes", "The user grows tomatoes."),
            ("remember that I usually wake at 6", "The user usually wakes at 6."),
            ("remember that I went to Paris in May", "The user went to Paris in May."),
            ("remember that I can swim", "The user can swim."),
        ],
    )
    def test_remember_requests_are_explicit_and_confident(self, said, memory):
        [fact] = extract(user_says(said))

        assert (fact.text, fact.source_type) == (memory, "explicit")
        # Remembered on request, filed under what it is about (issue 13).
        expected_topic = (
            "explicit_instructions" if memory.startswith("The dentist") else "personal_info"
        )
        assert fact.topic == expected_topic
        assert fact.confidence == 0.95
        assert fact.importance == 0.8

    @pytest.mark.parametrize(
        ("said", "memory"),
        [
            ("Actually, I live in Porto", "The user lives in Porto."),
            ("No, my name is Rita.", "The user's name is Rita."),
            ("I live not in Lisbon but in Porto", "The user lives in Porto."),
            ("My favourite colour is not blue but green", "The user's favourite colour is green."),
            ("I'm not a doctor but a nurse", "The user is a nurse."),
        ],
    )
    def test_corrections_are_marked_and_keep_only_the_new_value(self, said, memory):
        [(text, kind, source_type, _topic)] = extracted(said)

        assert (text, kind, source_type) == (memory, FactKind.CORRECTION, "explicit")

    @pytest.mark.parametrize(
        ("said", "memory", "source_type"),
        [
            ("I no longer live in Lisbon", "The user no longer lives in Lisbon.", "explicit"),
            (
                "I don't work at Acme anymore",
                "The user does not work at Acme anymore.",
                "explicit",
            ),
            ("I don't like coffee", "The user does not like coffee.", "implicit"),
            ("I never eat meat", "The user never eats meat.", "implicit"),
        ],
    )
    def test_negated_statements_are_retractions(self, said, memory, source_type):
        [(text, kind, fact_source, _topic)] = extracted(said)

        assert (text, kind, fact_source) == (memory, FactKind.RETRACTION, source_type)

    @pytest.mark.parametrize(
        "said",
        [
            "I'm tired",
            "I'm not sure",
            "I'm trying to write a poem",
            "I love it!",
            "I'd like a summary",
            "I have to go",
            "I have a question",
            "My question is simple",
            "Remember to buy milk",
            "What is the capital of France?",
            "Paris is lovely in spring.",
        ],
    )
    def test_chatter_questions_and_passing_states_yield_no_fact_about_the_user(self, said):
        topics = {topic for _text, _kind, _source, topic in extracted(said)}

        assert topics <= {KEY_CONVERSATION_DETAILS}

    def test_each_sentence_is_read_and_cites_its_event_with_the_sentence_as_excerpt(self):
        event = user_says("Hi! I live in Lisbon. And I love surfing; what should I pack?")

        facts = extract(event)

        assert [fact.text for fact in facts] == [
            "The user lives in Lisbon.",
            "The user loves surfing.",
        ]
        assert all(fact.event_ids == [event.id] for fact in facts)
        assert [fact.excerpt for fact in facts] == ["I live in Lisbon.", "And I love surfing;"]

    def test_only_user_text_is_read_and_tools_yield_only_create_memory_calls(self):
        call = agent_calls("create_memory", {"text": "my sister lives in Porto"})
        facts = extract(
            agent_says("I live in the cloud and I love helping."),
            agent_calls("set_state", {"key": "user:city", "value": "Lisbon"}),
            call,
            agent_calls("create_memory", {"text": "  "}),
        )

        assert facts == [
            ExtractedFact(
                text="The user's sister lives in Porto.",
                topic="personal_info",
                source_type="tool",
                confidence=0.8,
                importance=0.8,
                event_ids=[call.id],
                excerpt="my sister lives in Porto",
            )
        ]

    def test_facts_of_a_topic_the_app_turned_off_are_dropped(self):
        topics = [topic for topic in MANAGED_TOPICS if topic.key != "preferences"]

        facts = extract(
            user_says("I live in Lisbon and I love surfing. I prefer tea."), topics=topics
        )

        assert [fact.text for fact in facts] == ["The user lives in Lisbon."]


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("my sister lives in Lisbon", "The user's sister lives in Lisbon."),
        ("I'm going to Rome in May", "The user is going to Rome in May."),
        ("I love  jazz", "The user loves jazz."),
        ("the dentist is on Monday", "The dentist is on Monday."),
        ("The user likes tea.", "The user likes tea."),
    ],
)
def test_fact_text_normalise_writes_facts_in_the_third_person(text, normalised):
    assert fact_text_normalise(text=text) == normalised


TRAVEL = TopicSpec(
    key="travel",
    label="Travel",
    description="Trips the user plans or takes.",
    few_shot_examples=({"text": "Flying to Rome on the 3rd", "memory": "The user flies to Rome."},),
)


def gemini_answers(fake_gemini, answer):
    fake_gemini.push(Reply([text_chunk(json.dumps(answer)), final_chunk()]))


class TestGemini:
    def test_the_request_carries_topics_examples_schema_and_event_ids(self, fake_gemini):
        first = user_says("I'm flying to Rome next week")
        second = agent_says("Nice! Window seat?")
        gemini_answers(fake_gemini, {"facts": []})

        assert extract(first, second, topics=[*MANAGED_TOPICS, TRAVEL]) == []

        [request] = fake_gemini.requests
        assert request.action == "generateContent"
        system = request.system_text()
        assert "travel (Travel): Trips the user plans or takes." in system
        assert '"Flying to Rome on the 3rd" -> "The user flies to Rome."' in system
        assert "personal_info (Personal information)" in system
        config = request.body["generationConfig"]
        assert config["responseMimeType"] == "application/json"
        item = config["responseJsonSchema"]["properties"]["facts"]["items"]
        assert item["properties"]["topic"]["enum"] == [
            "personal_info",
            "preferences",
            "key_conversation_details",
            "explicit_instructions",
            "travel",
        ]
        assert set(item["required"]) >= {"topic", "source_type", "confidence", "event_ids"}
        conversation = json.dumps(request.body["contents"])
        assert f"[{first.id}] user: I'm flying to Rome next week" in conversation
        assert f"[{second.id}] assistant (assistant): Nice! Window seat?" in conversation

    def test_the_parsed_facts_come_back_grounded_in_known_events(self, fake_gemini):
        event = user_says("I'm flying to Rome next week, remember I hate middle seats")
        gemini_answers(
            fake_gemini,
            {
                "facts": [
                    {
                        "text": "The user is flying to Rome next week.",
                        "topic": "travel",
                        "source_type": "implicit",
                        "kind": "statement",
                        "confidence": 0.85,
                        "importance": 1.4,
                        "event_ids": [event.id, "invented-id"],
                        "excerpt": "I'm flying to Rome next week",
                    },
                    {
                        "text": "The user hates middle seats.",
                        "topic": "preferences",
                        "source_type": "explicit",
                        "kind": "statement",
                        "confidence": 0.95,
                        "importance": 0.6,
                        "event_ids": [event.id],
                        "excerpt": "",
                    },
                    {
                        "text": "The user owns a plane.",
                        "topic": "personal_info",
                        "source_type": "implicit",
                        "kind": "statement",
                        "confidence": 0.3,
                        "importance": 0.3,
                        "event_ids": ["invented-id"],
                        "excerpt": "",
                    },
                ]
            },
        )

        facts = extract(event, topics=[*MANAGED_TOPICS, TRAVEL])

        assert facts == [
            ExtractedFact(
                text="The user is flying to Rome next week.",
                topic="travel",
                source_type="implicit",
                confidence=0.85,
                importance=1.0,
                event_ids=[event.id],
                excerpt="I'm flying to Rome next week",
            ),
            ExtractedFact(
                text="The user hates middle seats.",
                topic="preferences",
                source_type="explicit",
                confidence=0.95,
                importance=0.6,
                event_ids=[event.id],
                excerpt=event.text(),
            ),
        ]

    def test_create_memory_calls_are_tool_facts_with_gemini_too(self, fake_gemini):
        call = agent_calls("create_memory", {"text": "The user's cat is Miso"})
        gemini_answers(fake_gemini, {"facts": []})

        facts = extract(user_says("Remember my cat is Miso"), call)

        assert [(f.text, f.source_type, f.event_ids) for f in facts] == [
            ("The user's cat is Miso.", "tool", [call.id])
        ]

    def test_no_conversation_text_means_no_model_call(self, fake_gemini):
        assert extract(agent_calls("set_state", {"key": "k", "value": 1})) == []
        assert fake_gemini.requests == []

    @pytest.mark.parametrize(
        "answer",
        [
            "this is not JSON",
            json.dumps(["a list"]),
            json.dumps({"memories": []}),
            json.dumps({"facts": [{"text": "The user is 30.", "topic": "age"}]}),
            json.dumps(
                {
                    "facts": [
                        {
                            "text": "The user is 30.",
                            "topic": "personal_info",
                            "source_type": "bootstrapped",
                            "kind": "statement",
                            "confidence": 0.9,
                            "importance": 0.5,
                            "event_ids": [],
                            "excerpt": "",
                        }
                    ]
                }
            ),
            json.dumps(
                {
                    "facts": [
                        {
                            "text": "The user is 30.",
                            "topic": "personal_info",
                            "source_type": "implicit",
                            "kind": "statement",
                            "confidence": "high",
                            "importance": 0.5,
                            "event_ids": [],
                            "excerpt": "",
                        }
                    ]
                }
            ),
        ],
    )
    def test_invalid_output_is_a_non_transient_model_error(self, fake_gemini, answer):
        fake_gemini.push(Reply([text_chunk(answer), final_chunk()]))

        with pytest.raises(ModelError) as raised:
            extract(user_says("I am 30"))

        assert raised.value.code == "model_invalid_output"
        assert not raised.value.transient

    def test_transient_errors_propagate_for_the_job_layer_to_retry(self, fake_gemini):
        fake_gemini.push(HttpError(503, "overloaded"))

        with pytest.raises(ModelError) as raised:
            extract(user_says("I am 30"))

        assert raised.value.transient


MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC).timestamp()


@pytest.mark.usefixtures("offline")
class TestKeyConversationDetails:
    """Rule 4: a turn with substantive content beyond its first-person facts is kept whole,
    dated, with its speaker."""

    def test_a_substantive_turn_is_kept_with_its_date_speaker_and_event(self):
        event = user_says("We booked the Porto trip for June, three days.", event_id="e1")
        event.timestamp = MAY_8

        [fact] = extract(event)

        assert fact.text == "[8 May 2023] User: We booked the Porto trip for June, three days."
        assert (fact.topic, fact.source_type, fact.kind) == (
            KEY_CONVERSATION_DETAILS,
            "implicit",
            FactKind.STATEMENT,
        )
        assert fact.event_ids == ["e1"]
        assert fact.excerpt == "We booked the Porto trip for June, three days."

    def test_the_speaker_comes_from_the_event_metadata(self):
        event = user_says("Went to the LGBTQ support group yesterday, so powerful.")
        event.timestamp = MAY_8
        event.custom_metadata = {"speaker": "Caroline"}

        [fact] = extract(event)

        assert fact.text.startswith("[8 May 2023] Caroline: Went to the LGBTQ support group")

    @pytest.mark.parametrize(
        "said",
        [
            "Hi Mel!",
            "Thanks, that's great!",
            "Wow, cool!",
            "What did you do at the weekend? Anything fun with the kids?",
        ],
    )
    def test_greetings_acknowledgements_and_questions_are_not_kept(self, said):
        assert extract(user_says(said)) == []

    @pytest.mark.parametrize(
        "said",
        [
            "Hi there!",
            "Hello, how are you?",
            "Good morning",
            "Good morning! How's your day going?",
            "Hey Caroline, good to see you!",
            "Hi, I'm doing great, thanks for asking!",
            "I'm good, thanks! And you?",
            "Hey! Long time no see. How have you been?",
            "Thanks, have a great day!",
            "Bye, talk to you later! Have a great weekend!",
            "Good night, sleep well!",
        ],
    )
    def test_small_talk_yields_no_memory(self, said):
        assert extract(user_says(said)) == []

    def test_a_greeting_before_news_keeps_the_turn_as_said(self):
        event = user_says("Good morning! I'm training for a marathon in June.")
        event.timestamp = MAY_8

        assert [fact.text for fact in extract(event)] == [
            "[8 May 2023] User: Good morning! I'm training for a marathon in June."
        ]

    def test_a_greeting_before_a_fact_yields_the_fact_alone(self):
        assert [fact.text for fact in extract(user_says("Hi there! I live in Leeds."))] == [
            "The user lives in Leeds."
        ]

    def test_a_name_alone_with_words_of_small_talk_is_not_small_talk(self):
        event = user_says("Paris is great, we loved the museums.")
        event.timestamp = MAY_8

        assert [fact.text for fact in extract(event)] == [
            "[8 May 2023] User: Paris is great, we loved the museums."
        ]

    def test_a_turn_with_a_first_person_fact_yields_only_that_fact(self):
        assert extracted("I live in Lisbon with my wife and two cats.") == [
            (
                "The user lives in Lisbon with their wife and two cats.",
                FactKind.STATEMENT,
                "implicit",
                "personal_info",
            )
        ]

    def test_a_turn_with_a_fact_and_more_keeps_both_the_fact_and_the_whole_turn(self):
        event = user_says("I live in Lisbon. We adopted a puppy from the shelter last week.")
        event.timestamp = MAY_8

        assert [(fact.text, fact.topic) for fact in extract(event)] == [
            ("The user lives in Lisbon.", "personal_info"),
            (
                "[8 May 2023] User: I live in Lisbon. We adopted a puppy from the shelter "
                "last week.",
                KEY_CONVERSATION_DETAILS,
            ),
        ]

    def test_a_long_turn_is_cut_to_500_characters(self):
        [fact] = extract(user_says("Painting sunsets by the lake. " * 40))

        assert len(fact.text.split("] User: ", 1)[1]) == 500
        assert fact.text.endswith("…")

    def test_assistant_turns_are_not_kept(self):
        assert extract(agent_says("Porto has lovely bridges and port cellars.")) == []

    def test_no_record_when_the_app_turned_the_topic_off(self):
        topics = [t for t in MANAGED_TOPICS if t.key != KEY_CONVERSATION_DETAILS]

        assert extract(user_says("We booked the Porto trip for June."), topics=topics) == []


@pytest.mark.django_db
@pytest.mark.usefixtures("offline", "lexical_only")
def test_distinct_short_turns_of_one_session_stay_distinct_memories(user):
    session = session_make(user)
    turns = [
        "Went to the pottery class today.",
        "Went to the painting class today.",
        "Went to the pottery class today!",
    ]
    for text in turns:
        turn_add(session, text, reply=None)
    job = memory_job_request(
        app_name=APP, user_pk=user.pk, session_id=session.id, trigger="manual", enqueue=False
    )
    memory_job_run(job_id=str(job.id))

    memories = Memory.objects.filter(user=user).order_by("created_at")
    assert [m.text.split("] ", 1)[1] for m in memories] == [
        "User: Went to the pottery class today.",
        "User: Went to the painting class today.",
    ]
    assert [m.sources.count() for m in memories] == [2, 1]


@pytest.mark.usefixtures("offline")
def test_turn_records_are_recognised_by_topic_and_form():
    [record] = extract(user_says("We finally went to the coffee place near the office."))
    assert fact_is_turn_record(text=record.text, topic=record.topic)
    assert not fact_is_turn_record(text=record.text, topic="preferences")
    assert not fact_is_turn_record(
        text="The user went to the coffee place.", topic=KEY_CONVERSATION_DETAILS
    )


@pytest.mark.usefixtures("offline")
class TestRememberedOnce:
    """Issue 13: one "remember" makes one memory, under the topic of what it says."""

    def test_a_first_person_further_in_reads_as_the_user(self):
        assert fact_text_normalise(text="7 is my lucky number") == "7 is the user's lucky number."

    def test_what_the_agent_saved_in_the_turn_is_not_extracted_again(self):
        said = user_says("Remember my email is dana@example.com and my phone is 555 0100")
        call = agent_calls(
            "create_memory", {"text": "my email is dana@example.com and my phone is 555 0100"}
        )
        call.invocation_id = said.invocation_id

        facts = extract(said, call)

        assert [fact.source_type for fact in facts] == ["tool"]
        assert facts[0].text == "The user's email is dana@example.com and their phone is 555 0100."

    @pytest.mark.parametrize(
        ("text", "topic"),
        [
            ("The user's daughter's birthday is May 3rd.", "personal_info"),
            ("The user prefers window seats.", "preferences"),
            ("The user's favourite colour is teal.", "preferences"),
            ("The meeting is on Friday.", "explicit_instructions"),
        ],
    )
    def test_a_remembered_fact_is_filed_under_its_topic(self, text, topic):
        assert fact_topic(text=text, default="explicit_instructions") == topic
