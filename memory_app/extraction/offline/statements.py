"""Rule 3: the first-person statement a sentence makes ("my X is Y", "I am Y", "I like X", "I
moved to <Place>", "I switched to X"), read in the third person with its topic and polarity."""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory_app.extraction.offline import patterns
from memory_app.extraction.offline.phrasing import (
    contractions_expand,
    pronouns_third_person,
    third_person_verb,
)
from memory_app.topics import PERSONAL_INFO, PREFERENCES


@dataclass(frozen=True)
class Statement:
    """A first-person statement read in the third person: its text, topic, polarity, and
    whether it is said to last ("no longer", "anymore", a switch)."""

    text: str
    topic: str
    negated: bool
    lasting: bool
    dropped: str = ""  # what a negated preference no longer likes: "coffee"


def _statement_my(text: str) -> Statement | None:
    match = patterns.MY.match(text) or patterns.MY_CONTRACTED.match(text)
    if match is None:
        return None
    thing = match["thing"].strip()
    if thing.split()[0].lower() in patterns.MY_NOT_FACTS:
        return None
    neg = " ".join((match["neg"] or "").split())
    verb = (match.groupdict().get("verb") or "is").lower()
    value = pronouns_third_person(match["value"].strip())
    negated = bool(neg)
    topic = PREFERENCES if re.search(r"\bfavou?rite|\bpreferred", thing, re.I) else PERSONAL_INFO
    words = ["The user's", pronouns_third_person(thing), verb, *([neg] if neg else []), value]
    return Statement(
        text=" ".join(words),
        topic=topic,
        negated=negated,
        lasting=bool(patterns.LASTING.search(text)),
    )


def _statement_i_am(text: str) -> Statement | None:
    match = patterns.I_AM.match(text)
    if match is None:
        return None
    rest = match["rest"].strip()
    first = rest.split()[0].lower().strip(",.!?;:")
    neg = " ".join((match["neg"] or "").split())
    if first in patterns.I_AM_VERBS and not neg:
        words = [patterns.I_AM_VERBS[first], rest[len(first) :].strip()]
    elif first.endswith("ing") or first in patterns.PASSING_STATES:
        return None
    else:
        words = ["is", *([neg] if neg else []), rest]
    return Statement(
        text="The user " + " ".join(pronouns_third_person(w) for w in words if w),
        topic=PERSONAL_INFO,
        negated=bool(neg),
        lasting=bool(patterns.LASTING.search(text)),
    )


def _statement_i_verb(text: str) -> Statement | None:
    match = patterns.I_VERB.match(text)
    if match is None:
        return None
    verb = match["verb"].lower()
    rest = match["rest"]
    if verb in patterns.PREFERENCE_VERBS:
        if patterns.PREFERENCE_NOT_OBJECTS.match(rest) or not rest.strip():
            return None
        topic = PREFERENCES
    elif verb in patterns.PERSONAL_VERBS:
        if not rest.strip() or (verb == "have" and patterns.HAVE_NOT_FACTS.match(rest)):
            return None
        if verb in patterns.PAST_PHRASES and not re.match(patterns.PAST_PHRASES[verb], rest, re.I):
            return None
        topic = PERSONAL_INFO
    else:
        return None
    neg = " ".join((match["neg"] or "").split()).lower()
    if neg.startswith("do not"):
        verb_phrase = ["does not", *neg.split()[2:], verb]
    elif neg:
        verb_phrase = [neg, third_person_verb(verb)]
    else:
        verb_phrase = [third_person_verb(verb)]
    adverbs = match["adverbs"].split()
    words = ["The user", *adverbs, *verb_phrase]
    sentence = " ".join(w.lower() if i else w for i, w in enumerate(words))
    dropped = ""
    if neg and topic == PREFERENCES:
        dropped = pronouns_third_person(patterns.LASTING.sub("", rest)).strip(" ,")
    return Statement(
        text=sentence + pronouns_third_person(rest).rstrip(),
        topic=topic,
        negated=bool(neg),
        lasting=bool(patterns.LASTING.search(text)),
        dropped=dropped,
    )


def _statement_moved(text: str) -> Statement | None:
    """ "I moved (from Y) to <Place> ..." -> "The user lives in <Place>, having moved there
    (from Y) ...": the move fills the "lives in" slot. Only for a named place (a capital
    letter): "I moved to a new team" says nothing of where the user lives."""
    match = patterns.MOVED.match(text)
    if match is None:
        return None
    rest = match["rest"].strip()
    end = patterns.PLACE_END.search(rest)
    place = (rest[: end.start()] if end else rest).strip()
    if not place or not re.search(r"\b[A-Z]", place):
        return None
    tail = "" if end is None or end.group().startswith(",") else rest[end.start() :].strip()
    origin = f" from {match['origin'].strip()}" if match["origin"] else ""
    having = " ".join(["having moved there" + origin, tail]).strip()
    return Statement(
        text=pronouns_third_person(f"The user lives in {place}, {having}"),
        topic=PERSONAL_INFO,
        negated=False,
        lasting=False,
    )


def _statement_switched(text: str, *, dropped: str) -> Statement | None:
    """ "I switched (from Y) to X" -> "The user switched from Y to X": a preference stated as
    a lasting change. Without "from", Y is what the same message said the user no longer
    likes (``dropped``), if anything: "I don't like coffee anymore, I switched to tea"."""
    match = patterns.SWITCHED.match(text)
    if match is None:
        return None
    old = (match["old"] or dropped).strip()
    change = f"from {old} to {match['new'].strip()}" if old else f"to {match['new'].strip()}"
    return Statement(
        text=pronouns_third_person(f"The user switched {change}"),
        topic=PREFERENCES,
        negated=False,
        lasting=True,
    )


def statement_parse(text: str, *, dropped: str = "") -> Statement | None:
    """The first-person statement ``text`` makes, in the third person (rule 3), or None.

    ``dropped``: what an earlier sentence of the message said the user no longer likes."""
    text = contractions_expand(text)
    switched = _statement_switched(text, dropped=dropped)
    if switched is not None:
        return switched
    for parse in (_statement_my, _statement_i_am, _statement_moved, _statement_i_verb):
        statement = parse(text)
        if statement is not None:
            return statement
    return None
