"""Memories said to the person they are about (memory_app.wording)."""

import pytest

from memory_app.wording import memories_said_to_user, memory_said_to_user, sentence


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
