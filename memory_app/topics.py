"""Memory topics: the kinds of facts extraction looks for in an app's conversations.

Four managed topics exist for every app, defined here in code (as the whitepaper's memory
generation defines them): personal information, preferences, key conversation details and
explicit instructions (what the user explicitly asks the agent to remember). An app tunes them
with ``MemoryTopic`` rows and adds its own:

- a row whose key is a managed topic's key overrides that topic: ``enabled=False`` turns it
  off for the app; a non-empty label, description or few-shot list replaces the code's;
- any other enabled row is a custom topic of the app, with its own description and examples.

Few-shot examples are ``{"text": <what the user said>, "memory": <the memory to keep>}``.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from memory_app.models import MemoryTopic


@dataclass(frozen=True)
class TopicSpec:
    """One topic as extraction sees it: what to look for, with examples."""

    key: str
    label: str
    description: str
    few_shot_examples: tuple[dict[str, str], ...] = ()
    managed: bool = False
    ttl_days: int | None = None  # None: the app's default


PERSONAL_INFO = "personal_info"
PREFERENCES = "preferences"
KEY_CONVERSATION_DETAILS = "key_conversation_details"
EXPLICIT_INSTRUCTIONS = "explicit_instructions"

MANAGED_TOPICS: tuple[TopicSpec, ...] = (
    TopicSpec(
        key=PERSONAL_INFO,
        label="Personal information",
        description=(
            "Significant facts about the user: name, age, where they live or come from, "
            "work and studies, family, pets, health conditions they mention, important dates."
        ),
        few_shot_examples=(
            {
                "text": "I moved to Lisbon last year for a job at Feedzai.",
                "memory": ("The user lives in Lisbon."),
            },
            {
                "text": "My daughter Ana turns 6 in May.",
                "memory": ("The user's daughter Ana turns 6 in May."),
            },
        ),
        managed=True,
    ),
    TopicSpec(
        key=PREFERENCES,
        label="Preferences",
        description=(
            "Stated or clearly implied likes, dislikes and preferred ways of doing things: "
            "food, style, tools, formats, schedules."
        ),
        few_shot_examples=(
            {
                "text": "I prefer window seats when I fly.",
                "memory": ("The user prefers window seats on flights."),
            },
            {
                "text": "Please keep answers short, I read them on my phone.",
                "memory": ("The user prefers short answers."),
            },
        ),
        managed=True,
    ),
    TopicSpec(
        key=KEY_CONVERSATION_DETAILS,
        label="Key conversation details",
        description=(
            "Plans, decisions and events in the user's own life worth knowing next time: a "
            "trip they booked, a race they train for, a job they start. Never the requests, "
            "questions or tasks they bring to the assistant, nor the assistant's answers."
        ),
        few_shot_examples=(
            {
                "text": "We settled on the 3-day Porto itinerary, booking it tonight.",
                "memory": ("The user chose a 3-day Porto itinerary and planned to book it."),
            },
            {
                "text": "Write a haiku about autumn leaves.",
                "memory": "(nothing: a request, not a fact about the user)",
            },
        ),
        managed=True,
    ),
    TopicSpec(
        key=EXPLICIT_INSTRUCTIONS,
        label="Explicit instructions",
        description=(
            'Information the user explicitly asks the agent to remember ("remember that ...") '
            "or to forget. Never rules about how the agent must behave in general."
        ),
        few_shot_examples=(
            {
                "text": "Remember that my passport expires in March 2027.",
                "memory": ("The user's passport expires in March 2027."),
            },
        ),
        managed=True,
    ),
)

MANAGED_TOPIC_KEYS = frozenset(topic.key for topic in MANAGED_TOPICS)
MANAGED_TOPIC_LABELS = {topic.key: topic.label for topic in MANAGED_TOPICS}


def topic_label(*, key: str, label: str = "") -> str:
    """How a topic reads to a person: ``label`` (the app's own, when it names one), else the
    managed topic's, else the key written out ("Other" for no topic). Never a bare slug: staff
    and users read topics, extraction keeps the keys."""
    if label:
        return label
    if key in MANAGED_TOPIC_LABELS:
        return MANAGED_TOPIC_LABELS[key]
    return key.replace("_", " ").strip().capitalize() if key else "Other"


def _examples(rows: object) -> tuple[dict[str, str], ...]:
    """Only well-formed examples (two strings): a bad row must not break extraction."""
    if not isinstance(rows, list):
        return ()
    return tuple(
        {"text": row["text"], "memory": row["memory"]}
        for row in rows
        if isinstance(row, dict)
        and isinstance(row.get("text"), str)
        and isinstance(row.get("memory"), str)
    )


def topics_for_app(*, app_name: str) -> list[TopicSpec]:
    """The topics extraction uses for ``app_name``: managed ones first, then custom ones by key.

    Managed topics come from code, minus those the app disabled and with the app's overrides
    applied, so every app gets sensible extraction without configuring anything.
    """
    rows = {row.key: row for row in MemoryTopic.objects.filter(app_name=app_name)}
    topics = []
    for managed in MANAGED_TOPICS:
        row = rows.get(managed.key)
        if row is None:
            topics.append(managed)
        elif row.enabled:
            topics.append(
                TopicSpec(
                    key=managed.key,
                    label=row.label or managed.label,
                    description=row.description or managed.description,
                    few_shot_examples=_examples(row.few_shot_examples) or managed.few_shot_examples,
                    managed=True,
                    ttl_days=row.ttl_days,
                )
            )
    for key in sorted(rows):
        row = rows[key]
        if key not in MANAGED_TOPIC_KEYS and row.enabled:
            topics.append(
                TopicSpec(
                    key=row.key,
                    label=row.label,
                    description=row.description,
                    few_shot_examples=_examples(row.few_shot_examples),
                    ttl_days=row.ttl_days,
                )
            )
    return topics


def memory_ttl_days(*, app_name: str) -> dict[str, int]:
    """Days after which a new memory of each topic of ``app_name`` is forgotten, for the topics
    that have one: the topic's own TTL, else the app's (``MEMORY_APP_TTL_DAYS``), else the
    deployment's (``MEMORY_DEFAULT_TTL_DAYS``); 0 and missing topics keep memories."""
    default = int(settings.MEMORY_APP_TTL_DAYS.get(app_name, settings.MEMORY_DEFAULT_TTL_DAYS))
    ttls = {topic.key: topic.ttl_days for topic in topics_for_app(app_name=app_name)}
    return {
        key: days
        for key, days in ((key, default if ttl is None else ttl) for key, ttl in ttls.items())
        if days
    } | ({"": default} if default else {})
