"""What a third-person fact claims, clause by clause, whatever the words: the subject each
clause is about (where the person lives, their work, studies, diet, partner, a favourite, how
they take something) with its value, or what a negation retires ("is not a ferry mechanic
anymore", "quit nursing", "used to play football", "broke up with Mia").

Consolidation matches facts to memories by these claims rather than by sentence shape: a newer
claim about the same subject supersedes an older one, a negation retires the claims it names,
and a claim standing in a clause of its own ("The user lives in Gdansk, where they work as a
ferry mechanic") is replaced or retired alone, the rest of the memory kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory_app.ranking import tokenize

LOCATION = "location"
WORK = "work"
STUDY = "study"
DIET = "diet"
PARTNER = "partner"


@dataclass(frozen=True)
class Claim:
    """One clause's claim: ``who`` it is about ("" for the person, else their relative:
    "sister"), the ``slot`` (one value at a time: "location", "work", "favourite colour" ...;
    "" when the person may hold many, "likes tea"), the ``value`` said, whether it is a
    ``negated`` one (which retires what it names) and where its clause stands in the text."""

    who: str
    slot: str
    value: str
    negated: bool
    start: int
    end: int

    @property
    def main(self) -> bool:
        """Whether the claim is the fact's first clause (the fact stands or falls with it)."""
        return self.start == 0

    def terms(self) -> frozenset[str]:
        """The value's index terms, the implied ones added ("pescatarian": fish)."""
        words = set(tokenize(self.value)) - _GENERIC_TERMS
        for word, implied in _IMPLIED.items():
            if word in self.value.casefold():
                words |= set(tokenize(implied))
        return frozenset(words)


_GENERIC_TERMS = frozenset(
    ["user", "anymor", "either", "now", "still", "day", "week", "month", "year", "last", "sinc"]
)
_IMPLIED = {
    "pescatarian": "fish",
    "pescetarian": "fish",
    "teacher": "teaching",
    "nurse": "nursing",
    "student": "studies",
}

_CAP = r"(?-i:[A-Z][\w'.&-]*(?:\s+(?:[A-Z][\w'.&-]*|de|da|do|del|am|upon|on))*)"
_ADVERBS = r"(?:(?:now|still|currently|also|really|actually|just|finally|recently|usually|fully|"
_ADVERBS += r"strictly|mostly|back|again|officially)\s+)*"
_RELATIVES = (
    "sister|brother|sibling|mother|mom|mum|father|dad|son|daughter|grandmother|grandma|"
    "grandfather|grandpa|aunt|uncle|cousin|niece|nephew|friend|best friend|boss|colleague|"
    "roommate|flatmate|dog|cat"
)
_PARTNERS = r"boyfriend|girlfriend|partner|wife|husband|spouse|fianc[ée]e?"
_DIETS = (
    r"vegetarian|vegan|pescatarian|pescetarian|keto|paleo|gluten-free|lactose-free|kosher|halal|"
    r"flexitarian|carnivore|omnivore|plant-based|raw vegan"
)
_OCCUPATIONS = (
    "teacher|nurse|doctor|engineer|developer|programmer|designer|mechanic|barista|pharmacist|"
    "analyst|accountant|auditor|lawyer|solicitor|attorney|chef|cook|waiter|waitress|manager|"
    "consultant|architect|electrician|plumber|carpenter|welder|driver|pilot|journalist|writer|"
    "editor|translator|researcher|scientist|professor|lecturer|tutor|librarian|cashier|clerk|"
    "secretary|assistant|receptionist|firefighter|officer|soldier|farmer|baker|butcher|dentist|"
    "vet|veterinarian|therapist|psychologist|surgeon|paramedic|midwife|carer|caregiver|cleaner|"
    "photographer|artist|musician|actor|actress|ceo|cto|cfo|coo|founder|co-founder|cofounder|"
    "freelancer|contractor|entrepreneur|salesperson|marketer|recruiter|banker|trader|economist|"
    "statistician|mathematician|physicist|chemist|biologist|technician|builder|gardener|"
    "courier|bartender|hairdresser|barber|tailor|coach|trainer|instructor|intern|apprentice|"
    "administrator|director|executive|supervisor|owner|postman|policeman|policewoman|"
    "paralegal|radiologist|optician|physiotherapist|social worker|data scientist|"
    "product manager|software engineer|web developer|civil servant|housekeeper|nanny|"
    "babysitter|dj|illustrator|animator|copywriter|programme manager|project manager"
)
_WORK_PLACES = (
    "business|company|shop|store|restaurant|café|cafe|bakery|bar|firm|studio|practice|agency|"
    "startup|clinic|salon|school|gym"
)
_FOODS = r"meat|fish|chicken|pork|beef|seafood|red meat"

# How a clause starts: whom it is about. "The user's sister Ana ...", "The user and Mia ...",
# "The user ...", "they ..." (the person again), a bare verb (the clause before's subject).
_WHO = re.compile(
    r"^(?:(?:and|but|so|where|while|since|as|because|then|yet)\s+)*"
    r"(?:the\s+user(?:'s\s+(?:(?:best|little|older|younger|big|elder|new)\s+)?"
    rf"(?P<relative>{_RELATIVES}|{_PARTNERS})(?:s)?(?:\s+(?-i:[A-Z][\w'-]+))?(?=\s|'s)"
    r"|\s+and\s+(?P<with>(?-i:[A-Z][\w'-]+)))?|(?P<they>they|he|she))?\s*",
    re.I,
)
_CLAUSE = re.compile(
    r",\s+(?=(?:and\s+|but\s+|so\s+|where\s+|while\s+)?(?:the\s+user|they|he|she)\b)"
    r"|,?\s+(?:and|but|so|where|while)\s+(?=(?:the\s+user\b|they\b|he\b|she\b|"
    r"(?:now\s+|then\s+|also\s+)?(?:is|are|was|has|had|joined|moved|started|became|got|"
    r"went|works?|lives?|teaches|runs|eats|drinks|plays)\b))",
    re.I,
)


def _affirmations() -> tuple[tuple[str, re.Pattern], ...]:
    cap = _CAP
    rows = (
        (
            LOCATION,
            rf"^{_ADVERBS}(?:lives?|living|has\s+been\s+living|is\s+living)\b"
            rf"(?:\s+[\w']+){{0,5}}?\s+in\s+(?P<v>{cap})",
        ),
        (
            LOCATION,
            rf"^(?:is|are|has\s+been|have\s+been)\s+{_ADVERBS}(?:based\s+|settled\s+|"
            rf"staying\s+)?in\s+(?P<v>{cap})",
        ),
        (
            LOCATION,
            rf"^{_ADVERBS}(?:has\s+)?(?:moved|relocated|went|came|settled)\s+(?:back\s+)?"
            rf"(?:to|in)\s+(?:the\s+)?(?P<v>{cap})",
        ),
        (
            WORK,
            rf"^{_ADVERBS}(?:works?|working|has\s+been\s+working|is\s+working|is\s+back\s+"
            r"to\s+working|(?:is|are)\s+employed|got\s+a\s+job)\s+(?:as|at|for|in)\s+(?P<v>.+)",
        ),
        (WORK, rf"^(?:is|are)\s+{_ADVERBS}at\s+(?P<v>{cap})"),
        (WORK, rf"^{_ADVERBS}teach(?:es)?\s+(?P<v>.+)"),
        (
            WORK,
            rf"^{_ADVERBS}(?:runs?|owns?|opened|started|founded)\s+(?P<v>(?:their|a|an|the)\s+"
            rf"(?:own\s+)?(?:[\w'-]+\s+){{0,3}}(?:{_WORK_PLACES})\b.*)",
        ),
        (WORK, r"^joined\s+(?P<v>.+?\s+as\s+.+)"),
        (WORK, r"^(?:(?:has\s+)?retired|is\s+(?:now\s+)?retired)\b(?P<v>.*)"),
        (
            WORK,
            rf"^(?:is|are|became|has\s+become)\s+{_ADVERBS}(?:a|an)\s+"
            rf"(?P<v>(?:[\w'-]+\s+){{0,3}}?(?:{_OCCUPATIONS})s?\b.*)",
        ),
        (WORK, rf"^(?:is|are)\s+{_ADVERBS}(?P<v>(?:freelance|self-employed|unemployed)\b.*)"),
        (STUDY, r"^(?:studies|is\s+studying|is\s+(?:a|an)\s+(?:[\w'-]+\s+)?student)\b(?P<v>.*)"),
        (
            DIET,
            rf"^(?:is|are|has\s+been|went|became)\s+{_ADVERBS}"
            rf"(?:back\s+to\s+|fully\s+|a\s+|an\s+)*(?P<v>{_DIETS})\b",
        ),
        (DIET, r"^(?:is|are)\s+(?:now\s+|still\s+|back\s+)?on\s+a\s+(?P<v>[\w-]+)\s+diet"),
        (
            DIET,
            rf"^{_ADVERBS}(?:eats?|is\s+eating|started\s+eating|went\s+back\s+to\s+eating|"
            rf"eats\s+(?:some\s+)?)\s+(?P<v>{_FOODS})\b",
        ),
        (
            PARTNER,
            rf"^(?:has|have)\s+a\s+(?:new\s+)?(?P<rel>{_PARTNERS})\b(?:\s+now)?(?:,?\s+"
            rf"(?:called|named)\s+(?P<v>{cap}))?",
        ),
        (
            PARTNER,
            rf"^(?:married|got\s+married\s+to|is\s+married\s+to|got\s+engaged\s+to|"
            rf"is\s+engaged\s+to|is\s+dating|is\s+seeing|is\s+with)\s+(?P<v>{cap})",
        ),
        (PARTNER, r"^(?:is|are)\s+(?:now\s+)?(?P<v>single)\b"),
        (
            PARTNER,
            r"^(?:got|are|is)\s+(?:back\s+together|together\s+again|together|married|"
            r"engaged)\b(?P<v>)",
        ),
    )
    return tuple((slot, re.compile(pattern, re.I)) for slot, pattern in rows)


_AFFIRMATIONS = _affirmations()
_NAMING = re.compile(
    rf"^'s\s+(?:(?:best|little|older|younger|big|elder|new)\s+)?(?P<rel>{_RELATIVES}|"
    rf"{_PARTNERS})(?:\s+(?:these\s+days|now|at\s+the\s+moment))?(?:'s\s+(?:first\s+)?name\s+is|"
    rf"\s+is\s+called|\s+is\s+named|\s+is)\s+(?:(?:now|still|actually)\s+)?(?P<v>{_CAP})"
)
_FAVOURITE = re.compile(
    r"^'s\s+(?P<what>(?:favou?rite|preferred)\s+[\w' -]{1,40}?)(?:\s+(?:these\s+days|now|"
    r"at\s+the\s+moment|right\s+now|lately))?\s+(?:is|are|was|were|has\s+been|remains)\s+"
    r"(?P<v>.+)",
    re.I,
)
_FAVOURITE_INVERTED = re.compile(
    r"\b(?P<v>(?-i:[A-Z][\w'.-]*(?:\s+[A-Z][\w'.-]*)*))\s+is\s+(?:the\s+user's|their)\s+"
    r"(?P<what>favou?rite\s+[\w-]+)",
    re.I,
)
_PREFERS = re.compile(
    rf"^{_ADVERBS}(?:prefers?|would\s+rather\s+have)\s+(?P<v>(?:[\w'-]+\s+){{0,4}}?"
    r"(?P<head>[\w'-]+?))(?=\s+(?:on|in|at|for|when|over|to|with|than|because|instead)\b|,|\.|$)",
    re.I,
)
_HOW_THEIR = re.compile(
    r"^(?:likes?|takes?|drinks?|has|have|prefers?|wants?|eats?)\s+their\s+(?P<head>[\w-]+)\s+"
    r"(?P<v>.+)",
    re.I,
)
_MANY = re.compile(
    rf"^{_ADVERBS}(?:likes?|loves?|enjoys?|adores?|drinks?|eats?|plays?|goes|go|drives?|owns?|"
    r"uses?|reads?|swims?|runs?|cycles?|smokes?|watches|listens\s+to|has|have|takes?|visits?|"
    r"commutes?|rides?|walks?|speaks?|cooks?|practi[sc]es?|wears?)\s+(?P<v>.+)",
    re.I,
)
_NEGATIONS = tuple(
    re.compile(pattern, re.I)
    for pattern in (
        r"^(?:does|do|did)\s+not\s+(?:really\s+|even\s+)?(?P<verb>[\w']+)\s+(?P<v>.*)",
        r"^(?:is|are|was)\s+(?:no\s+longer|not)\s+(?:really\s+|even\s+)?(?P<v>.+)",
        r"^(?:no\s+longer|never)\s+(?P<verb>[\w']+)\s+(?P<v>.*)",
        r"^(?:has\s+|have\s+|just\s+|finally\s+|recently\s+|also\s+)*(?P<verb>quit|stopped|left|"
        r"gave\s+up|gave\s+up\s+on|sold|gave\s+away|finished|graduated|dropped\s+out\s+of|"
        r"broke\s+up\s+with|split\s+up\s+with|divorced|lost|moved\s+out\s+of|"
        r"used\s+to(?:\s+be)?)\b\s*(?P<v>.*)",
        r"^(?P<verb>can\s*not|cannot)\s+(?:stand|bear|get\s+into)\s+(?P<v>.*)",
        r"^(?:has|have)\s+not\s+(?:been\s+)?(?P<verb>[\w']+)\s+(?P<v>.*)",
        r"^(?P<verb>broke\s+up|split\s+up|separated|divorced|are\s+not\s+together|"
        r"are\s+no\s+longer\s+together)\b(?P<v>)",
    )
)
# What a negation's verb says it is about, when its object does not name it.
_NEGATED_SLOTS = {
    "live": LOCATION,
    "work": WORK,
    "teach": WORK,
    "graduated": STUDY,
    "finished": STUDY,
    "dropped out of": STUDY,
    "study": STUDY,
}
_OBJECT_SLOTS = (
    (re.compile(r"^(?:their\s+)?(?:job|work|position|role)\b", re.I), WORK),
    (re.compile(r"^(?:their\s+)?(?:degree|studies|course|master's|phd|university)\b", re.I), STUDY),
)
_TAIL = re.compile(
    r"\s*(?:\b(?:anymore|any\s+more|either|again|these\s+days|now|too)\b|"
    r"\b(?:last|this|in|since|for|after|a)\s+(?:\w+\s+)?(?:week|month|year|spring|summer|autumn|"
    r"fall|winter|january|february|march|april|may|june|july|august|september|october|november|"
    r"december|\d{4}|years?|months?|while|ago)\b.*|,.*)$",
    re.I,
)


def _clauses(text: str) -> list[tuple[int, int]]:
    """The spans of the fact's clauses (the first is the fact's own)."""
    spans, start = [], 0
    for match in _CLAUSE.finditer(text):
        if match.start() > start:
            spans.append((start, match.start()))
        start = match.end()
    spans.append((start, len(text)))
    return spans


def _what(words: str) -> str:
    """A favourite's subject as one spelling: "favourite city"."""
    return " ".join(words.casefold().split()).replace("favorite", "favourite")


def _value(raw: str) -> str:
    value = _TAIL.sub("", " ".join(raw.split()).rstrip(" .!"))
    return value.strip(" ,")


def _negation(predicate: str, *, who: str, span: tuple[int, int]) -> Claim | None:
    for pattern in _NEGATIONS:
        match = pattern.match(predicate)
        if match is None:
            continue
        verb = " ".join((match.groupdict().get("verb") or "").casefold().split())
        value = _value(match["v"])
        value = re.sub(r"^(?:to\s+)?(?:be\s+)?", "", value, flags=re.I)
        slot = _NEGATED_SLOTS.get(verb, _NEGATED_SLOTS.get(verb.rstrip("s"), ""))
        if verb == "used to":
            first = value.split()[0].casefold() if value.split() else ""
            slot = {"live": LOCATION, "work": WORK, "teach": WORK, "study": STUDY}.get(first, "")
        for pattern_slot, slot_of in _OBJECT_SLOTS:
            if pattern_slot.match(value):
                slot, value = slot_of, ""
        if verb in ("broke up", "split up", "separated", "divorced") or verb.startswith("are "):
            slot = PARTNER
        if verb.startswith(("broke up with", "split up with", "divorced")):
            slot = PARTNER
        if re.match(r"^with\s+", value, re.I) or value.casefold() == "single":
            slot = PARTNER
            value = re.sub(r"^with\s+", "", value, flags=re.I)
        if not value and not slot:
            return None
        return Claim(who=who, slot=slot, value=value, negated=True, start=span[0], end=span[1])
    return None


def _affirmation(predicate: str, *, who: str, span: tuple[int, int], text: str) -> Claim | None:
    def claim(slot: str, value: str) -> Claim:
        return Claim(who=who, slot=slot, value=value, negated=False, start=span[0], end=span[1])

    for slot, pattern in _AFFIRMATIONS:
        match = pattern.match(predicate)
        if match is None:
            continue
        value = match["v"] or ""
        if slot == PARTNER:
            rel = (match.groupdict().get("rel") or "").casefold()
            return claim(PARTNER, " ".join([rel, value]).strip() or predicate)
        if slot == WORK and not value.strip():
            value = "retired"
        return claim(slot, _value(value) or value.strip())
    moved_there = re.match(rf"^{_ADVERBS}(?:moved|relocated)\s+there\b", predicate, re.I)
    place = re.search(rf"\bin\s+(?P<v>{_CAP})", text)
    if moved_there and place:
        return claim(LOCATION, place["v"])
    how = _HOW_THEIR.match(predicate)
    if how:
        return claim(
            f"how their {tokenize(how['head'])[0] if tokenize(how['head']) else ''}", how["v"]
        )
    prefers = _PREFERS.match(predicate)
    if prefers and tokenize(prefers["head"]):
        return claim(f"prefers {tokenize(prefers['head'])[0]}", prefers["v"])
    many = _MANY.match(predicate)
    if many:
        return claim("", _value(many["v"]) or many["v"])
    return None


def fact_claims(*, text: str) -> list[Claim]:
    """The claims of a third-person fact, clause by clause (see the module docstring)."""
    text = " ".join(text.split()).rstrip(".")
    claims: list[Claim] = []
    main_who = ""
    for index, (start, end) in enumerate(_clauses(text)):
        clause = text[start:end]
        who_match = _WHO.match(clause)
        if index == 0 and not re.match(r"the\s+user\b", clause, re.I):
            inverted = _FAVOURITE_INVERTED.search(clause)
            if inverted:
                claims.append(Claim("", _what(inverted["what"]), inverted["v"], False, start, end))
            continue
        relative = (who_match["relative"] or "").casefold() if who_match else ""
        predicate = clause[who_match.end() :] if who_match else clause
        if re.match(r"the\s+user's\s", clause, re.I):
            naming = _NAMING.match(clause[len("the user") :])
            favourite = _FAVOURITE.match(clause[len("the user") :])
            if naming:
                rel = naming["rel"].casefold()
                if re.fullmatch(_PARTNERS, rel, re.I):
                    claims.append(Claim("", PARTNER, f"{rel} {naming['v']}", False, start, end))
                else:
                    claims.append(Claim("", f"family {rel}", naming["v"], False, start, end))
                continue
            if favourite:
                what = _what(favourite["what"])
                claims.append(Claim("", what, favourite["v"], False, start, end))
                continue
            if not relative:
                if index == 0:
                    main_who = "-"
                continue
        who = relative
        if who_match and who_match["with"]:
            couple = _negation(predicate, who="", span=(start, end)) or _affirmation(
                predicate, who="", span=(start, end), text=text
            )
            if couple is not None and couple.slot == PARTNER:
                claims.append(Claim("", PARTNER, who_match["with"], couple.negated, start, end))
            continue
        if index == 0:
            main_who = who
        elif not (who_match and (who_match["they"] or re.match(r"the\s+user", clause, re.I))):
            who = main_who
            if who == "-":
                continue
        elif who_match["they"] and who_match["they"].casefold() in ("he", "she"):
            continue
        claim = _negation(predicate, who=who, span=(start, end)) or _affirmation(
            predicate, who=who, span=(start, end), text=text
        )
        if claim is not None:
            claims.append(claim)
    return claims


def _terms_meet(a: frozenset[str], b: frozenset[str]) -> bool:
    """Whether two sets of index terms share one, a stem prefixing another ("teach" and
    "teacher") counting as shared."""
    return any(
        x == y or (min(len(x), len(y)) >= 4 and (x.startswith(y) or y.startswith(x)))
        for x in a
        for y in b
    )


def claim_retires(negation: Claim, claim: Claim) -> bool:
    """Whether ``negation`` retires ``claim``: same person, an affirmative claim of a slot it
    may be about, whose value it names (or, naming none, of the slot it names)."""
    if not negation.negated or claim.negated or negation.who != claim.who:
        return False
    other_slot = negation.slot and claim.slot and negation.slot != claim.slot
    if other_slot and not (negation.slot == PARTNER and claim.slot.startswith("family ")):
        return False
    wanted = negation.terms()
    if not wanted:
        return bool(negation.slot) and negation.slot == claim.slot
    return _terms_meet(wanted, claim.terms())


def claim_supersedes(newer: Claim, older: Claim) -> bool:
    """Whether the affirmative ``newer`` replaces ``older``: the same person and subject (one
    value at a time) and another value; or ``older`` a negation of what ``newer`` affirms
    ("does not live in Lisbon anymore" before "lives in Lisbon")."""
    if newer.negated or newer.who != older.who:
        return False
    if older.negated:
        if older.slot and newer.slot and older.slot != newer.slot:
            return False
        return bool(older.terms()) and _terms_meet(older.terms(), newer.terms())
    if not newer.slot or newer.slot != older.slot:
        return False
    return newer.value.casefold() != older.value.casefold()
