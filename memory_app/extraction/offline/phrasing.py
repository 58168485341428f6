"""First person made third person: contractions expanded, pronouns turned, verbs agreeing with
"the user"."""

from __future__ import annotations

import re

_CONTRACTIONS = (
    (re.compile(r"\bI'm\b", re.I), "I am"),
    (re.compile(r"\bI've\b", re.I), "I have"),
    (re.compile(r"\bdon't\b", re.I), "do not"),
    (re.compile(r"\bdoesn't\b", re.I), "does not"),
    (re.compile(r"\bdidn't\b", re.I), "did not"),
    (re.compile(r"\bisn't\b", re.I), "is not"),
    (re.compile(r"\baren't\b", re.I), "are not"),
    (re.compile(r"\bwasn't\b", re.I), "was not"),
)
_PRONOUNS = (
    (re.compile(r"\bI\s+am\b"), "they are"),
    (re.compile(r"\bI\s+was\b"), "they were"),
    (re.compile(r"\bmyself\b", re.I), "themselves"),
    (re.compile(r"\bmine\b", re.I), "theirs"),
    (re.compile(r"\bmy\b", re.I), "their"),
    (re.compile(r"\bme\b", re.I), "them"),
    (re.compile(r"\bI\b"), "they"),
)


def third_person_verb(verb: str) -> str:
    """'live' -> 'lives', 'study' -> 'studies', 'teach' -> 'teaches', 'have' -> 'has'."""
    lower = verb.lower()
    if lower == "have":
        return "has"
    if lower in {"moved", "grew", "was"}:
        return lower
    if lower.endswith(("s", "sh", "ch", "x", "z", "o")):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in set("aeiou"):
        return lower[:-1] + "ies"
    return lower + "s"


def pronouns_third_person(text: str) -> str:
    """'I am', 'my', 'me', 'I' ... made 'they are', 'their', 'them', 'they' ..."""
    for pattern, replacement in _PRONOUNS:
        text = pattern.sub(replacement, text)
    return text


_AND_I = re.compile(r"\b(?P<conj>and|but)\s+(?:they|I)\s+(?P<verb>are|am|were|was|[a-z]+)\b")
_AGREEING = {"are": "is", "am": "is", "were": "was", "was": "was"}


def user_clauses_joined(text: str) -> str:
    """A statement about the user with a second clause of the user's own made to share its
    subject: "The user lives in Lisbon and they are vegetarian" -> "The user lives in Lisbon
    and is vegetarian", so no "they" is left to read as someone else."""
    if not re.match(r"the\s+user\s+(?!'s)", text, re.I):
        return text

    def joined(match: re.Match) -> str:
        verb = match["verb"]
        verb = _AGREEING.get(verb, verb if _UNCONJUGATED_WORD.match(verb) else None) or (
            third_person_verb(verb)
        )
        return f"{match['conj']} {verb}"

    return _AND_I.sub(joined, text)


def contractions_expand(text: str) -> str:
    """ "I'm", "I've", "don't", "isn't" ... written out, so the rules match one form."""
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    return text


# "I <verb>" whose verb agrees with "the user" once conjugated: not a past form (-ed or a common
# irregular one) nor a modal, which stay as they are ("the user went", "the user can").
_UNCONJUGATED = (
    r"(?:\w+ed|went|was|were|had|did|made|got|saw|took|came|gave|found|left|met|ran|told|thought|"
    r"bought|brought|felt|kept|lost|paid|said|sold|sent|spent|won|wrote|began|can|could|will|"
    r"would|shall|should|may|might|must|do|does|am|also|still|really|just)"
)
_UNCONJUGATED_WORD = re.compile(_UNCONJUGATED + "$")
_I_PRESENT_VERB = re.compile(
    r"\bI\s+(?P<adverbs>(?:(?:usually|often|always|sometimes|never|also|still|really|just|"
    r"mostly|generally|now|currently)\s+)*)(?!" + _UNCONJUGATED + r"\b)(?P<verb>[a-z]+)\b"
)


def pronouns_remembered(clause: str) -> str:
    """A remembered clause that is not a first-person statement, with 'my/me/I' made 'the
    user's/the user' and a capital first letter: 'the meeting with my boss is on Friday' ->
    'The meeting with the user's boss is on Friday'."""
    clause = contractions_expand(clause)
    clause = re.sub(r"\bmy\b", "the user's", clause, flags=re.I)
    clause = re.sub(r"\bI\s+am\b", "the user is", clause)
    clause = re.sub(r"\bI\s+have\b", "the user has", clause)
    clause = _I_PRESENT_VERB.sub(
        lambda match: f"the user {match['adverbs']}{third_person_verb(match['verb'])}", clause
    )
    clause = re.sub(r"\b(?:me|I)\b", "the user", clause)
    return clause[:1].upper() + clause[1:]
