"""The profile: the few structured facts about a person that every reply should know (the
whitepaper's "small stable profile"), read from a fact's third-person text.

A profile fact's ``structured`` value is one field of the profile: ``{"name": "Ana"}``,
``{"location": "Porto"}``, ``{"work": "a nurse at Santa Maria"}``, ``{"diet": "vegetarian"}``,
or, for the fields that hold many entries, one entry: ``{"family": {"sister": "Ana"}}``,
``{"preferences": {"favourite colour": "blue"}}``. The memory holding it is the source of the
``user:`` key of the same name that the agent reads (``memory_app.services.profile``).
"""

from __future__ import annotations

import re
from typing import Any

NAME = "name"
LOCATION = "location"
WORK = "work"
FAMILY = "family"
DIET = "diet"
PREFERENCES = "preferences"
# The profile's fields in the order the profile card and the prompt show them; the mapping
# fields hold one entry per relative or per favourite.
PROFILE_FIELDS = (NAME, LOCATION, WORK, FAMILY, DIET, PREFERENCES)
MAPPING_FIELDS = frozenset({FAMILY, PREFERENCES})
VALUE_MAX_CHARS = 120

_RELATIVES = (
    "wife|husband|partner|spouse|boyfriend|girlfriend|fiancée?|sister|brother|mother|mom|mum|"
    "father|dad|son|daughter|grandmother|grandfather|grandma|grandpa|aunt|uncle|cousin|niece|"
    "nephew|twin|child|baby|stepmother|stepfather|stepson|stepdaughter"
)
_DIETS = (
    "vegetarian|vegan|pescatarian|pescetarian|gluten-free|lactose intolerant|lactose-intolerant|"
    "kosher|halal|coeliac|celiac|diabetic|keto|allergic to [a-z ]{2,40}"
)
_NAMED = r"(?P<who>(?-i:[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)?))"
_READINGS: tuple[tuple[str, re.Pattern], ...] = (
    (NAME, re.compile(r"^the user's (?:first |full )?name is (?P<value>[^,;]+)", re.I)),
    (NAME, re.compile(r"^the user (?:is called|is named|goes by) (?P<value>[^,;]+)", re.I)),
    (LOCATION, re.compile(r"^the user (?:currently |now )?lives in (?P<value>[^,;]+)", re.I)),
    (
        WORK,
        re.compile(
            r"^the user (?:currently |now )?works (?:as )?(?P<value>(?:at|for|an?) [^;]+)", re.I
        ),
    ),
    (DIET, re.compile(rf"^the user is (?:a )?(?:strict )?(?P<value>{_DIETS})\b", re.I)),
    (DIET, re.compile(r"^the user's diet is (?P<value>[^,;]+)", re.I)),
)
_RELATIVE = re.compile(
    rf"^the user's (?P<relative>{_RELATIVES})(?:'s name is| is called| is named| is)? {_NAMED}",
    re.I,
)
_FAVOURITE = re.compile(
    r"^the user's (?P<what>favou?rite [\w' -]{1,40}?) (?:is|are) (?P<value>[^,;]+)", re.I
)


def _clean(value: str) -> str:
    value = " ".join(value.split()).rstrip(" .!")
    return value[:VALUE_MAX_CHARS]


def profile_read(*, text: str) -> dict[str, Any] | None:
    """The profile field a third-person fact states (see the module docstring), or None.

    Negated facts state none ("The user no longer lives in Lisbon" empties nothing by itself:
    the newer fact that replaces it fills the field).
    """
    clean = " ".join(text.split())
    if re.search(r"\b(?:not|no longer|never|anymore)\b|n't\b", clean, re.I):
        return None
    for field, pattern in _READINGS:
        match = pattern.match(clean)
        if match and _clean(match["value"]):
            return {field: _clean(match["value"])}
    relative = _RELATIVE.match(clean)
    if relative and relative["who"].split()[0].casefold() not in {"the", "a", "an"}:
        return {FAMILY: {relative["relative"].casefold(): _clean(relative["who"])}}
    favourite = _FAVOURITE.match(clean)
    if favourite and _clean(favourite["value"]):
        what = " ".join(favourite["what"].casefold().split())
        return {PREFERENCES: {what: _clean(favourite["value"])}}
    return _profile_from_claim(clean)


_SAID_WORK = re.compile(
    r"^the user\s+(?:(?:now|still|currently|also|back)\s+)*(?:is\s+(?:(?:now|still|currently|"
    r"back|also)\s+)*|works\s+(?:as\s+)?|has been working\s+(?:as\s+)?|is working\s+(?:as\s+)?)?",
    re.I,
)
# A stay bound to a time fills no field ("The user is in Berlin this week").
_PASSING = re.compile(
    r"\b(?:today|tonight|tomorrow|this\s+(?:week|weekend|morning|afternoon|evening)|next\s+week|"
    r"for\s+the\s+(?:week|weekend)|on\s+holiday|on\s+vacation|on\s+a\s+trip)\b",
    re.I,
)
_FOODS = frozenset(["meat", "fish", "chicken", "pork", "beef", "seafood", "red meat"])
_SAID_TAIL = re.compile(r"\s+(?:now|these days|anymore|since \w+|again)$", re.I)


def _profile_from_claim(text: str) -> dict[str, Any] | None:
    """The field the first clause of a fact fills however it is worded ("The user is based in
    Milan", "The user is a teacher now", "The user is back to vegetarian"), by its claim
    (:mod:`memory_app.extraction.offline.claims`)."""
    from memory_app.extraction.offline.claims import DIET, LOCATION, PARTNER, WORK, fact_claims

    claim = next((c for c in fact_claims(text=text) if c.main and not c.who), None)
    if claim is None or claim.negated or not claim.value.strip() or _PASSING.search(text):
        return None
    if claim.slot == DIET and claim.value.casefold() in _FOODS:
        return {DIET: f"eats {claim.value.casefold()}"}
    if claim.slot in (LOCATION, DIET):
        return {claim.slot: _clean(claim.value)}
    if claim.slot == WORK:
        said = _SAID_WORK.sub("", text[claim.start : claim.end]).strip(" ,.")
        said = _SAID_TAIL.sub("", said)
        return {WORK: _clean(said)} if said else None
    if claim.slot == PARTNER and " " in claim.value and claim.value.split()[-1][:1].isupper():
        relation, name = claim.value.rsplit(" ", 1)
        return {FAMILY: {relation: _clean(name)}}
    return None


def profile_sentence(*, field: str, value: str, entry: str = "") -> str:
    """The fact a profile card's correction states: ``value`` of ``field`` (of its ``entry``,
    for family and preferences) as a third-person sentence."""
    value = _clean(value)
    if field == NAME:
        return f"The user's name is {value}."
    if field == LOCATION:
        return f"The user lives in {value}."
    if field in MAPPING_FIELDS:
        return f"The user's {entry} is {value}."
    return f"The user's {field} is {value}."


def profile_field_valid(structured: Any) -> bool:
    """Whether ``structured`` is one profile field as this module defines it (a model's answer
    is checked with this before it is kept)."""
    if not isinstance(structured, dict) or len(structured) != 1:
        return False
    ((field, value),) = structured.items()
    if field not in PROFILE_FIELDS:
        return False
    if field in MAPPING_FIELDS:
        return (
            isinstance(value, dict)
            and len(value) == 1
            and all(isinstance(k, str) and k and isinstance(v, str) and v for k, v in value.items())
        )
    return isinstance(value, str) and bool(value.strip())


def profile_merge(fields: list[dict[str, Any]]) -> dict[str, Any]:
    """The profile the structured values of ``fields`` make, oldest first: a later value of a
    field (or of an entry of a mapping field) replaces an earlier one."""
    profile: dict[str, Any] = {}
    for structured in fields:
        for field, value in structured.items():
            if field in MAPPING_FIELDS:
                profile.setdefault(field, {}).update(value)
            else:
                profile[field] = value
    return profile


def profile_subject(structured: dict[str, Any] | None) -> str:
    """What a profile fact is about, one value at a time ("name", "family:sister",
    "preferences:favourite colour"), or "" for none: two facts of one subject conflict."""
    if not structured:
        return ""
    ((field, value),) = structured.items()
    if field in MAPPING_FIELDS and isinstance(value, dict):
        return f"{field}:{next(iter(value), '')}"
    return field
