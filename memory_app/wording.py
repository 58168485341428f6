"""How a memory is said to the person it is about.

Memories are stored in the third person ("The user's daughter's birthday is May 3rd."), the
form extraction writes and the model reads. Told to the user (a chat reply, a notice), the same
fact reads "your daughter's birthday is May 3rd": these functions turn "the user" into "you",
make the verb agree, and shape the clause to sit inside a sentence.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_ADVERBS = (
    r"(?:(?:usually|often|always|sometimes|never|also|still|really|just|mostly|generally|now|"
    r"currently|no longer|rarely|only|even|already)\s+)*"
)
_USER_VERB = re.compile(r"\bthe user\s+(?P<adverbs>" + _ADVERBS + r")(?P<verb>[a-z]+)\b", re.I)
_TURN_RECORD = re.compile(r"^\[(?P<date>\d{1,2} [A-Z][a-z]+ \d{4})\] (?P<speaker>[^:\n]{1,100}): ")
_IRREGULAR = {"is": "are", "was": "were", "has": "have", "does": "do"}
# Verbs after "the user" that already agree with "you": past forms and modals.
_UNCHANGED = re.compile(
    r"(?:\w+ed|went|were|had|did|made|got|saw|took|came|gave|found|left|met|ran|told|thought|"
    r"bought|brought|felt|kept|lost|paid|said|sold|sent|spent|won|wrote|began|grew|can|could|"
    r"will|would|shall|should|may|might|must)$"
)


def _verb_for_you(verb: str) -> str:
    """'lives' -> 'live', 'studies' -> 'study', 'teaches' -> 'teach', 'is' -> 'are'."""
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if _UNCHANGED.match(lower) or not lower.endswith("s") or lower.endswith("ss"):
        return lower
    if lower.endswith("ies") and len(lower) > 4:
        return lower[:-3] + "y"
    if lower.endswith(("ches", "shes", "sses", "xes", "zes", "oes")):
        return lower[:-2]
    return lower[:-1]


# First words that lose their capital inside a sentence (a name keeps its own).
_SMALL_WORDS = {
    "the", "a", "an", "this", "that", "these", "those", "your", "you", "their", "his", "her",
    "its", "our", "some", "every", "all", "no", "on", "in", "at", "for", "when", "after",
    "before", "there", "it", "they", "she", "he", "we",
}  # fmt: skip


def _clause(text: str) -> str:
    """The text without its final full stop, its first word in small letters when it is a
    common word, to go inside a sentence."""
    text = " ".join(text.split())
    while text.endswith((".", ";", ",")):
        text = text[:-1].rstrip()
    first = text.split(" ", 1)[0]
    if first.lower() in _SMALL_WORDS:
        text = first.lower() + text[len(first) :]
    return text


def memory_said_to_user(text: str) -> str:
    """A stored memory as said to its user, as a clause without a final full stop:

    - "The user's daughter's birthday is May 3rd." -> "your daughter's birthday is May 3rd"
    - "The user lives in Lisbon." -> "you live in Lisbon"
    - "The user never eats meat." -> "you never eat meat"
    - "[3 May 2026] User: I'm off." -> "on 3 May 2026 you said \u201cI'm off.\u201d"

    Text that does not name "the user" (a shared app memory, a model's own wording) is only
    shaped into a clause; a name at its start keeps its capital.
    """
    text = " ".join(str(text).split())
    record = _TURN_RECORD.match(text)
    if record:
        speaker = record["speaker"]
        who = "you" if speaker.lower() in ("user", "the user") else speaker
        said = text[record.end() :].strip()
        return f"on {record['date']} {who} said \u201c{said}\u201d"
    if not re.search(r"\bthe user\b", text, re.I):
        return _clause(_first_person_to_you(text))
    about_user = bool(re.match(r"the user\b(?!'s)", text, re.I))
    they_are_user = about_user or _about_one_of_theirs(text)
    text = re.sub(r"\bthe user's\b", "your", text, flags=re.I)
    text = _USER_VERB.sub(
        lambda match: f"you {match['adverbs']}{_verb_for_you(match['verb'])}", text
    )
    text = re.sub(r"\bthe user\b", "you", text, flags=re.I)
    if they_are_user:
        for pattern, replacement in _THEY_TO_YOU:
            text = pattern.sub(replacement, text)
    if about_user:
        text = _JOINED_VERB.sub(
            lambda match: f"{match['conj']} {match['adverbs']}{_verb_for_you(match['verb'])}",
            text,
        )
    return _clause(text)


_THEIR_ONE = re.compile(r"the user's\s+(?P<noun>[a-z]+)\b", re.I)
_GENDERED = re.compile(r"\b(?:she|her|hers|herself|he|him|his|himself)\b", re.I)
_PLURALS = {"children", "people", "kids", "parents", "grandparents", "friends", "twins"}


def _about_one_of_theirs(text: str) -> bool:
    """Whether a memory about one person of the user's ("The user's sister Ola is allergic to
    peanuts, so they check labels when they cook for her") uses "they" for the user: where
    that one person is "she" or "he", "they" is the user. Not so where no one is ("The user's
    sister lives with their husband": her husband), nor where the user's own are several
    ("The user's parents ... where they run a bakery")."""
    match = _THEIR_ONE.match(text)
    if match is None or not _GENDERED.search(text):
        return False
    noun = match["noun"].lower()
    return noun not in _PLURALS and (not noun.endswith("s") or noun.endswith("ss"))


# The verb of a second clause that shares the user as its subject ("and is vegetarian").
_JOINED_VERB = re.compile(
    r"\b(?P<conj>and|but)\s+(?P<adverbs>" + _ADVERBS + r")(?P<verb>is|was|has|does|lives|works|"
    r"studies|teaches|likes|loves|hates|prefers|enjoys|eats|drinks|plays|speaks|uses|owns|"
    r"drives|cooks|runs)\b"
)


# In a memory about the user ("The user loves their dog and they walk it daily"), "they" is the
# user: said to them, it is "you". Not so in one about someone else ("The user's sister ...").
_THEY_TO_YOU = tuple(
    (re.compile(rf"\b{word}\b"), replacement)
    for word, replacement in (
        ("themselves", "yourself"),
        ("theirs", "yours"),
        ("their", "your"),
        ("them", "you"),
        ("they", "you"),
    )
)
# A memory written in the person's own words ("I live in Porto", a text typed on the Memory
# page), said back to them.
_I_TO_YOU = tuple(
    (re.compile(pattern, re.I), replacement)
    for pattern, replacement in (
        (r"\bI'm\b", "you're"),
        (r"\bI've\b", "you've"),
        (r"\bI'd\b", "you'd"),
        (r"\bI'll\b", "you'll"),
        (r"\bI\s+am\b", "you are"),
        (r"\bI\s+was\b", "you were"),
        (r"\bmyself\b", "yourself"),
        (r"\bmine\b", "yours"),
        (r"\bmy\b", "your"),
        (r"\bme\b", "you"),
    )
)


def _first_person_to_you(text: str) -> str:
    """ "I live in Porto and my cat is Miso" -> "you live in Porto and your cat is Miso"."""
    for pattern, replacement in _I_TO_YOU:
        text = pattern.sub(replacement, text)
    return re.sub(r"\bI\b", "you", text)


def memories_said_to_user(texts: list[str]) -> str:
    """Several memories as one clause: "your name is Dana, and you live in Lisbon"."""
    clauses = [memory_said_to_user(text) for text in texts if text.strip()]
    if len(clauses) <= 2:
        return ", and ".join(clauses)
    return "; ".join(clauses[:-1]) + "; and " + clauses[-1]


def sentence(clause: str) -> str:
    """A clause made a sentence: a capital first letter and one final stop (none added after
    '?', '!' or a closing quote that already ends in one)."""
    clause = clause.strip()
    if not clause:
        return ""
    clause = clause[:1].upper() + clause[1:]
    if re.search(r"[.!?][\u201d\u2019\"')]*$", clause):
        return clause
    return clause + "."


def said_on(*, said: str, when: float) -> str:
    """Why a memory changed, told to the person: "You said on 26 Nov that you live in Porto."
    (``said``: the fact, in the third person or their own words; ``when``: its timestamp)."""
    moment = datetime.fromtimestamp(when, tz=UTC)
    return sentence(f"You said on {moment.day} {moment:%b} that {memory_said_to_user(said)}")
