"""Which topics guide extraction for an app: managed ones from code, tuned and extended per app."""

import pytest

from memory_app.models import MemoryTopic
from memory_app.topics import MANAGED_TOPICS, topics_for_app

pytestmark = pytest.mark.django_db

MANAGED_KEYS = [
    "personal_info",
    "preferences",
    "key_conversation_details",
    "explicit_instructions",
]


def test_an_app_without_rows_gets_the_four_managed_topics_with_examples():
    topics = topics_for_app(app_name="chat")

    assert [topic.key for topic in topics] == MANAGED_KEYS
    assert all(topic.managed and topic.description for topic in topics)
    assert all(topic.few_shot_examples for topic in topics)
    assert topics == list(MANAGED_TOPICS)


def test_an_app_can_disable_a_managed_topic_without_affecting_other_apps():
    MemoryTopic.objects.create(
        app_name="chat",
        key="key_conversation_details",
        label="",
        description="",
        managed=True,
        enabled=False,
    )

    assert "key_conversation_details" not in [t.key for t in topics_for_app(app_name="chat")]
    assert [t.key for t in topics_for_app(app_name="other")] == MANAGED_KEYS


def test_an_override_replaces_what_it_sets_and_keeps_the_rest_from_code():
    MemoryTopic.objects.create(
        app_name="chat",
        key="preferences",
        label="",
        managed=True,
        description="Only food preferences.",
        few_shot_examples=[{"text": "I love sushi", "memory": "The user loves sushi."}],
    )

    preferences = next(t for t in topics_for_app(app_name="chat") if t.key == "preferences")

    assert preferences.label == "Preferences"
    assert preferences.description == "Only food preferences."
    assert preferences.few_shot_examples == (
        {"text": "I love sushi", "memory": "The user loves sushi."},
    )


def test_custom_topics_follow_the_managed_ones_and_disabled_ones_are_left_out():
    MemoryTopic.objects.create(
        app_name="chat",
        key="travel",
        label="Travel",
        description="Trips and bookings.",
        few_shot_examples=[
            {"text": "Flying to Rome on the 3rd", "memory": "The user flies to Rome on the 3rd."},
            {"text": "malformed example without a memory"},
        ],
    )
    MemoryTopic.objects.create(
        app_name="chat",
        key="allergies",
        label="Allergies",
        description="Allergies.",
        enabled=False,
    )
    MemoryTopic.objects.create(app_name="other", key="music", label="Music", description="x")

    topics = topics_for_app(app_name="chat")

    assert [t.key for t in topics] == [*MANAGED_KEYS, "travel"]
    travel = topics[-1]
    assert not travel.managed
    assert travel.description == "Trips and bookings."
    assert travel.few_shot_examples == (
        {"text": "Flying to Rome on the 3rd", "memory": "The user flies to Rome on the 3rd."},
    )
