"""The offline extractor: rules 1-4 applied to the users' messages sentence by sentence
(:func:`facts_from_offline_rules`), and the ``tool`` facts of ``create_memory`` calls
(:func:`facts_from_tool_calls`)."""

from __future__ import annotations

from dataclasses import replace
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
from memory_app.extraction.offline import patterns
from memory_app.extraction.offline.phrasing import contractions_expand, pronouns_remembered
from memory_app.extraction.offline.reading import fact_text_normalise, fact_topic
from memory_app.extraction.offline.sentences import (
    sentence_clean,
    sentence_is_small_talk,
    sentences_split,
)
from memory_app.extraction.offline.statements import statement_parse
from memory_app.models import SourceType
from memory_app.ranking import tokenize
from memory_app.topics import EXPLICIT_INSTRUCTIONS, KEY_CONVERSATION_DETAILS
from sessions_app.events import Event


def _not_but_resolve(text: str) -> str:
    """'X is not A but B' -> 'X is B'; 'live not in A but in B' -> 'live in B'."""
    text = patterns.NOT_BUT_COPULA.sub(lambda m: f"{m['verb']} {m['new']}", text)
    return patterns.NOT_BUT_PREPOSITION.sub(lambda m: f"{m['prep']} {m['new']}", text)


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
    marker = patterns.CORRECTION.match(clean)
    body = contractions_expand(clean[marker.end() :] if marker else clean)
    resolved = _not_but_resolve(body)
    corrected = bool(marker) or resolved != body
    statement = statement_parse(resolved, dropped=dropped)
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


def _turn_substantive(text: str) -> bool:
    """At least ``DETAIL_MIN_TERMS`` index terms, and not questions only (rule 4): greetings,
    acknowledgements and questions carry nothing worth remembering."""
    if len(tokenize(text)) < DETAIL_MIN_TERMS:
        return False
    sentences = [s for s in sentences_split(text) if s.strip()]
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


def time_bound_days(text: str) -> int | None:
    """Days a statement stays true when it is bound to a time ("this week": 7), else None."""
    return next((days for pattern, days in patterns.TIME_BOUND if pattern.search(text)), None)


def facts_from_offline_rules(*, events: list[Event]) -> list[ExtractedFact]:
    """The facts rules 1-4 (:mod:`memory_app.extraction`) find in the users' messages, in event
    order; small talk (:func:`sentence_is_small_talk`) yields nothing and does not count
    towards a turn's record, so a turn that only greets, thanks or says goodbye is not kept."""
    facts = []
    for event in events:
        if event.author != USER_AUTHOR:
            continue
        rest, dropped = [], ""
        for sentence in sentences_split(event.text()):
            if sentence_is_small_talk(sentence):
                continue
            fact = _sentence_fact(sentence=sentence, event_id=event.id, dropped=dropped)
            statement = statement_parse(sentence_clean(sentence))
            dropped = statement.dropped if statement and statement.dropped else dropped
            if fact is None:
                rest.append(sentence)
                continue
            days = time_bound_days(sentence)
            if days is not None:
                fact = replace(fact, expires_at=event.timestamp + days * 86400)
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
