"""The profile (issue 26, item 4): structured facts about the person, filled by extraction
(offline rules and Gemini), stored as structured memories that are the source of the ``user:``
keys the agent reads, and shown as the Memory page's profile card."""

import json

import pytest
from django.urls import reverse

from core.llm import ModelError
from memory_app import services
from memory_app.extraction import facts_extract
from memory_app.extraction.profile import profile_read
from memory_app.models import Memory, MemoryRevision, MemoryStatus
from memory_app.topics import MANAGED_TOPICS
from sessions_app import selectors as session_selectors
from sessions_app.events import Event
from sessions_app.models import UserState
from tests.fake_gemini import Reply, final_chunk, text_chunk
from tests.memory_app.support import (  # noqa: F401
    APP,
    generate,
    lexical_only,
    offline,
    session_make,
    turn_add,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("lexical_only")]


def said_in_a_new_chat(user, *texts):
    session = session_make(user)
    for text in texts:
        turn_add(session, text)
    generate(user, session)
    return session


def profile_keys(user) -> dict:
    return dict(UserState.objects.filter(app_name=APP, user=user).values_list("key", "value"))


def profile_memories(user) -> dict:
    active = Memory.objects.filter(user=user, status=MemoryStatus.ACTIVE, structured__isnull=False)
    return {memory.text: memory.structured for memory in active}


@pytest.mark.parametrize(
    ("text", "structured"),
    [
        ("The user's name is Ana.", {"name": "Ana"}),
        ("The user is called Dana Reis.", {"name": "Dana Reis"}),
        ("The user lives in Porto, having moved there last week.", {"location": "Porto"}),
        ("The user works as a nurse at Santa Maria.", {"work": "a nurse at Santa Maria"}),
        ("The user works at Acme.", {"work": "at Acme"}),
        ("The user is vegetarian.", {"diet": "vegetarian"}),
        ("The user is allergic to peanuts.", {"diet": "allergic to peanuts"}),
        ("The user's sister is Ana.", {"family": {"sister": "Ana"}}),
        ("The user's sister Ana lives in Braga.", {"family": {"sister": "Ana"}}),
        ("The user's favourite colour is blue.", {"preferences": {"favourite colour": "blue"}}),
        ("The user does not live in Lisbon.", None),
        ("The user no longer works at Acme.", None),
        ("The user's sister is a doctor.", None),
        ("The user works out every morning.", None),
        ("The user likes green tea.", None),
        ("[26 November 2026] User: My name is Ana.", None),
    ],
)
def test_profile_read_takes_one_field_from_a_fact(text, structured):
    assert profile_read(text=text) == structured


@pytest.mark.usefixtures("offline")
class TestOffline:
    def test_stated_facts_are_profile_memories_and_the_user_keys_the_agent_reads(self, user):
        session = said_in_a_new_chat(
            user, "My name is Ana. I live in Lisbon.", "I work as a nurse. I am vegetarian."
        )

        assert profile_memories(user) == {
            "The user's name is Ana.": {"name": "Ana"},
            "The user lives in Lisbon.": {"location": "Lisbon"},
            "The user works as a nurse.": {"work": "a nurse"},
            "The user is vegetarian.": {"diet": "vegetarian"},
        }
        assert profile_keys(user) == {
            "name": "Ana",
            "location": "Lisbon",
            "work": "a nurse",
            "diet": "vegetarian",
        }
        state = session_selectors.session_get(
            app_name=APP, user_id=str(user.pk), session_id=session.id
        ).state
        assert state["user:name"] == "Ana" and state["user:location"] == "Lisbon"

    def test_family_and_favourites_are_entries_of_their_field(self, user):
        said_in_a_new_chat(
            user, "My sister is Ana. My brother is called Rui.", "My favourite colour is blue."
        )

        assert profile_keys(user) == {
            "family": {"sister": "Ana", "brother": "Rui"},
            "preferences": {"favourite colour": "blue"},
        }

    def test_a_correction_replaces_the_field_in_the_memory_and_the_key(self, user):
        said_in_a_new_chat(user, "I live in Lisbon.")
        said_in_a_new_chat(user, "I moved to Porto last week.")

        [memory] = Memory.objects.filter(user=user, status=MemoryStatus.ACTIVE)
        assert memory.structured == {"location": "Porto"}
        assert profile_keys(user) == {"location": "Porto"}
        update = memory.revisions.get(action=MemoryRevision.Action.UPDATED)
        assert update.before["text"] == "The user lives in Lisbon."

    def test_a_newer_value_of_a_field_without_a_subject_replaces_the_older(self, user):
        said_in_a_new_chat(user, "I am vegetarian.")
        said_in_a_new_chat(user, "I am vegan.")

        assert profile_memories(user) == {"The user is vegan.": {"diet": "vegan"}}
        assert profile_keys(user) == {"diet": "vegan"}

    def test_deleting_the_memory_removes_its_field_and_keeps_the_rest(self, user):
        said_in_a_new_chat(user, "My sister is Ana. My brother is Rui. My name is Dana.")
        sister = Memory.objects.get(user=user, text="The user's sister is Ana.")
        name = Memory.objects.get(user=user, text="The user's name is Dana.")

        services.memory_delete(app_name=APP, user_pk=user.pk, memory_id=str(sister.pk))
        services.memory_delete(app_name=APP, user_pk=user.pk, memory_id=str(name.pk))

        assert profile_keys(user) == {"family": {"brother": "Rui"}}

    def test_a_correction_by_the_user_rewrites_or_clears_the_key(self, user):
        said_in_a_new_chat(user, "My name is Dana.")
        memory = Memory.objects.get(user=user)

        services.memory_correct(
            app_name=APP, user_pk=user.pk, memory_id=str(memory.pk), text="My name is Dana Reis."
        )
        assert profile_keys(user) == {"name": "Dana Reis"}

        services.memory_correct(
            app_name=APP, user_pk=user.pk, memory_id=str(memory.pk), text="I like green tea."
        )
        assert profile_keys(user) == {}
        memory.refresh_from_db()
        assert memory.structured is None

    def test_an_agent_set_key_no_memory_holds_is_left_alone(self, user):
        UserState.objects.create(app_name=APP, user=user, key="nickname", value="Dee")
        said_in_a_new_chat(user, "My name is Dana.")
        services.memory_delete(
            app_name=APP, user_pk=user.pk, memory_id=str(Memory.objects.get(user=user).pk)
        )

        assert profile_keys(user) == {"nickname": "Dee"}

    def test_the_profile_is_each_users_own(self, user, other_user):
        said_in_a_new_chat(user, "My name is Dana.")
        said_in_a_new_chat(other_user, "My name is Zed.")

        assert profile_keys(user) == {"name": "Dana"}
        assert profile_keys(other_user) == {"name": "Zed"}


@pytest.mark.usefixtures("offline")
def test_the_profile_card_shows_the_fields_from_their_memories(client, user, other_user, settings):
    settings.DEFAULT_APP_NAME = APP
    said_in_a_new_chat(user, "My name is Dana. My sister is Ana.")
    said_in_a_new_chat(other_user, "My name is Zed.")
    UserState.objects.create(app_name=APP, user=user, key="nickname", value="Dee")
    client.force_login(user)

    page = client.get(reverse("memory")).content.decode()

    card = page[page.index("Your profile") : page.index("</section>", page.index("Your profile"))]
    assert card.index(">name<") < card.index(">sister<") < card.index(">nickname<")
    assert "Dana" in card and "Ana" in card and "Dee" in card and "Zed" not in card
    assert "from your memory “your name is Dana”" in card


def card_change(client, **form):
    return client.post(reverse("memory-profile"), form, follow=True)


@pytest.mark.usefixtures("offline")
def test_a_correction_on_the_card_is_made_on_the_memory_with_the_old_value_kept(
    client, user, settings
):
    settings.DEFAULT_APP_NAME = APP
    said_in_a_new_chat(user, "My name is Dana. My sister is Ana.")
    client.force_login(user)

    card_change(client, key="name", field="name", action="correct", value="Daniela")
    card_change(client, key="sister", field="family", action="correct", value="Rita")

    name = Memory.objects.get(user=user, structured__name="Daniela")
    assert name.text == "The user's name is Daniela."
    assert name.revisions.get(action="updated").before["text"] == "The user's name is Dana."
    assert profile_keys(user) == {"name": "Daniela", "family": {"sister": "Rita"}}

    card_change(client, key="sister", field="family", action="delete")
    assert profile_keys(user) == {"name": "Daniela"}
    assert not Memory.objects.filter(user=user, text__contains="sister").exists()


@pytest.mark.usefixtures("offline")
def test_a_bare_key_is_still_corrected_as_a_key(client, user, settings):
    settings.DEFAULT_APP_NAME = APP
    UserState.objects.create(app_name=APP, user=user, key="nickname", value="Dee")
    client.force_login(user)

    card_change(client, key="nickname", field="", action="correct", value="D")
    assert profile_keys(user) == {"nickname": "D"}
    assert card_change(client, key="name", field="name", action="delete").status_code == 404


def gemini_answers(fake_gemini, answer):
    fake_gemini.push(Reply([text_chunk(json.dumps(answer)), final_chunk()]))


def gemini_fact(event_id, text, **fields):
    return {
        "text": text,
        "topic": "personal_info",
        "source_type": "implicit",
        "kind": "statement",
        "confidence": 0.9,
        "importance": 0.7,
        "event_ids": [event_id],
        "excerpt": text,
        **fields,
    }


class TestGemini:
    def test_the_model_names_the_field_and_the_memory_holds_it(self, fake_gemini, user):
        session = session_make(user)
        turn_add(session, "My sister Ana lives in Braga.")
        event_id = (
            session_selectors.session_get(app_name=APP, user_id=str(user.pk), session_id=session.id)
            .events[0]
            .id
        )
        gemini_answers(
            fake_gemini,
            {
                "facts": [
                    gemini_fact(
                        event_id,
                        "The user's sister, Ana, lives in Braga.",
                        profile={"field": "family", "key": " Sister ", "value": "Ana"},
                    )
                ]
            },
        )
        gemini_answers(fake_gemini, {"operations": []})

        generate(user, session)

        extraction = fake_gemini.requests[0].body
        schema = extraction["generationConfig"]["responseJsonSchema"]
        fact_schema = schema["properties"]["facts"]["items"]["properties"]
        assert fact_schema["profile"]["properties"]["field"]["enum"] == [
            "name",
            "location",
            "work",
            "family",
            "diet",
            "preferences",
        ]
        assert "profile" in fake_gemini.requests[0].system_text()
        [memory] = Memory.objects.filter(user=user)
        assert memory.structured == {"family": {"sister": "Ana"}}
        assert profile_keys(user) == {"family": {"sister": "Ana"}}

    @pytest.mark.parametrize(
        "profile",
        [
            {"field": "shoe size", "value": "42"},
            {"field": "name", "value": 42},
            {"field": "family", "key": "", "value": "Ana"},
            "name: Ana",
        ],
    )
    def test_a_profile_that_is_no_field_of_the_profile_is_invalid_output(
        self, fake_gemini, profile
    ):
        event = Event(author="user", content={"role": "user", "parts": [{"text": "Hi, Ana."}]})
        gemini_answers(
            fake_gemini, {"facts": [gemini_fact(event.id, "The user is Ana.", profile=profile)]}
        )

        with pytest.raises(ModelError) as error:
            facts_extract(app_name=APP, events=[event], topics=list(MANAGED_TOPICS))
        assert error.value.code == "model_invalid_output"
