"""Facts as extraction produces them, and the constants its two paths (offline rules, Gemini)
share."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from memory_app.topics import (
    EXPLICIT_INSTRUCTIONS,
    PERSONAL_INFO,
)

CREATE_MEMORY_TOOL = "create_memory"
USER_AUTHOR = "user"
EXCERPT_CHARS = 500


class FactKind(StrEnum):
    STATEMENT = "statement"
    CORRECTION = "correction"
    RETRACTION = "retraction"


@dataclass(frozen=True)
class FactFile:
    """A file attached to one of a fact's events that the fact was drawn from: the event's id
    and the artifact version's public id."""

    event_id: str
    artifact_id: str


@dataclass(frozen=True)
class ExtractedFact:
    """One fact found in the events, with the ids of the events that support it, the attached
    files it was drawn from, and whether the memory keeps the file itself (the user asked to
    remember the attachment: "remember this logo")."""

    text: str
    topic: str
    source_type: str
    confidence: float
    importance: float
    event_ids: list[str] = field(default_factory=list)
    excerpt: str = ""
    kind: str = FactKind.STATEMENT
    expires_at: float | None = None  # a time-bound fact ("this week"): when it stops being true
    files: list[FactFile] = field(default_factory=list)
    keeps_file: bool = False


IMPORTANCE = {EXPLICIT_INSTRUCTIONS: 0.8, PERSONAL_INFO: 0.7}
DEFAULT_IMPORTANCE = 0.5
DETAIL_MIN_TERMS = 3
