"""The offline extraction rules, as the package docstring specifies them, and the reading of a
fact's subject and polarity that consolidation shares with them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from memory_app.extraction.facts import (
    CREATE_MEMORY_TOOL,
    DEFAULT_IMPORTANCE,
    DETAIL_MIN_TERMS,
    EXCERPT_CHARS,
    IMPORTANCE,
    USER_AUTHOR,
    ExtractedFact,
    FactKind,
)
from memory_app.models import SourceType
from memory_app.ranking import tokenize
from memory_app.topics import (
    EXPLICIT_INSTRUCTIONS,
    KEY_CONVERSATION_DETAILS,
    PERSONAL_INFO,
    PREFERENCES,
)
from sessions_app.events import Event

_SENTENCE_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n+|,?\s+(?:and|but)\s+(?=(?:I|my)\b)", re.I)
_CLAUSE_SPLIT = re.compile(r",\s+(?=(?:I|[Mm]y)\b)")
_FILLER = re.compile(
    r"^(?:(?:oh|well|so|also|and|btw|by\s+the\s+way|ok|okay|hey|hi|hello|fyi)\b[,!:]?\s*)+", re.I
)
_REMEMBER = re.compile(
    r"^(?:(?:can|could|would)\s+you\s+)?(?:please\s+)?"
    r"(?:remember|don't\s+forget|do\s+not\s+forget|keep\s+in\s+mind)(?:\s+that\b|\s*:)?\s+"
    r"(?!(?:to|when|how|what|why|where|who|if|me|this|it|that)\b)(?P<fact>.+)$",
    re.I,
)
_CORRECTION = re.compile(
    r"^(?:(?:actually|correction|sorry|oops|wait)\b[,:!]?\s+(?:i\s+meant,?\s+)?"
    r"|no[,!.]\s+(?=(?:i|my)\b)|i\s+meant,?\s+)",
    re.I,
)
_NOT_BUT_COPULA = re.compile(
    r"\b(?P<verb>is|am|are|was)\s+not\s+(?P<old>[^,;]+?)\s*,?\s+but\s+(?P<new>[^,;]+)$", re.I
)
_NOT_BUT_PREPOSITION = re.compile(
    r"\bnot\s+(?P<prep>in|at|as|to|from|for|with|on)\s+(?P<old>[^,;]+?)\s*,?\s+but\s+"
    r"(?:(?P=prep)\s+)?(?P<new>[^,;]+)$",
    re.I,
)
_CONTRACTIONS = (
    (re.compile(r"\bI'm\b", re.I), "I am"),
    (re.compile(r"\bI've\b", re.I), "I have"),
    (re.compile(r"\bdon't\b", re.I), "do not"),
    (re.compile(r"\bisn't\b", re.I), "is not"),
    (re.compile(r"\baren't\b", re.I), "are not"),
    (re.compile(r"\bwasn't\b", re.I), "was not"),
)
_MY = re.compile(
    r"^my\s+(?P<thing>[a-z][\w' -]{0,40}?)\s+(?P<verb>is|are|was|were)"
    r"(?P<neg>\s+not|\s+no\s+longer)?\s+(?P<value>.+)$",
    re.I,
)
_MY_CONTRACTED = re.compile(
    r"^my\s+(?P<thing>[a-z][\w -]{0,40}?)'s(?P<neg>\s+not|\s+no\s+longer)?\s+(?P<value>.+)$",
    re.I,
)
_MY_NOT_FACTS = frozenset(
    [
        "question",
        "point",
        "problem",
        "issue",
        "guess",
        "bad",
        "turn",
        "pleasure",
        "mistake",
        "concern",
        "request",
        "answer",
        "apologies",
        "bet",
        "hope",
        "idea",
        "worry",
    ]
)
_I_AM = re.compile(r"^i\s+am\s+(?P<neg>not\s+|no\s+longer\s+)?(?P<rest>.+)$", re.I)
_I_AM_VERBS = {"living": "lives", "working": "works", "studying": "studies"}
_PASSING_STATES = frozenset(
    [
        "sorry",
        "sure",
        "fine",
        "good",
        "ok",
        "okay",
        "tired",
        "ready",
        "back",
        "done",
        "confused",
        "curious",
        "wondering",
        "afraid",
        "just",
        "still",
        "here",
        "glad",
        "happy",
        "sad",
        "bored",
        "busy",
        "hungry",
        "thirsty",
        "late",
        "new",
        "unsure",
        "not",
        "able",
        "going",
        "trying",
        "looking",
        "thinking",
        "asking",
    ]
)
_I_VERB = re.compile(
    r"^i\s+(?P<adverbs>(?:(?:also|still|currently|now|really|actually|usually|mostly|"
    r"absolutely|totally|just|generally)\s+)*)"
    r"(?P<neg>(?:do\s+not|no\s+longer|never)\s+(?:really\s+)?)?"
    r"(?P<verb>[a-z]+)\b(?P<rest>.*)$",
    re.I,
)
_PREFERENCE_VERBS = frozenset(["like", "love", "prefer", "hate", "dislike", "enjoy", "adore"])
_PERSONAL_VERBS = frozenset(
    [
        "live",
        "work",
        "study",
        "teach",
        "own",
        "have",
        "speak",
        "use",
        "play",
        "drive",
        "eat",
        "drink",
        "cook",
        "moved",
        "grew",
        "was",
    ]
)
_PREFERENCE_NOT_OBJECTS = re.compile(
    r"^\s*(?:it|that|this|them|those|these|you|your|how|what|when)\b", re.I
)
_HAVE_NOT_FACTS = re.compile(
    r"^\s*(?:to|a\s+question|a\s+quick\s+question|no\s+idea|been|got|a\s+problem|an\s+idea)\b",
    re.I,
)
_PAST_PHRASES = {"moved": r"^\s+to\b", "grew": r"^\s+up\b", "was": r"^\s+born\b"}
_MOVED = re.compile(
    r"^i\s+(?:have\s+)?(?:(?:just|recently|finally|also|actually)\s+)*moved\s+"
    r"(?:from\s+(?P<origin>[^,;]+?)\s+)?to\s+(?P<rest>.+)$",
    re.I,
)
_MONTHS_SEASONS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "spring|summer|autumn|fall|winter"
)
_PLACE_END = re.compile(
    r",|\s+(?:last|this|next|for|because|with|after|when|since|so|as|about|recently|ago|and|"
    r"but|to|from|a\s+(?:year|month|week|while|few))\b"
    rf"|\s+in\s+(?:\d|the\s+(?:{_MONTHS_SEASONS})\b|(?:{_MONTHS_SEASONS})\b)",
    re.I,
)
_SWITCHED = re.compile(
    r"^i\s+(?:have\s+)?(?:(?:just|recently|finally|also|now)\s+)*(?:switched|changed)"
    r"(?:\s+over)?\s+(?:from\s+(?P<old>[^,;]+?)\s+)?to\s+(?P<new>[^,;]+)$",
    re.I,
)
_LASTING = re.compile(r"\b(?:no\s+longer|anymore|any\s+more)\b", re.I)
_PRONOUNS = (
    (re.compile(r"\bI\s+am\b"), "they are"),
    (re.compile(r"\bI\s+was\b"), "they were"),
    (re.compile(r"\bmyself\b", re.I), "themselves"),
    (re.compile(r"\bmine\b", re.I), "theirs"),
    (re.compile(r"\bmy\b", re.I), "their"),
    (re.compile(r"\bme\b", re.I), "them"),
    (re.compile(r"\bI\b"), "they"),
)


@dataclass(frozen=True)
class _Statement:
    text: str
    topic: str
    negated: bool
    lasting: bool
    dropped: str = ""  # what a negated preference no longer likes: "coffee"


def _third_person_verb(verb: str) -> str:
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


def _pronouns_third_person(text: str) -> str:
    for pattern, replacement in _PRONOUNS:
        text = pattern.sub(replacement, text)
    return text


def _sentences(text: str) -> list[str]:
    """The sentences of a message, a sentence also ending before ", I" or ", my" when what
    precedes is more than an opening word ("Actually, I ..." and "No, my ..." stay whole)."""
    pieces = []
    for sentence in _SENTENCE_SPLIT.split(text):
        start = 0
        for match in _CLAUSE_SPLIT.finditer(sentence):
            head = _FILLER.sub("", sentence[start : match.start()].strip())
            if len(head.split()) >= 2:
                pieces.append(sentence[start : match.start()])
                start = match.end()
        pieces.append(sentence[start:])
    return pieces


def _sentence_clean(sentence: str) -> str:
    sentence = sentence.replace("\u2019", "'").strip()
    sentence = _FILLER.sub("", sentence)
    return sentence.strip().rstrip(".!?;").strip()


def _contractions_expand(text: str) -> str:
    for pattern, replacement in _CONTRACTIONS:
        text = pattern.sub(replacement, text)
    return text


def _statement_my(text: str) -> _Statement | None:
    match = _MY.match(text) or _MY_CONTRACTED.match(text)
    if match is None:
        return None
    thing = match["thing"].strip()
    if thing.split()[0].lower() in _MY_NOT_FACTS:
        return None
    neg = " ".join((match["neg"] or "").split())
    verb = (match.groupdict().get("verb") or "is").lower()
    value = _pronouns_third_person(match["value"].strip())
    negated = bool(neg)
    topic = PREFERENCES if re.search(r"\bfavou?rite|\bpreferred", thing, re.I) else PERSONAL_INFO
    words = ["The user's", _pronouns_third_person(thing), verb, *([neg] if neg else []), value]
    return _Statement(
        text=" ".join(words), topic=topic, negated=negated, lasting=bool(_LASTING.search(text))
    )


def _statement_i_am(text: str) -> _Statement | None:
    match = _I_AM.match(text)
    if match is None:
        return None
    rest = match["rest"].strip()
    first = rest.split()[0].lower()
    neg = " ".join((match["neg"] or "").split())
    if first in _I_AM_VERBS and not neg:
        words = [_I_AM_VERBS[first], rest[len(first) :].strip()]
    elif first.endswith("ing") or first in _PASSING_STATES:
        return None
    else:
        words = ["is", *([neg] if neg else []), rest]
    return _Statement(
        text="The user " + " ".join(_pronouns_third_person(w) for w in words if w),
        topic=PERSONAL_INFO,
        negated=bool(neg),
        lasting=bool(_LASTING.search(text)),
    )


def _statement_i_verb(text: str) -> _Statement | None:
    match = _I_VERB.match(text)
    if match is None:
        return None
    verb = match["verb"].lower()
    rest = match["rest"]
    if verb in _PREFERENCE_VERBS:
        if _PREFERENCE_NOT_OBJECTS.match(rest) or not rest.strip():
            return None
        topic = PREFERENCES
    elif verb in _PERSONAL_VERBS:
        if not rest.strip() or (verb == "have" and _HAVE_NOT_FACTS.match(rest)):
            return None
        if verb in _PAST_PHRASES and not re.match(_PAST_PHRASES[verb], rest, re.I):
            return None
        topic = PERSONAL_INFO
    else:
        return None
    neg = " ".join((match["neg"] or "").split()).lower()
    if neg.startswith("do not"):
        verb_phrase = ["does not", *neg.split()[2:], verb]
    elif neg:
        verb_phrase = [neg, _third_person_verb(verb)]
    else:
        verb_phrase = [_third_person_verb(verb)]
    adverbs = match["adverbs"].split()
    words = ["The user", *adverbs, *verb_phrase]
    sentence = " ".join(w.lower() if i else w for i, w in enumerate(words))
    dropped = ""
    if neg and topic == PREFERENCES:
        dropped = _pronouns_third_person(_LASTING.sub("", rest)).strip(" ,")
    return _Statement(
        text=sentence + _pronouns_third_person(rest).rstrip(),
        topic=topic,
        negated=bool(neg),
        lasting=bool(_LASTING.search(text)),
        dropped=dropped,
    )


def _statement_moved(text: str) -> _Statement | None:
    """ "I moved (from Y) to <Place> ..." -> "The user lives in <Place>, having moved there
    (from Y) ...": the move fills the "lives in" slot. Only for a named place (a capital
    letter): "I moved to a new team" says nothing of where the user lives."""
    match = _MOVED.match(text)
    if match is None:
        return None
    rest = match["rest"].strip()
    end = _PLACE_END.search(rest)
    place = (rest[: end.start()] if end else rest).strip()
    if not place or not re.search(r"\b[A-Z]", place):
        return None
    tail = "" if end is None or end.group().startswith(",") else rest[end.start() :].strip()
    origin = f" from {match['origin'].strip()}" if match["origin"] else ""
    having = " ".join(["having moved there" + origin, tail]).strip()
    return _Statement(
        text=_pronouns_third_person(f"The user lives in {place}, {having}"),
        topic=PERSONAL_INFO,
        negated=False,
        lasting=False,
    )


def _statement_switched(text: str, *, dropped: str) -> _Statement | None:
    """ "I switched (from Y) to X" -> "The user switched from Y to X": a preference stated as
    a lasting change. Without "from", Y is what the same message said the user no longer
    likes (``dropped``), if anything: "I don't like coffee anymore, I switched to tea"."""
    match = _SWITCHED.match(text)
    if match is None:
        return None
    old = (match["old"] or dropped).strip()
    change = f"from {old} to {match['new'].strip()}" if old else f"to {match['new'].strip()}"
    return _Statement(
        text=_pronouns_third_person(f"The user switched {change}"),
        topic=PREFERENCES,
        negated=False,
        lasting=True,
    )


def _statement_parse(text: str, *, dropped: str = "") -> _Statement | None:
    """The first-person statement ``text`` makes, in the third person (rule 3), or None.

    ``dropped``: what an earlier sentence of the message said the user no longer likes."""
    text = _contractions_expand(text)
    switched = _statement_switched(text, dropped=dropped)
    if switched is not None:
        return switched
    for parse in (_statement_my, _statement_i_am, _statement_moved, _statement_i_verb):
        statement = parse(text)
        if statement is not None:
            return statement
    return None


def _not_but_resolve(text: str) -> str:
    """'X is not A but B' -> 'X is B'; 'live not in A but in B' -> 'live in B'."""
    text = _NOT_BUT_COPULA.sub(lambda m: f"{m['verb']} {m['new']}", text)
    return _NOT_BUT_PREPOSITION.sub(lambda m: f"{m['prep']} {m['new']}", text)


def _sentence_fact(*, sentence: str, event_id: str, dropped: str = "") -> ExtractedFact | None:
    """The fact one sentence states under the offline rules, or None (``dropped``: see
    :func:`_statement_parse`)."""
    clean = _sentence_clean(sentence)
    if not clean:
        return None
    remember = _REMEMBER.match(clean)
    if remember:
        clause = remember["fact"].strip()
        statement = _statement_parse(clause)
        text = statement.text if statement else _pronouns_remembered(clause)
        return ExtractedFact(
            text=text + ".",
            topic=EXPLICIT_INSTRUCTIONS,
            source_type=SourceType.EXPLICIT,
            confidence=0.95,
            importance=IMPORTANCE[EXPLICIT_INSTRUCTIONS],
            event_ids=[event_id],
            excerpt=sentence.strip(),
            kind=FactKind.RETRACTION if statement and statement.negated else FactKind.STATEMENT,
        )
    marker = _CORRECTION.match(clean)
    body = _contractions_expand(clean[marker.end() :] if marker else clean)
    resolved = _not_but_resolve(body)
    corrected = bool(marker) or resolved != body
    statement = _statement_parse(resolved, dropped=dropped)
    if statement is None:
        return None
    if statement.negated:
        kind = FactKind.RETRACTION
    else:
        kind = FactKind.CORRECTION if corrected else FactKind.STATEMENT
    deliberate = corrected or statement.lasting
    return ExtractedFact(
        text=statement.text + ".",
        topic=statement.topic,
        source_type=SourceType.EXPLICIT if deliberate else SourceType.IMPLICIT,
        confidence=0.9 if deliberate else 0.8,
        importance=IMPORTANCE.get(statement.topic, DEFAULT_IMPORTANCE),
        event_ids=[event_id],
        excerpt=sentence.strip(),
        kind=kind,
    )


# "I <verb>" whose verb agrees with "the user" once conjugated: not a past form (-ed or a common
# irregular one) nor a modal, which stay as they are ("the user went", "the user can").
_UNCONJUGATED = (
    r"(?:\w+ed|went|was|were|had|did|made|got|saw|took|came|gave|found|left|met|ran|told|thought|"
    r"bought|brought|felt|kept|lost|paid|said|sold|sent|spent|won|wrote|began|can|could|will|"
    r"would|shall|should|may|might|must|do|does|am|also|still|really|just)"
)
_I_PRESENT_VERB = re.compile(
    r"\bI\s+(?P<adverbs>(?:(?:usually|often|always|sometimes|never|also|still|really|just|"
    r"mostly|generally|now|currently)\s+)*)(?!" + _UNCONJUGATED + r"\b)(?P<verb>[a-z]+)\b"
)


def _pronouns_remembered(clause: str) -> str:
    """A remembered clause that is not a first-person statement, with 'my/me/I' made 'the
    user's/the user' and a capital first letter: 'the meeting with my boss is on Friday' ->
    'The meeting with the user's boss is on Friday'."""
    clause = _contractions_expand(clause)
    clause = re.sub(r"\bmy\b", "the user's", clause, flags=re.I)
    clause = re.sub(r"\bI\s+am\b", "the user is", clause)
    clause = re.sub(r"\bI\s+have\b", "the user has", clause)
    clause = _I_PRESENT_VERB.sub(
        lambda match: f"the user {match['adverbs']}{_third_person_verb(match['verb'])}", clause
    )
    clause = re.sub(r"\b(?:me|I)\b", "the user", clause)
    return clause[:1].upper() + clause[1:]


def _turn_substantive(text: str) -> bool:
    """At least ``DETAIL_MIN_TERMS`` index terms, and not questions only (rule 4): greetings,
    acknowledgements and questions carry nothing worth remembering."""
    if len(tokenize(text)) < DETAIL_MIN_TERMS:
        return False
    sentences = [s for s in _sentences(text) if s.strip()]
    return not all(s.rstrip().endswith("?") for s in sentences)


def _turn_detail(event: Event) -> ExtractedFact:
    """The key-conversation-details record of a user turn (rule 4), the whole turn as said.

    "[8 May 2023] Caroline: I went to a support group yesterday." The turn is kept as said,
    not rewritten: without a model, nothing better than the speaker's own words is known.
    """
    text = " ".join(event.text().split())
    if len(text) > EXCERPT_CHARS:
        text = text[: EXCERPT_CHARS - 1].rstrip() + "…"
    speaker = (event.custom_metadata or {}).get("speaker")
    if not isinstance(speaker, str) or not speaker.strip():
        speaker = "User"
    moment = datetime.fromtimestamp(event.timestamp, tz=UTC)
    return ExtractedFact(
        text=f"[{moment.day} {moment:%B %Y}] {' '.join(speaker.split())}: {text}",
        topic=KEY_CONVERSATION_DETAILS,
        source_type=SourceType.IMPLICIT,
        confidence=0.8,
        importance=DEFAULT_IMPORTANCE,
        event_ids=[event.id],
        excerpt=text,
        kind=FactKind.STATEMENT,
    )


def facts_from_offline_rules(*, events: list[Event]) -> list[ExtractedFact]:
    """The facts rules 1-4 (the package docstring) find in the users' messages, in event order."""
    facts = []
    for event in events:
        if event.author != USER_AUTHOR:
            continue
        rest, dropped = [], ""
        for sentence in _sentences(event.text()):
            fact = _sentence_fact(sentence=sentence, event_id=event.id, dropped=dropped)
            statement = _statement_parse(_sentence_clean(sentence))
            dropped = statement.dropped if statement and statement.dropped else dropped
            if fact is None:
                rest.append(sentence)
            else:
                facts.append(fact)
        if _turn_substantive(" ".join(rest)):
            facts.append(_turn_detail(event))
    return facts


def facts_from_tool_calls(*, events: list[Event]) -> list[ExtractedFact]:
    """A ``tool`` fact for each ``create_memory`` call with a non-empty ``text`` argument."""
    facts = []
    for event in events:
        for call in event.get_function_calls():
            text = (call.args or {}).get("text")
            if call.name != CREATE_MEMORY_TOOL or not isinstance(text, str) or not text.strip():
                continue
            facts.append(
                ExtractedFact(
                    text=fact_text_normalise(text=text),
                    topic=EXPLICIT_INSTRUCTIONS,
                    source_type=SourceType.TOOL,
                    confidence=0.8,
                    importance=IMPORTANCE[EXPLICIT_INSTRUCTIONS],
                    event_ids=[event.id],
                    excerpt=text.strip()[:EXCERPT_CHARS],
                    kind=FactKind.STATEMENT,
                )
            )
    return facts


# --- subject and polarity, shared with consolidation -----------------------------------------

_SUBJECT = re.compile(
    r"^the\s+user(?:'s\s+(?P<thing>[^.]{1,60}?)\s+(?:is|are)\b"
    r"|\s+(?:(?:also|currently|now|still|really)\s+)*(?P<predicate>lives\s+in|lives\s+at|"
    r"works\s+at|works\s+for|works\s+as|studies\s+at|is\s+from|comes\s+from|was\s+born\s+in|"
    r"was\s+born\s+on|is\s+called|is\s+named|is\s+married\s+to)\b)",
    re.I,
)
_NEGATION = re.compile(r"\b(?:not|no\s+longer|never|anymore)\b|n't\b", re.I)
_MOVED_TO_PLACE = re.compile(
    r"^(?i:the\s+user\s+(?:has\s+)?(?:(?:just|recently|finally|also)\s+)*moved\s+"
    r"(?:from\s+.+?\s+)?to\s+(?:the\s+)?)[A-Z]"
)
_SWITCH_FACT = re.compile(
    r"^the\s+user\s+(?:has\s+)?(?:(?:just|recently|finally|also|now)\s+)*(?:switched|changed)"
    r"(?:\s+over)?\s+(?:from\s+(?P<old>.+?)\s+)?to\s+(?P<new>.+?)\.?$",
    re.I,
)


def fact_subject(*, text: str) -> str:
    """What a third-person fact is about when it can hold one value at a time, else "".

    "The user lives in Lisbon" -> "the user lives in", and so does "The user moved to Porto"
    (a named place); "The user's favourite colour is blue" -> "the user's favourite colour
    is". Two facts with the same subject and different values conflict: the newer (or more
    trusted) one replaces the other. Facts that may hold many values ("The user likes tea")
    have no subject. Negated facts have none either.
    """
    if _NEGATION.search(text):
        return ""
    if _MOVED_TO_PLACE.match(" ".join(text.split())):
        return "the user lives in"
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
    ("The user's sister lives in Lisbon."), so the same fact from both paths is one memory.
    """
    clean = " ".join(text.split())
    if re.match(r"(?:i|my)\b", clean, re.I):
        statement = _statement_parse(_sentence_clean(clean))
        clean = statement.text if statement else _pronouns_remembered(_sentence_clean(clean))
    clean = clean[:1].upper() + clean[1:]
    return clean if clean.endswith((".", "!", "?")) else clean + "."


_TURN_RECORD = re.compile(r"^\[\d{1,2} [A-Z][a-z]+ \d{4}\] [^:\n]{1,100}: ")


def fact_is_turn_record(*, text: str, topic: str) -> bool:
    """Whether a fact or memory is a rule-4 record of a whole turn ("[8 May 2023] Caroline:
    ..."): what was said and when, true as a record even when a later turn says otherwise,
    which consolidation therefore only appends (see :mod:`memory_app.consolidation`)."""
    return topic == KEY_CONVERSATION_DETAILS and bool(_TURN_RECORD.match(text))


def fact_negated(*, text: str) -> bool:
    """Whether a fact denies something ("does not", "no longer", "never", "not")."""
    return bool(_NEGATION.search(text))
