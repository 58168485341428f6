"""Memories said to the person they are about (memory_app.wording)."""

from datetime import UTC, datetime

import pytest

from memory_app.extraction import user_text_normalise
from memory_app.wording import memories_said_to_user, memory_said_to_user, said_on, sentence


@pytest.mark.parametrize(
    ("stored", "said"),
    [
        ("The user's daughter's birthday is May 3rd.", "your daughter's birthday is May 3rd"),
        ("The user's name is Dana.", "your name is Dana"),
        ("The user lives in Lisbon.", "you live in Lisbon"),
        ("The user is allergic to peanuts.", "you are allergic to peanuts"),
        ("The user has a dog named Rex and two cats.", "you have a dog named Rex and two cats"),
        ("The user does not like coffee anymore.", "you do not like coffee anymore"),
        ("The user never eats meat.", "you never eat meat"),
        ("The user no longer eats meat.", "you no longer eat meat"),
        ("The user studies law.", "you study law"),
        ("The user teaches yoga.", "you teach yoga"),
        ("The user goes running.", "you go running"),
        ("The user switched from coffee to green tea.", "you switched from coffee to green tea"),
        ("The user can swim.", "you can swim"),
        ("The user was born in Porto.", "you were born in Porto"),
        ("Lisbon is the user's home.", "Lisbon is your home"),
        (
            "The meeting with the user's boss is on Friday.",
            "the meeting with your boss is on Friday",
        ),
        ("Prefers short answers", "Prefers short answers"),
        ("The user's flight is on Friday..", "your flight is on Friday"),
        ("I live in Porto", "you live in Porto"),
        ("I live in Porto.", "you live in Porto"),
        ("My cat is called Miso.", "your cat is called Miso"),
        ("I'm vegetarian and I was born in Braga.", "you're vegetarian and you were born in Braga"),
        (
            "The user lives in Lisbon and they are vegetarian.",
            "you live in Lisbon and you are vegetarian",
        ),
        ("The user lives in Lisbon and is vegetarian.", "you live in Lisbon and are vegetarian"),
        ("The user works at Google but hates it.", "you work at Google but hate it"),
        (
            "The user loves their dog and plays with it daily.",
            "you love your dog and play with it daily",
        ),
        ("The user's sister Ana lives in Braga.", "your sister Ana lives in Braga"),
        (
            "The user's sister lives with their husband.",
            "your sister lives with their husband",
        ),
        ("The user has two dogs and cats.", "you have two dogs and cats"),
        # Issue 46: the voice of the Memory page, the profile and the notices.
        ("The user's name is Tomasz.", "your name is Tomasz"),
        (
            "The user lives in Gdansk, where they work as a ferry mechanic.",
            "you live in Gdansk, where you work as a ferry mechanic",
        ),
        ("The user always travels with a paper map.", "you always travel with a paper map"),
        (
            "The user's sister Ola is allergic to peanuts, so they always check labels when "
            "they cook for her.",
            "your sister Ola is allergic to peanuts, so you always check labels when you cook "
            "for her",
        ),
        (
            "The user's parents live in Braga, where they run a bakery with him.",
            "your parents live in Braga, where they run a bakery with him",
        ),
        ("The user quit nursing last month.", "you quit nursing last month"),
        ("The user is not a ferry mechanic anymore.", "you are not a ferry mechanic anymore"),
        (
            "The user is planning to run the Porto marathon in November.",
            "you are planning to run the Porto marathon in November",
        ),
        (
            "[23 November 2026] User: I'm training for the Berlin marathon.",
            "on 23 November 2026 you said \u201cI'm training for the Berlin marathon.\u201d",
        ),
    ],
)
def test_a_stored_memory_is_said_to_its_user(stored, said):
    assert memory_said_to_user(stored) == said


def test_several_memories_make_one_clause():
    assert memories_said_to_user(["The user's name is Dana.", "The user lives in Lisbon."]) == (
        "your name is Dana, and you live in Lisbon"
    )
    assert memories_said_to_user(["The user likes tea.", "The user runs.", "The user sings."]) == (
        "you like tea; you run; and you sing"
    )


@pytest.mark.parametrize(
    ("clause", "made"),
    [
        ("your name is Dana", "Your name is Dana."),
        ("You said: \u201cHow are you?\u201d", "You said: \u201cHow are you?\u201d"),
        ("Done!", "Done!"),
        ("", ""),
    ],
)
def test_a_sentence_has_a_capital_and_one_final_stop(clause, made):
    assert sentence(clause) == made


@pytest.mark.parametrize(
    ("clause", "said"),
    [
        (
            "I remember that you said \u201cI am vegetarian.\u201d",
            "I remember that you said \u201cI am vegetarian.\u201d",
        ),
        ("you said \u201cI am vegetarian.\u201d.", "You said \u201cI am vegetarian.\u201d."),
        ('you said "I am vegetarian."', 'You said "I am vegetarian."'),
        ("you live in Porto", "You live in Porto."),
        ("is that so?", "Is that so?"),
    ],
)
def test_a_sentence_ends_with_one_stop(clause, said):
    assert sentence(clause) == said


@pytest.mark.parametrize(
    ("fact", "reason"),
    [
        (
            "The user lives in Porto, having moved there last week.",
            "You said on 26 Nov that you live in Porto, having moved there last week.",
        ),
        ("The user no longer eats meat.", "You said on 26 Nov that you no longer eat meat."),
        ("I live in Porto.", "You said on 26 Nov that you live in Porto."),
    ],
)
def test_the_reason_of_a_correction_says_what_the_person_said_and_when(fact, reason):
    when = datetime(2026, 11, 26, 17, 0, tzinfo=UTC).timestamp()

    assert said_on(said=fact, when=when) == reason


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("My sister Ola is a nurse.", "The user's sister Ola is a nurse."),
        ("I live in Lisbon", "The user lives in Lisbon."),
        ("I'm allergic to peanuts", "The user is allergic to peanuts."),
        ("You live in Lisbon now.", "The user lives in Lisbon now."),
        ("Your sister Ola is a nurse.", "The user's sister Ola is a nurse."),
        ("You're vegetarian", "The user is vegetarian."),
        ("You always travel with a paper map.", "The user always travels with a paper map."),
        ("You quit nursing last month.", "The user quit nursing last month."),
        ("You do not eat meat.", "The user does not eat meat."),
        ("The user lives in Porto.", "The user lives in Porto."),
        ("Prefers short answers", "Prefers short answers."),
    ],
)
def test_what_a_person_types_is_kept_in_the_voice_the_model_reads(typed, stored):
    """A correction typed in the person's own words, or edited from the Memory page's "you"."""
    assert user_text_normalise(text=typed) == stored
