"""Extraction as callers see it: the offline rules one by one, and Gemini structured output."""

import json

import pytest

from core.llm import ModelError
from memory_app.extraction import (
    ExtractedFact,
    ExtractionContext,
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
from tests.factories import session_key
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

    @pytest.mark.parametrize("memory", ["The user is 34.", "The user is now 35 years old."])
    def test_an_age_is_one_value_at_a_time(self, memory):
        assert fact_subject(text=memory) == "the user's age is"

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

    def test_a_model_fact_that_only_records_a_request_is_dropped(self, fake_gemini):
        asked = user_says("Write a haiku about autumn leaves. My sister Ana lives in Braga.")

        def fact(text):
            return {
                "text": text,
                "topic": "key_conversation_details",
                "source_type": "implicit",
                "kind": "statement",
                "confidence": 0.8,
                "importance": 0.5,
                "event_ids": [asked.id],
                "excerpt": "",
            }

        gemini_answers(
            fake_gemini,
            {
                "facts": [
                    fact("The user asked for a haiku about autumn leaves."),
                    fact("The user wants to know how photosynthesis works."),
                    fact("What is a haiku?"),
                    fact("The user's sister Ana lives in Braga."),
                ]
            },
        )

        assert [f.text for f in extract(asked)] == ["The user's sister Ana lives in Braga."]
        system = fake_gemini.requests[0].system_text()
        assert "'Write a haiku about autumn leaves'" in system
        assert "never as a transcript" in system

    def test_transient_errors_propagate_for_the_job_layer_to_retry(self, fake_gemini):
        fake_gemini.push(HttpError(503, "overloaded"))

        with pytest.raises(ModelError) as raised:
            extract(user_says("I am 30"))

        assert raised.value.transient


@pytest.mark.usefixtures("offline")
class TestFactsNotTranscripts:
    """Rule 4: what no rule reads as a fact about the person (a request, a question, small
    talk, the assistant's words) yields nothing; the person's facts are kept as facts."""

    @pytest.mark.parametrize(
        "said",
        [
            "Explain how photosynthesis works, step by step.",
            "Write a haiku about autumn leaves.",
            "Can you help me write a cover letter for a marketing job?",
            "What's the capital of Australia?",
            "Translate 'good morning' into Japanese, please.",
            "Summarise this article in three bullet points.",
            "Paris is great, we loved the museums.",
            "I'm going to ask you something about Python.",
            "My question is about taxes.",
        ],
    )
    def test_requests_questions_and_tasks_yield_no_memory(self, said):
        assert extract(user_says(said)) == []

    @pytest.mark.parametrize(
        "said",
        [
            "Hi Mel!",
            "Thanks, that's great!",
            "Wow, cool!",
            "What did you do at the weekend? Anything fun with the kids?",
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

    def test_a_greeting_before_a_fact_yields_the_fact_alone(self):
        assert [fact.text for fact in extract(user_says("Hi there! I live in Leeds."))] == [
            "The user lives in Leeds."
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

    def test_a_fact_beside_a_request_is_kept_without_the_request(self):
        event = user_says("I live in Lisbon. Write a haiku about the river there.")

        assert [(fact.text, fact.topic) for fact in extract(event)] == [
            ("The user lives in Lisbon.", "personal_info")
        ]

    @pytest.mark.parametrize(
        ("said", "fact"),
        [
            ("My sister Ana lives in Braga.", "The user's sister Ana lives in Braga."),
            (
                "My brother works at a bakery in Faro.",
                "The user's brother works at a bakery in Faro.",
            ),
            (
                "My sister Ines just started as a nurse in Coimbra.",
                "The user's sister Ines just started as a nurse in Coimbra.",
            ),
            ("My dog Rex loves the beach.", "The user's dog Rex loves the beach."),
            ("My son doesn't eat meat.", "The user's son does not eat meat."),
        ],
    )
    def test_people_in_the_users_life_are_facts_about_them(self, said, fact):
        [extracted_fact] = extract(user_says(said))

        assert (extracted_fact.text, extracted_fact.topic) == (fact, "personal_info")

    @pytest.mark.parametrize(
        ("said", "fact"),
        [
            (
                "I'm planning to run the Porto marathon in November.",
                "The user is planning to run the Porto marathon in November.",
            ),
            ("I plan to learn Spanish this year.", "The user plans to learn Spanish this year."),
            ("I'm going to visit Japan in May.", "The user is going to visit Japan in May."),
            (
                "I'm training for a marathon in June.",
                "The user is training for a marathon in June.",
            ),
        ],
    )
    def test_plans_of_the_users_life_are_key_conversation_details(self, said, fact):
        [extracted_fact] = extract(user_says(said))

        assert (extracted_fact.text, extracted_fact.topic) == (fact, KEY_CONVERSATION_DETAILS)

    @pytest.mark.parametrize(
        ("said", "facts"),
        [
            (
                "Yeah, she's thrilled. I'm still a teacher here in Braga.",
                ["The user is still a teacher here in Braga."],
            ),
            (
                "I've been vegetarian for about three years now.",
                ["The user has been vegetarian for about three years now."],
            ),
            ("These days I can't stand coffee.", ["The user does not like coffee."]),
            ("I'm 34, by the way.", ["The user is 34."]),
            ("Wait, no, I turned 35 last month.", ["The user is 35."]),
            (
                "We don't have any pets, my son is allergic to cats.",
                ["The user does not have any pets.", "The user's son is allergic to cats."],
            ),
            (
                "I used to work at a bank, but now I'm a freelance designer.",
                ["The user used to work at a bank.", "The user is a freelance designer."],
            ),
            ("My partner, Rui, is a chef.", ["The user's partner Rui is a chef."]),
            ("I quit smoking in January.", ["The user quit smoking in January."]),
            (
                "But I accepted an offer from Globex, starting in June.",
                ["The user accepted an offer from Globex, starting in June."],
            ),
            ("Please keep your answers short.", ["The user prefers short answers."]),
            (
                "We're going to Japan in April for two weeks.",
                ["The user is going to Japan in April for two weeks."],
            ),
            (
                "I'm doing a master's in economics at Nova.",
                ["The user is doing a master's in economics at Nova."],
            ),
            ("I always book aisle seats.", ["The user always books aisle seats."]),
            ("I'm writing an email to my boss, can you help?", []),
            ("I'm looking for a good restaurant.", []),
            ("I read them on my phone.", []),
        ],
    )
    def test_more_ways_people_state_facts_about_themselves(self, said, facts):
        assert [fact.text for fact in extract(user_says(said))] == facts

    def test_a_second_clause_of_the_user_shares_the_subject(self):
        said = "I live in Lisbon and I'm vegetarian"

        assert fact_text_normalise(text=said) == "The user lives in Lisbon and is vegetarian."
        assert [fact.text for fact in extract(user_says(f"Remember that {said}."))] == [
            "The user lives in Lisbon.",
            "The user is vegetarian.",
        ]

    @pytest.mark.parametrize(
        ("said", "facts"),
        [
            (
                ["I need a gift for my dad, he's into woodworking.", "His birthday is in May."],
                ["The user's dad is into woodworking.", "The user's dad's birthday is in May."],
            ),
            (
                [
                    "We don't have any pets, my son is allergic to cats.",
                    "It's fine, he loves fish.",
                ],
                [
                    "The user does not have any pets.",
                    "The user's son is allergic to cats.",
                    "The user's son loves fish.",
                ],
            ),
            (
                ["My partner, Rui, is a chef.", "Every Sunday, he makes bacalhau."],
                ["The user's partner Rui is a chef.", "The user's partner Rui makes bacalhau."],
            ),
            (
                ["I have a dog named Rex.", "Rex turned ten last week."],
                ["The user has a dog named Rex.", "The user's dog Rex turned ten last week."],
            ),
            (
                ["My sister Ana lives in Braga. She is a nurse."],
                ["The user's sister Ana lives in Braga.", "The user's sister Ana is a nurse."],
            ),
            (
                ["My brother lives in Berlin.", "She is a nurse."],
                ["The user's brother lives in Berlin."],
            ),
            (["He is a nurse.", "Paulo is a chef."], []),
        ],
    )
    def test_he_she_or_a_name_stand_for_the_one_of_the_users_life_named_before(self, said, facts):
        events = [event for text in said for event in (user_says(text), agent_says("I see."))]

        found = extract(*events)

        assert [fact.text for fact in found] == facts
        assert all(fact.excerpt in " ".join(said) for fact in found)

    @pytest.mark.parametrize(
        ("said", "fact", "topic"),
        [
            (
                "We settled on the 3-day Porto itinerary, booking it tonight.",
                "The user settled on the 3-day Porto itinerary, booking it tonight.",
                KEY_CONVERSATION_DETAILS,
            ),
            (
                "We booked the Porto trip for June, three days.",
                "The user booked the Porto trip for June, three days.",
                "personal_info",
            ),
            (
                "I decided to learn the cello.",
                "The user decided to learn the cello.",
                KEY_CONVERSATION_DETAILS,
            ),
            (
                "My knee has been hurting, so the physio told me to cut my long runs.",
                "The user's knee has been hurting, so the physio told them to cut their long runs.",
                "personal_info",
            ),
            (
                "Around eight months, I can read hiragana now.",
                "The user can read hiragana now.",
                "personal_info",
            ),
            (
                "Second, I'm writing my thesis on housing.",
                "The user is writing their thesis on housing.",
                "personal_info",
            ),
        ],
    )
    def test_decisions_skills_and_facts_after_an_opening_word_are_kept(self, said, fact, topic):
        [found] = extract(user_says(said))

        assert (found.text, found.topic) == (fact, topic)

    @pytest.mark.parametrize(
        "said", ["I can't log in.", "I can help you with that.", "I can see it."]
    )
    def test_what_the_user_can_do_is_a_skill_only(self, said):
        assert extract(user_says(said)) == []

    @pytest.mark.parametrize(
        ("asked", "answer", "fact"),
        [
            (
                "Really? What do you drink instead?",
                "Mostly rooibos in the afternoon.",
                "The user mostly drinks rooibos in the afternoon.",
            ),
            (
                "How do you get around now?",
                "By bike, and the metro when it rains.",
                "The user gets around by bike, and the metro when it rains.",
            ),
            (
                "What are you reading?",
                "Dune, for the first time.",
                "The user is reading Dune, for the first time.",
            ),
            (
                "Where will you go?",
                "Tokyo, Kyoto and Osaka.",
                "The user will go to Tokyo, Kyoto and Osaka.",
            ),
        ],
    )
    def test_an_answer_with_no_subject_is_read_through_the_question(self, asked, answer, fact):
        [found] = extract(agent_says(asked), user_says(answer))

        assert (found.text, found.excerpt) == (fact, answer)

    @pytest.mark.parametrize(
        ("asked", "answer"),
        [
            ("What do you want to know?", "How photosynthesis works."),
            ("What do you drink?", "Write a haiku about autumn leaves."),
            ("How are you doing?", "Fine, thanks."),
            ("What do you drink?", "Yes."),
            ("What do you think of Porto?", "Lovely bridges."),
            ("Which one?", "The Porto marathon."),
            ("What do you drink?", "Can you list some teas?"),
        ],
    )
    def test_no_fact_from_a_request_an_opinion_or_a_question_not_about_the_user(
        self, asked, answer
    ):
        assert extract(agent_says(asked), user_says(answer)) == []

    def test_assistant_turns_are_not_kept(self):
        assert extract(agent_says("Porto has lovely bridges and port cellars.")) == []

    def test_no_plan_when_the_app_turned_the_topic_off(self):
        topics = [t for t in MANAGED_TOPICS if t.key != KEY_CONVERSATION_DETAILS]

        assert extract(user_says("I'm planning to visit Japan in May."), topics=topics) == []


@pytest.mark.django_db
@pytest.mark.usefixtures("offline", "lexical_only")
def test_a_session_of_requests_leaves_no_memory(user):
    session = session_make(user)
    for text in (
        "Explain how photosynthesis works, step by step.",
        "Write a haiku about autumn leaves.",
    ):
        turn_add(session, text, reply="Here you are.")
    job = memory_job_request(
        app_name=APP,
        user_pk=user.pk,
        session_id=session_key(session),
        trigger="manual",
        enqueue=False,
    )
    memory_job_run(job_id=str(job.id))

    assert not Memory.objects.filter(user=user).exists()


def test_turn_records_are_recognised_by_topic_and_form():
    record = "[8 May 2023] User: We finally went to the coffee place near the office."
    assert fact_is_turn_record(text=record, topic=KEY_CONVERSATION_DETAILS)
    assert not fact_is_turn_record(text=record, topic="preferences")
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


class TestContext:
    """What came before a job's events is read to understand them and never extracted."""

    def test_an_answer_to_a_question_asked_before_the_batch_is_read_through_it(self, offline):
        earlier = ExtractionContext(
            events=[user_says("I'm planning a trip."), agent_says("Where are you flying?")]
        )
        answer = user_says("Lisbon.")

        with_context = facts_extract(
            app_name=APP, events=[answer], topics=list(MANAGED_TOPICS), context=earlier
        )

        assert [fact.text for fact in with_context] == ["The user is flying to Lisbon."]
        assert extract(answer) == []

    def test_a_pronoun_reads_as_the_person_the_context_named(self, offline):
        earlier = ExtractionContext(events=[user_says("My sister Ana lives in Braga.")])

        facts = facts_extract(
            app_name=APP,
            events=[user_says("She moved to Lisbon last week.")],
            topics=list(MANAGED_TOPICS),
            context=earlier,
        )

        assert [fact.text for fact in facts] == ["The user's sister Ana moved to Lisbon last week."]

    def test_the_model_reads_the_summary_and_earlier_turns_marked_as_context(self, fake_gemini):
        gemini_answers(fake_gemini, {"facts": []})
        earlier = ExtractionContext(
            summary="The user is planning a trip to Portugal in May.",
            events=[agent_says("Where are you flying?")],
        )

        answer = user_says("Lisbon.")
        facts_extract(app_name=APP, events=[answer], topics=list(MANAGED_TOPICS), context=earlier)

        request = fake_gemini.requests[0]
        sent = "\n".join(
            part.get("text", "")
            for content in request.body["contents"]
            for part in content.get("parts", [])
        )
        head, _, transcript = sent.partition("The conversation to extract from:")
        assert "extract nothing from it" in head
        assert "Summary: The user is planning a trip to Portugal in May." in head
        assert "assistant: Where are you flying?" in head
        assert "] user: Lisbon." in transcript
        assert "marked as context" in request.system_text()


@pytest.mark.parametrize(
    ("said", "read"),
    [
        (
            "Quick update on my life: I actually moved to Wroclaw last month.",
            ["The user lives in Wroclaw, having moved there last month."],
        ),
        ("Good news, Mia and I got back together!", ["The user and Mia got back together."]),
        ("Since May I've been working at Globex.", ["The user has been working at Globex."]),
        ("Write a story where I live in Rome.", []),
        ("Two weeks, visiting my wife's family in Osaka too.", []),
    ],
)
def test_a_statement_further_in_a_sentence_is_read_unless_it_is_no_statement(said, read, offline):
    assert [fact.text for fact in extract(user_says(said))] == read
