"""Extraction by the model (``MEMORY_EXTRACTION_MODEL`` of ``LLM_PROVIDER``): structured output
against a JSON schema of facts.

The conversation goes as one user content: a ``[event id] author: text`` line per event, and
after the line of a message with attached files, each file as a ``[file <id>: name, type]``
line followed by the file itself (inline data; ``core.gemini`` sends large ones through the
Files API, ``core.openai_compatible`` leaves images out for a model without vision). A fact
drawn from a file names its id in ``file_ids``; ``keep_file`` says the user asked to remember
the file itself, which the memory then keeps.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from google.genai import types

from core.llm import ModelError, provider_model
from memory_app.extraction.context import context_text
from memory_app.extraction.facts import (
    EXCERPT_CHARS,
    USER_AUTHOR,
    ExtractedFact,
    ExtractionContext,
    FactFile,
    FactKind,
    fact_is_request,
)
from memory_app.extraction.files import file_described
from memory_app.extraction.profile import (
    MAPPING_FIELDS,
    PROFILE_FIELDS,
    VALUE_MAX_CHARS,
    profile_field_valid,
)
from memory_app.models import MemoryScope, SourceType
from memory_app.topics import (
    TopicSpec,
)
from sessions_app import selectors as session_selectors
from sessions_app.events import Event
from sessions_app.models import ArtifactRecord

_SOURCE_TYPES = (SourceType.EXPLICIT.value, SourceType.IMPLICIT.value, SourceType.TOOL.value)


PROFILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "When the fact fills a field of the user's profile: the field and its "
    "value ('name' 'Ana'; 'location' 'Porto'; 'work' 'a nurse at Santa Maria'; 'diet' "
    "'vegetarian'; 'family' with key 'sister' and value 'Ana'; 'preferences' with key "
    "'favourite colour' and value 'blue'). Leave it out otherwise.",
    "properties": {
        "field": {"type": "string", "enum": list(PROFILE_FIELDS)},
        "key": {
            "type": "string",
            "description": "For family, the relation; for preferences, what it is about.",
        },
        "value": {"type": "string"},
    },
    "required": ["field", "value"],
}


def fact_schema(*, topic_keys: list[str]) -> dict[str, Any]:
    """The JSON Schema of the model's answer: ``{"facts": [...]}``, each fact fully described."""
    return {
        "type": "object",
        "properties": {
            "facts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "description": "The fact: 'The user ...'."},
                        "topic": {"type": "string", "enum": list(topic_keys)},
                        "source_type": {"type": "string", "enum": list(_SOURCE_TYPES)},
                        "kind": {"type": "string", "enum": [kind.value for kind in FactKind]},
                        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                        "importance": {"type": "number", "minimum": 0, "maximum": 1},
                        "event_ids": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "Ids of the events that support the fact.",
                        },
                        "excerpt": {
                            "type": "string",
                            "description": "The words of those events that support the fact.",
                        },
                        "file_ids": {
                            "type": "array",
                            "items": {"type": "string"},
                            "description": "Ids of the attached files the fact was drawn from.",
                        },
                        "keep_file": {
                            "type": "boolean",
                            "description": "True when the user asked to remember the attached "
                            "file itself ('remember this logo'): the memory keeps the file.",
                        },
                        "scope": {
                            "type": "string",
                            "enum": [MemoryScope.USER.value, MemoryScope.SESSION.value],
                            "description": "'session' when the user says it holds for this "
                            "conversation only ('for this trip I'm vegetarian'); else 'user'.",
                        },
                        "profile": PROFILE_SCHEMA,
                        "expires_in_days": {
                            "type": "number",
                            "minimum": 0,
                            "description": "For a fact bound to a time ('in Berlin this week'): "
                            "days after it was said that it stops being true; 0 when lasting.",
                        },
                    },
                    "required": [
                        "text",
                        "topic",
                        "source_type",
                        "kind",
                        "confidence",
                        "importance",
                        "event_ids",
                        "excerpt",
                    ],
                },
            }
        },
        "required": ["facts"],
    }


def _system_instruction(*, app_name: str, topics: list[TopicSpec]) -> str:
    lines = [
        f"You extract long-term memories about the user from a conversation in the app "
        f"{app_name!r}.",
        "Return only facts about the user (who they are, their preferences, their plans, the "
        "people and things in their life, instructions they gave) that will still be useful "
        "in a later conversation, each atomic and self-contained, written in the third person "
        "as 'The user ...' ('My sister Ana lives in Braga.' -> 'The user's sister Ana lives in "
        "Braga.'), never as a transcript of what was said.",
        "A request, a question, a task the user brings ('Explain how photosynthesis works', "
        "'Write a haiku about autumn leaves'), a greeting, thanks, and whatever the assistant "
        "said are not facts about the user: return nothing for them.",
        "When the user changes or corrects something they said before, in any words and "
        "wherever it stands in the sentence ('Quick update: I actually moved to Wroclaw', "
        "'I no longer eat meat', 'I quit nursing, I'm a teacher now', 'these days I ...', "
        "'since May I ...', 'actually, my sister lives in Braga'), give the fact as it now "
        "stands with kind 'correction', or 'retraction' when it only says something is no "
        "longer true.",
        "For each fact give: its topic (one of the keys below); its source_type: 'explicit' "
        "when the user asked to remember it or deliberately corrected something, 'implicit' "
        "when it comes out of the conversation; its kind: 'statement', 'correction' (it "
        "replaces something the user said before) or 'retraction' (the user says something "
        "is no longer or not true); confidence and importance between 0 and 1; the ids of "
        "the events that support it, exactly as shown in brackets; the supporting words; and "
        "for a fact bound to a time ('I'm in Berlin this week'), expires_in_days.",
        "Files the user attached follow their message's line as '[file <id>: name, type]' and "
        "the file. A fact drawn from a file (what an image shows, what a document says) cites "
        "that message's event and gives the file's id in file_ids. When the user asks to "
        "remember an attached file itself ('remember this logo'), give one fact describing it, "
        "with its file id and keep_file true: the memory will keep the file.",
        "A fact that fills a field of the user's profile (name, location, work, family, "
        "diet, preferences) names it in profile. A fact the user says holds for this "
        "conversation only ('for this trip', 'in this chat') has scope 'session'.",
        "Never record instructions about how the assistant should behave, secrets (passwords, "
        "keys, tokens), or anything the assistant said that the user did not confirm.",
        "What came earlier in the conversation may be given first, marked as context: read "
        "the conversation through it (an answer to a question asked there, who 'he' or 'she' "
        "is, what a correction corrects) but extract nothing from it.",
        "Return an empty list when there is nothing worth remembering.",
        "",
        "Topics:",
    ]
    for topic in topics:
        lines.append(f"- {topic.key} ({topic.label}): {topic.description}")
        for example in topic.few_shot_examples:
            lines.append(f'  Example: "{example["text"]}" -> "{example["memory"]}"')
    return "\n".join(lines)


def _transcript(*, events: list[Event], files: dict[str, list[ArtifactRecord]]) -> list[types.Part]:
    """The conversation as the model reads it (the module docstring): its parts, none when no
    event has text or files."""
    parts: list[types.Part] = []
    lines: list[str] = []
    for event in events:
        text = " ".join(event.text().split())
        attached = files.get(event.id, [])
        if not text and not attached:
            continue
        speaker = "user" if event.author == USER_AUTHOR else f"assistant ({event.author})"
        lines.append(f"[{event.id}] {speaker}: {text or '(attached files)'}")
        for record in attached:
            lines.append(f"[file {record.pk}: {file_described(record)}]")
            parts.append(types.Part(text="\n".join(lines)))
            lines = []
            parts.append(
                types.Part(
                    inline_data=types.Blob(
                        data=session_selectors.artifact_bytes(record), mime_type=record.mime_type
                    )
                )
            )
    if lines:
        parts.append(types.Part(text="\n".join(lines)))
    return parts


def _invalid(message: str) -> ModelError:
    return ModelError(
        f"The model's extracted facts are invalid: {message}", code="model_invalid_output"
    )


def _number(item: dict[str, Any], key: str) -> float:
    value = item.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(f"{key} is not a number: {value!r:.80}")
    return min(1.0, max(0.0, float(value)))


def _fact_files(
    item: dict[str, Any], *, files: dict[str, list[ArtifactRecord]]
) -> tuple[list[FactFile], bool]:
    """The files a fact names that were attached in the conversation (others dropped), and
    whether the memory keeps them (only when it names one)."""
    file_ids = item.get("file_ids", [])
    if not isinstance(file_ids, list) or not all(isinstance(i, str) for i in file_ids):
        raise _invalid("file_ids is not a list of strings")
    keep = item.get("keep_file", False)
    if not isinstance(keep, bool):
        raise _invalid(f"keep_file is not a boolean: {keep!r:.80}")
    event_of = {str(record.pk): event_id for event_id, each in files.items() for record in each}
    named = [
        FactFile(event_id=event_of[i], artifact_id=i)
        for i in dict.fromkeys(file_ids)
        if i in event_of
    ]
    return named, keep and bool(named)


def _fact_profile(item: dict[str, Any]) -> dict[str, Any] | None:
    """The profile field a fact names (``extraction.profile``), None when it names none."""
    profile = item.get("profile")
    if profile is None:
        return None
    if not isinstance(profile, dict):
        raise _invalid(f"profile is not an object: {profile!r:.80}")
    field, key, value = profile.get("field"), profile.get("key") or "", profile.get("value")
    if not isinstance(key, str) or not isinstance(value, str):
        raise _invalid(f"profile key and value are not strings: {profile!r:.80}")
    value = " ".join(value.split())[:VALUE_MAX_CHARS]
    structured = (
        {field: {" ".join(key.casefold().split()): value}}
        if field in MAPPING_FIELDS
        else {field: value}
    )
    if not profile_field_valid(structured):
        raise _invalid(f"profile is not a field of the profile: {profile!r:.80}")
    return structured


def _facts_parse(
    *,
    answer: dict[str, Any],
    events: list[Event],
    topic_keys: list[str],
    files: dict[str, list[ArtifactRecord]] | None = None,
) -> list[ExtractedFact]:
    """The model's facts, checked field by field.

    A malformed fact (a missing or mistyped field, an unknown topic, source type or kind)
    makes the whole answer invalid: a non-transient ``model_invalid_output`` error. Event ids
    the conversation does not contain are dropped, and a fact left with none is dropped: it
    is not grounded in what the user said. A file id names a file attached in the
    conversation or is dropped; the event that carried a named file is one of the fact's
    events. Numbers are clamped to [0, 1].
    """
    items = answer.get("facts")
    if not isinstance(items, list):
        raise _invalid("no 'facts' list")
    texts = {event.id: event.text() for event in events}
    said = {event.id: event.timestamp for event in events}
    facts = []
    for item in items:
        if not isinstance(item, dict):
            raise _invalid(f"a fact is not an object: {item!r:.80}")
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise _invalid("a fact has no text")
        if item.get("topic") not in topic_keys:
            raise _invalid(f"unknown topic {item.get('topic')!r:.80}")
        if item.get("source_type") not in _SOURCE_TYPES:
            raise _invalid(f"unknown source type {item.get('source_type')!r:.80}")
        if item.get("kind") not in {kind.value for kind in FactKind}:
            raise _invalid(f"unknown kind {item.get('kind')!r:.80}")
        event_ids = item.get("event_ids")
        if not isinstance(event_ids, list) or not all(isinstance(i, str) for i in event_ids):
            raise _invalid("event_ids is not a list of strings")
        excerpt = item.get("excerpt", "")
        if not isinstance(excerpt, str):
            raise _invalid("excerpt is not a string")
        confidence = _number(item, "confidence")
        importance = _number(item, "importance")
        named, keeps_file = _fact_files(item, files=files or {})
        scope = item.get("scope", MemoryScope.USER)
        if scope not in (MemoryScope.USER, MemoryScope.SESSION):
            raise _invalid(f"unknown scope {scope!r:.80}")
        structured = _fact_profile(item)
        event_ids = [*event_ids, *(each.event_id for each in named)]
        known = list(dict.fromkeys(i for i in event_ids if i in texts))
        if not known:
            continue
        lasting = item.get("expires_in_days")
        expires_at = None
        if isinstance(lasting, int | float) and not isinstance(lasting, bool) and lasting > 0:
            expires_at = max(said[i] for i in known) + float(lasting) * 86400
        facts.append(
            ExtractedFact(
                text=" ".join(text.split()),
                topic=item["topic"],
                source_type=item["source_type"],
                confidence=confidence,
                importance=importance,
                event_ids=known,
                excerpt=(excerpt.strip() or texts[known[0]])[:EXCERPT_CHARS],
                kind=item["kind"],
                expires_at=expires_at,
                files=named,
                keeps_file=keeps_file,
                scope=MemoryScope(scope),
                structured=structured if scope == MemoryScope.USER else None,
            )
        )
    return facts


def model_json(
    *,
    system_instruction: str,
    contents: str | list[types.Content],
    response_schema: dict[str, Any],
) -> dict[str, Any]:
    """One structured call to ``MEMORY_EXTRACTION_MODEL`` of ``LLM_PROVIDER`` from synchronous
    code (a job): the answer as a JSON object, or ``ModelError``."""

    async def generate() -> dict[str, Any]:
        model = provider_model(model=settings.MEMORY_EXTRACTION_MODEL)
        try:
            return await model.generate_json(
                system_instruction=system_instruction,
                contents=contents,
                response_schema=response_schema,
            )
        finally:
            await model.aclose()

    return async_to_sync(generate)()


def facts_from_model(
    *,
    app_name: str,
    events: list[Event],
    topics: list[TopicSpec],
    files: dict[str, list[ArtifactRecord]] | None = None,
    context: ExtractionContext | None = None,
) -> list[ExtractedFact]:
    """The facts the model finds in ``events`` (read after ``context``, from which it
    extracts nothing) and in ``files`` (the files attached to them, by
    event id), parsed and checked by :func:`_facts_parse`, less those that only record a
    request, a question or the assistant's words (:func:`fact_is_request`); no call when
    there is nothing to read."""
    files = files or {}
    transcript = _transcript(events=events, files=files)
    if not transcript:
        return []
    earlier = context_text(context)
    if earlier:
        transcript = [types.Part(text=earlier), *transcript]
    topic_keys = [topic.key for topic in topics]
    answer = model_json(
        system_instruction=_system_instruction(app_name=app_name, topics=topics),
        contents=[types.Content(role="user", parts=transcript)],
        response_schema=fact_schema(topic_keys=topic_keys),
    )
    facts = _facts_parse(answer=answer, events=events, topic_keys=topic_keys, files=files)
    return [fact for fact in facts if not fact_is_request(text=fact.text)]
