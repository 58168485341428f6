"""The offline extractor: rules 1-3 applied to the users' messages sentence by sentence
(:func:`facts_from_offline_rules`), and the ``tool`` facts of ``create_memory`` calls
(:func:`facts_from_tool_calls`)."""

from __future__ import annotations

import re
from dataclasses import replace

from memory_app.extraction.facts import (
    CREATE_MEMORY_TOOL,
    DEFAULT_IMPORTANCE,
    EXCERPT_CHARS,
    IMPORTANCE,
    USER_AUTHOR,
    ExtractedFact,
    ExtractionContext,
    FactKind,
)
from memory_app.extraction.offline import patterns
from memory_app.extraction.offline.answers import answer_text, asked_question
from memory_app.extraction.offline.phrasing import contractions_expand, pronouns_remembered
from memory_app.extraction.offline.reading import fact_text_normalise, fact_topic
from memory_app.extraction.offline.referents import Referents
from memory_app.extraction.offline.sentences import (
    filler_strip,
    sentence_clean,
    sentence_is_small_talk,
    sentences_split,
)
from memory_app.extraction.offline.session_scope import session_only_split
from memory_app.extraction.offline.statements import Statement, statement_parse
from memory_app.models import MemoryScope, SourceType
from memory_app.topics import EXPLICIT_INSTRUCTIONS, PERSONAL_INFO
from sessions_app.events import Event

_NO_AGAIN = re.compile(r"^no[,!.]\s+", re.I)  # "Wait, no, I ..."
# An opening word before the statement: "Second, I'm writing my thesis", "Sadly, my ...".
_OPENING_WORD = re.compile(r"^[^,\s]+,\s+(?=(?:I|[Mm]y)\b)")
# Where a statement may start further in a sentence, and what before it rules that out.
_FURTHER_START = re.compile(r"(?<![\w'])(?=(?:I|[Ww]e|[Mm]y)\b(?!')|[A-Z][\w'-]+\s+and\s+I\b)")
_OBJECT_BEFORE = re.compile(
    r"\b(?:to|for|with|of|about|from|at|in|on|by|like|than|as|into|\w+ing)\s*$", re.I
)
_POSSESSIVE = re.compile(r"[Mm]y\s+[\w-]+'s\b")
_NOT_LEAD_IN = re.compile(
    r"^\s*(?:please\s+|can\s+you\s+|could\s+you\s+)?(?:write|explain|tell|give|show|make|help|"
    r"translate|summari[sz]e|list|find|create|draft|suggest|describe|generate|send|check|fix|"
    r"remind|compare|recommend|plan|book|add|pretend|imagine|act|say|reply|respond|rewrite|"
    r"edit|correct|proofread|play|role-?play)\b"
    r"|\b(?:if|whether|unless|saying|says|said|asks?|asked|tells?|told|pretend|imagine|suppose|"
    r"wish|maybe|would|could|should|might|he|she|they|someone|somebody|character|story|"
    r"sentence|quote|example)\b|[\"“]",
    re.I,
)


def _not_but_resolve(text: str) -> str:
    """'X is not A but B' -> 'X is B'; 'live not in A but in B' -> 'live in B'."""
    text = patterns.NOT_BUT_COPULA.sub(lambda m: f"{m['verb']} {m['new']}", text)
    return patterns.NOT_BUT_PREPOSITION.sub(lambda m: f"{m['prep']} {m['new']}", text)


def _statement_further_in(text: str, *, dropped: str) -> Statement | None:
    """The first-person statement standing further in the sentence, after words that only lead
    into it ("Quick update on my life: I actually moved to Wroclaw", "So after a lot of back
    and forth we finally moved to Denver", "Good news, Mia and I got back together"); none
    after a request, a condition or reported words ("Write a story where I live in Rome",
    "if I move to Oslo", "she said I ...")."""
    for start in _FURTHER_START.finditer(text):
        if start.start() == 0:
            continue
        if _NOT_LEAD_IN.search(text[: start.start()]):
            return None
        if _OBJECT_BEFORE.search(text[: start.start()]) or _POSSESSIVE.match(text, start.start()):
            continue  # "visiting my wife's family": an object, not a statement
        statement = statement_parse(sentence_clean(text[start.start() :]), dropped=dropped)
        if statement is not None:
            return statement
    return None


def _sentence_fact(*, sentence: str, event_id: str, dropped: str = "") -> ExtractedFact | None:
    """The fact one sentence states under the offline rules, or None (``dropped``: see
    :func:`statement_parse`)."""
    clean = sentence_clean(sentence)
    if not clean:
        return None
    remember = patterns.REMEMBER.match(clean)
    if remember:
        clause = remember["fact"].strip()
        statement = statement_parse(clause)
        text = statement.text if statement else pronouns_remembered(clause)
        return ExtractedFact(
            text=text + ".",
            topic=statement.topic
            if statement
            else fact_topic(text=text, default=EXPLICIT_INSTRUCTIONS),
            source_type=SourceType.EXPLICIT,
            confidence=0.95,
            importance=IMPORTANCE[EXPLICIT_INSTRUCTIONS],
            event_ids=[event_id],
            excerpt=sentence.strip(),
            kind=FactKind.RETRACTION if statement and statement.negated else FactKind.STATEMENT,
        )
    if sentence.rstrip().endswith("?"):
        return None  # a question, however it opens ("I'm writing an email, can you help?")
    marker = patterns.CORRECTION.match(clean)
    body = contractions_expand(
        filler_strip(_NO_AGAIN.sub("", clean[marker.end() :])) if marker else clean
    )
    resolved = _not_but_resolve(body)
    corrected = bool(marker) or resolved != body
    statement = statement_parse(resolved, dropped=dropped)
    opening = _OPENING_WORD.match(resolved)
    if statement is None and opening:
        statement = statement_parse(resolved[opening.end() :], dropped=dropped)
    if statement is None:
        statement = _statement_further_in(resolved, dropped=dropped)
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


def time_bound_days(text: str) -> int | None:
    """Days a statement stays true when it is bound to a time ("this week": 7), else None."""
    return next((days for pattern, days in patterns.TIME_BOUND if pattern.search(text)), None)


def facts_from_offline_rules(
    *, events: list[Event], context: ExtractionContext | None = None
) -> list[ExtractedFact]:
    """The facts rules 1-3 (:mod:`memory_app.extraction`) find in the users' messages, in event
    order. A sentence no rule reads (a request, a question, small talk) yields nothing: what
    was said is the session store's, not a memory. The ``context`` events are read for the
    people they name and the question the assistant last asked, and yield nothing."""
    facts, referents, asked = [], Referents(), None
    for event in context.events if context else []:
        text = event.text()
        if event.author != USER_AUTHOR:
            asked = asked_question(text) if text.strip() else asked
            continue
        asked = None
        for said in sentences_split(text):
            referents.note(said)
    for event in events:
        if event.author != USER_AUTHOR:
            asked = asked_question(event.text()) if event.text().strip() else asked
            continue
        found, question, asked = len(facts), asked, None
        dropped, marked = "", False
        for said in sentences_split(event.text()):
            if sentence_is_small_talk(said):
                continue
            sentence, session_only = session_only_split(said)
            if session_only and not sentence.strip(" .,;:!?"):
                marked = True  # "For this trip" cut from the ", I ..." it opens
                continue
            session_only, marked = session_only or marked, False
            read = referents.resolved(filler_strip(sentence))
            referents.note(sentence)
            fact = _sentence_fact(sentence=read, event_id=event.id, dropped=dropped)
            statement = statement_parse(sentence_clean(read))
            dropped = statement.dropped if statement and statement.dropped else dropped
            if fact is None:
                continue
            fact = replace(fact, excerpt=(said if session_only else sentence).strip())
            if session_only:
                fact = replace(fact, scope=MemoryScope.SESSION)
            days = time_bound_days(sentence)
            if days is not None:
                fact = replace(fact, expires_at=event.timestamp + days * 86400)
            facts.append(fact)
        if question is not None and len(facts) == found:
            facts.extend(_answer_fact(question=question, event=event))
    return facts


def _answer_fact(*, question: re.Match, event: Event) -> list[ExtractedFact]:
    """The fact a user turn with no statement of its own states as the answer to the
    assistant's question about the user's life (:mod:`.answers`), if any."""
    text = answer_text(asked=question, answer=event.text())
    if text is None:
        return []
    return [
        ExtractedFact(
            text=text + ".",
            topic=fact_topic(text=text, default=PERSONAL_INFO),
            source_type=SourceType.IMPLICIT,
            confidence=0.7,
            importance=IMPORTANCE[PERSONAL_INFO],
            event_ids=[event.id],
            excerpt=event.text().strip()[:EXCERPT_CHARS],
            kind=FactKind.STATEMENT,
        )
    ]


def facts_from_tool_calls(*, events: list[Event]) -> list[ExtractedFact]:
    """A ``tool`` fact for each ``create_memory`` call with a non-empty ``text`` argument."""
    facts = []
    for event in events:
        for call in event.get_function_calls():
            text = (call.args or {}).get("text")
            if call.name != CREATE_MEMORY_TOOL or not isinstance(text, str) or not text.strip():
                continue
            normalised = fact_text_normalise(text=text)
            facts.append(
                ExtractedFact(
                    text=normalised,
                    topic=fact_topic(text=normalised, default=EXPLICIT_INSTRUCTIONS),
                    source_type=SourceType.TOOL,
                    confidence=0.8,
                    importance=IMPORTANCE[EXPLICIT_INSTRUCTIONS],
                    event_ids=[event.id],
                    excerpt=text.strip()[:EXCERPT_CHARS],
                    kind=FactKind.STATEMENT,
                )
            )
    return facts
