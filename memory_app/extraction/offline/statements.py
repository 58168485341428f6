"""Rule 3: the first-person statement a sentence makes ("my X is Y", "my sister Ana lives in
Braga", "I'm planning to ...", "I am Y", "I like X", "I moved to <Place>", "I switched to X"),
read in the third person with its topic and polarity."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from memory_app.extraction.offline import patterns
from memory_app.extraction.offline.phrasing import (
    contractions_expand,
    pronouns_third_person,
    third_person_verb,
    user_clauses_joined,
)
from memory_app.topics import KEY_CONVERSATION_DETAILS, PERSONAL_INFO, PREFERENCES

_LEADING_ADVERBS = re.compile(r"^(?:(?:still|now|currently|also|really|actually|always)\s+)+", re.I)


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


def _statement_relation(text: str) -> Statement | None:
    """ "my sister Ana lives in Braga" -> "The user's sister Ana lives in Braga": a fact about
    someone (or an animal) in the user's life, in their own words but the user's pronouns
    turned. "my X is Y" is read by :func:`_statement_my` first."""
    match = patterns.MY_RELATION.match(text)
    if match is None or match["verb"].lower() in patterns.RELATION_NOT_VERBS:
        return None
    rest = match["rest"].strip()
    return Statement(
        text=pronouns_third_person(f"The user's {match['thing']} {rest}"),
        topic=PERSONAL_INFO,
        negated=bool(match["neg"]),
        lasting=bool(patterns.LASTING.search(text)),
    )


def _statement_plan(text: str) -> Statement | None:
    """ "I'm planning to run the Porto marathon" -> "The user is planning to run the Porto
    marathon"; "I plan to ..." -> "The user plans to ...": a plan or project of the user's
    own life (key conversation details). "I'm going to ..." only for a trip, a move or a
    start ("I'm going to visit Japan"), not "I'm going to ask you something"."""
    match = patterns.PLAN.match(text)
    if match is None:
        return None
    verb, rest = match["verb"].lower(), match["rest"].strip()
    if verb in ("plan", "hope", "hoping") and not rest.lower().startswith("to "):
        return None
    if verb in ("going", "flying", "travelling", "traveling", "heading") and not (
        patterns.PLAN_GOING.match(rest)
    ):
        return None
    said = third_person_verb(verb) if verb in ("plan", "hope") else f"is {verb}"
    return Statement(
        text=pronouns_third_person(f"The user {said} {rest}"),
        topic=KEY_CONVERSATION_DETAILS,
        negated=False,
        lasting=False,
    )


def _statement_i_am(text: str) -> Statement | None:
    match = patterns.I_AM.match(text)
    if match is None:
        return None
    said = match["rest"].strip()
    adverbs = _LEADING_ADVERBS.match(said)
    rest = said[adverbs.end() :] if adverbs else said
    if not rest:
        return None
    first = rest.split()[0].lower().strip(",.!?;:")
    neg = " ".join((match["neg"] or "").split())
    if first in patterns.I_AM_VERBS and not neg:
        words = [patterns.I_AM_VERBS[first], rest[len(first) :].strip()]
    elif (
        first.endswith("ing")
        and first not in patterns.PASSING_STATES
        and not neg
        and patterns.ACTIVITY_OBJECT.match(rest[len(first) :].strip())
    ):
        words = ["is", said]
    elif neg and first.endswith("ing") and patterns.LASTING.search(text):
        words = ["is", neg, rest]  # "I'm not teaching anymore"
    elif patterns.BACK_TO.match(rest):
        words = ["is", said]  # "I'm back at Google", not a passing "I'm back"
    elif first.endswith("ing") or first in patterns.PASSING_STATES:
        return None
    else:
        words = ["is", *([neg] if neg else []), said]
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
    if verb in patterns.LIFE_EVENTS and not match["neg"]:
        return _statement_life_event(verb=verb, rest=rest, adverbs=match["adverbs"])
    if verb in patterns.PREFERENCE_VERBS:
        if patterns.PREFERENCE_NOT_OBJECTS.match(rest) or not rest.strip():
            return None
        topic = PREFERENCES
    elif verb in patterns.PERSONAL_VERBS:
        if not rest.strip() or (verb == "have" and patterns.HAVE_NOT_FACTS.match(rest)):
            return None
        if patterns.PREFERENCE_NOT_OBJECTS.match(rest):
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


def _statement_life_event(*, verb: str, rest: str, adverbs: str) -> Statement | None:
    """ "I quit smoking in January" -> "The user quit smoking in January": something that
    happened in the user's life, kept as said (a decision, "I settled on ...", a key
    conversation detail); "I turned 35" -> "The user is 35" (an age, one
    value at a time); "I used to ..." only with "to"."""
    if verb == "turned" and (age := patterns.AGE_TURNED.match(rest)):
        return Statement(
            text=f"The user is {age['age']}", topic=PERSONAL_INFO, negated=False, lasting=False
        )
    phrase = patterns.LIFE_EVENT_PHRASES.get(verb)
    if not rest.strip() or (phrase and not re.match(phrase, rest, re.I)):
        return None
    said = " ".join(["The user", *adverbs.lower().split(), verb])
    return Statement(
        text=said + pronouns_third_person(rest).rstrip(),
        topic=KEY_CONVERSATION_DETAILS if verb in patterns.DECISIONS else PERSONAL_INFO,
        negated=False,
        lasting=False,
    )


def _statement_favourite_named(text: str) -> Statement | None:
    """ "(I think) Vienna is my favourite city now" -> "The user's favourite city is Vienna
    now": a favourite named before it is called one."""
    match = patterns.FAVOURITE_NAMED.match(text)
    if match is None:
        return None
    when = f" {match['when']}" if match["when"] else ""
    return Statement(
        text=f"The user's {match['what'].lower()} is {match['value']}{when}",
        topic=PREFERENCES,
        negated=False,
        lasting=False,
    )


def _statement_name_and_i(text: str) -> Statement | None:
    """ "Mia and I broke up last week" -> "The user and Mia broke up last week": something the
    user and someone named did together."""
    match = patterns.NAME_AND_I.match(text)
    if match is None or match["rest"].split()[0].lower() in patterns.RELATION_NOT_VERBS:
        return None
    return Statement(
        text=pronouns_third_person(f"The user and {match['name']} {match['rest'].strip()}"),
        topic=PERSONAL_INFO,
        negated=False,
        lasting=bool(patterns.LASTING.search(text)),
    )


def _statement_can(text: str) -> Statement | None:
    """ "I can read hiragana now" -> "The user can read hiragana now": a skill of the user's."""
    match = patterns.CAN_SKILL.match(text)
    if match is None:
        return None
    return Statement(
        text=pronouns_third_person(f"The user can {match['skill'].strip()}"),
        topic=PERSONAL_INFO,
        negated=False,
        lasting=False,
    )


def _statement_have_been(text: str) -> Statement | None:
    """ "I've been vegetarian for three years" -> "The user has been vegetarian for three
    years" (not "I've been thinking ...")."""
    match = patterns.HAVE_BEEN.match(text)
    if match is None:
        return None
    return Statement(
        text=pronouns_third_person(f"The user has been {match['rest'].strip()}"),
        topic=PERSONAL_INFO,
        negated=False,
        lasting=False,
    )


def _statement_cannot_like(text: str) -> Statement | None:
    """ "I can't stand coffee", "I can't get into heavy metal" -> "The user does not like
    ...": a negated preference."""
    match = patterns.CANNOT_LIKE.match(text)
    if match is None:
        return None
    thing = pronouns_third_person(match["thing"].strip())
    return Statement(
        text=f"The user does not like {thing}",
        topic=PREFERENCES,
        negated=True,
        lasting=bool(patterns.LASTING.search(text)),
        dropped=patterns.LASTING.sub("", thing).strip(" ,"),
    )


def _statement_answers(text: str) -> Statement | None:
    """ "Please keep your answers short" -> "The user prefers short answers": how the user
    wants to be answered, a preference (not a rule for the agent in general)."""
    match = patterns.ANSWERS_PREFERRED.match(text)
    if match is None:
        return None
    return Statement(
        text=f"The user prefers {match['how'].lower()} answers",
        topic=PREFERENCES,
        negated=False,
        lasting=False,
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
    parsers = (
        _statement_favourite_named,
        _statement_my,
        _statement_relation,
        _statement_plan,
        _statement_i_am,
        _statement_moved,
        _statement_have_been,
        _statement_can,
        _statement_cannot_like,
        _statement_answers,
        _statement_name_and_i,
        _statement_i_verb,
    )
    for parse in parsers:
        statement = parse(text)
        if statement is not None:
            return replace(statement, text=user_clauses_joined(statement.text))
    return None
