"""The reading of a stored fact that consolidation shares with the offline rules: its subject
(one value at a time), polarity, switch and whether it records a whole turn; and a fact's text
as memories keep it."""

from __future__ import annotations

import re

from memory_app.extraction.offline.phrasing import pronouns_remembered, third_person_verb
from memory_app.extraction.offline.sentences import sentence_clean
from memory_app.extraction.offline.statements import statement_parse
from memory_app.topics import KEY_CONVERSATION_DETAILS, PERSONAL_INFO, PREFERENCES

_SUBJECT = re.compile(
    r"^the\s+user(?:'s\s+(?P<thing>[^.]{1,60}?)\s+(?:is|are)\b"
    r"|\s+(?:(?:also|currently|now|still|really)\s+)*(?P<predicate>lives\s+in|lives\s+at|"
    r"works\s+at|works\s+for|works\s+as|studies\s+at|is\s+from|comes\s+from|was\s+born\s+in|"
    r"was\s+born\s+on|is\s+called|is\s+named|is\s+married\s+to)\b)",
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|no\s+longer|never|anymore|used\s+to)\b|n't\b", re.I)
_MOVED_TO_PLACE = re.compile(
    r"^(?i:the\s+user\s+(?:has\s+)?(?:(?:just|recently|finally|also)\s+)*moved\s+"
    r"(?:from\s+.+?\s+)?to\s+(?:the\s+)?)[A-Z]"
)
_AGE = re.compile(r"^the\s+user\s+is\s+(?:now\s+)?\d{1,3}(?:\s+years?\s+old)?\.?$", re.I)
_SWITCH_FACT = re.compile(
    r"^the\s+user\s+(?:has\s+)?(?:(?:just|recently|finally|also|now)\s+)*(?:switched|changed)"
    r"(?:\s+over)?\s+(?:from\s+(?P<old>.+?)\s+)?to\s+(?P<new>.+?)\.?$",
    re.I,
)


def fact_subject(*, text: str) -> str:
    """What a third-person fact is about when it can hold one value at a time, else "".

    "The user lives in Lisbon" -> "the user lives in", and so does "The user moved to Porto"
    (a named place); "The user is 35" -> "the user's age is"; "The user's favourite colour is
    blue" -> "the user's favourite colour is". Two facts with the same subject and different
    values conflict: the newer (or more trusted) one replaces the other. Facts that may hold
    many values ("The user likes tea") have no subject. Negated facts have none either.
    """
    if _NEGATION.search(text):
        return ""
    if _MOVED_TO_PLACE.match(" ".join(text.split())):
        return "the user lives in"
    if _AGE.match(" ".join(text.split())):
        return "the user's age is"
    match = _SUBJECT.match(" ".join(text.split()))
    if match is None:
        return ""
    if match["thing"]:
        return f"the user's {match['thing'].casefold()} is"
    return "the user " + " ".join(match["predicate"].casefold().split())


def fact_switch(*, text: str) -> tuple[str, str] | None:
    """("coffee", "green tea") for "The user switched from coffee to green tea", ("", "tea")
    for "The user switched to tea", None for a fact that states no switch. A switch replaces
    the preference it names (consolidation updates that memory rather than adding one)."""
    match = _SWITCH_FACT.match(" ".join(text.split()))
    if match is None:
        return None
    return (match["old"] or "").strip(), match["new"].strip()


def fact_text_normalise(*, text: str) -> str:
    """A fact's text as memories keep it: one line, the third person, a capital, a full stop.

    Facts stored directly (the ``create_memory`` tool, ``add_memory``) may be written in the
    first person ("my sister lives in Lisbon"); normalised, they read like extracted ones
    ("The user's sister lives in Lisbon."), so the same fact from both paths is one memory; so
    is a first person further in ("7 is my lucky number" -> "7 is the user's lucky number.").
    """
    clean = " ".join(text.split())
    if re.match(r"(?:i|my)\b", clean, re.I):
        statement = statement_parse(sentence_clean(clean))
        clean = statement.text if statement else pronouns_remembered(sentence_clean(clean))
    elif _FIRST_PERSON.search(clean) and not _TURN_RECORD.match(clean):
        clean = pronouns_remembered(sentence_clean(clean))
    clean = clean[:1].upper() + clean[1:]
    return clean if clean.endswith((".", "!", "?")) else clean + "."


def user_text_normalise(*, text: str) -> str:
    """What a person typed about themselves as memories keep it (see
    :func:`fact_text_normalise`): in their own words ("My sister Ola is a nurse") or
    correcting a memory as the Memory page shows it to them, in the second person ("You live
    in Lisbon now"); either way stored as "The user ...", the one voice the model reads."""
    return fact_text_normalise(text=_second_person_third(" ".join(text.split())))


_YOU_FORMS = tuple(
    (re.compile(pattern, re.I), replacement)
    for pattern, replacement in (
        (r"\byou're\b", "the user is"),
        (r"\byou\s+are\b", "the user is"),
        (r"\byou\s+were\b", "the user was"),
        (r"\byou've\b", "the user has"),
        (r"\byou\s+have\b", "the user has"),
        (r"\byourself\b", "themselves"),
        (r"\byours\b", "the user's"),
        (r"\byour\b", "the user's"),
    )
)
_YOU_PRESENT_VERB = re.compile(
    r"\byou\s+(?P<adverbs>(?:(?:usually|often|always|sometimes|never|also|still|really|just|"
    r"mostly|generally|now|currently)\s+)*)(?P<verb>[a-z]+)\b",
    re.I,
)


def _second_person_third(text: str) -> str:
    for pattern, replacement in _YOU_FORMS:
        text = pattern.sub(replacement, text)

    def agreeing(match: re.Match) -> str:
        verb = match["verb"]
        if _PAST_OR_MODAL.fullmatch(verb.lower()):
            return f"the user {match['adverbs']}{verb}"
        return f"the user {match['adverbs']}{third_person_verb(verb)}"

    text = _YOU_PRESENT_VERB.sub(agreeing, text)
    return re.sub(r"\byou\b", "the user", text, flags=re.I)


# Verbs after "you" that already agree with "the user": past forms and modals.
_PAST_OR_MODAL = re.compile(
    r"\w+ed|went|had|did|made|got|saw|took|came|gave|found|left|met|ran|told|thought|bought|"
    r"brought|felt|kept|lost|paid|said|sold|sent|spent|won|wrote|began|grew|quit|can|could|will|"
    r"would|shall|should|may|might|must|does"
)


_FIRST_PERSON = re.compile(r"\b(?:i|my|me|mine|myself)\b", re.I)
_PREFERENCE_FACT = re.compile(
    r"^the\s+user(?:'s\s+(?:\w+\s+){0,3}?(?:favou?rite|preferred)\b|\s+(?:\w+\s+)?"
    r"(?:prefers|likes|loves|enjoys|adores|hates|dislikes|does\s+not\s+like)\b)",
    re.I,
)
_PERSONAL_FACT = re.compile(r"^the\s+user\b", re.I)


def fact_topic(*, text: str, default: str) -> str:
    """The topic a third-person fact belongs to by what it says, else ``default``: what the
    user asked to have remembered is still a birthday (personal information) or a seat they
    prefer (a preference), not an "explicit instruction"."""
    clean = " ".join(text.split())
    if _PREFERENCE_FACT.match(clean):
        return PREFERENCES
    if _PERSONAL_FACT.match(clean):
        return PERSONAL_INFO
    return default


_TURN_RECORD = re.compile(r"^\[\d{1,2} [A-Z][a-z]+ \d{4}\] [^:\n]{1,100}: ")


def fact_is_turn_record(*, text: str, topic: str) -> bool:
    """Whether a fact or memory is a rule-4 record of a whole turn ("[8 May 2023] Caroline:
    ..."): what was said and when, true as a record even when a later turn says otherwise,
    which consolidation therefore only appends (see :mod:`memory_app.consolidation`)."""
    return topic == KEY_CONVERSATION_DETAILS and bool(_TURN_RECORD.match(text))


def fact_negated(*, text: str) -> bool:
    """Whether a fact denies something ("does not", "no longer", "never", "not")."""
    return bool(_NEGATION.search(text))
