"""Facts as extraction produces them, and the constants its two paths (offline rules, the model)
share."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from memory_app.models import MemoryScope
from memory_app.topics import (
    EXPLICIT_INSTRUCTIONS,
    PERSONAL_INFO,
)

CREATE_MEMORY_TOOL = "create_memory"
# A request to forget ("forget that ...", "don't remember ...", "delete what you know about my
# ..."): the agent's ``forget_memory`` acts on it; it states no fact to remember. ``all``: it
# asks for everything about the subject. ``about``: what is to be forgotten.
FORGET_REQUEST = re.compile(
    r"^\s*(?:(?:ok|okay|also|and|please|actually),?\s+)*"
    r"(?:(?P<all>(?:delete|forget|erase|remove|clear)\s+(?:what|everything|anything|all)"
    r"(?:\s+(?:that|of what))?\s+you\s+(?:know|remember|have|keep|saved?)(?:\s+(?:saved|stored))?"
    r"\s+(?:about|on|of)\s+)"
    r"|(?:forget|do\s*n[o']?t\s+remember|do\s+not\s+remember|stop\s+remembering)"
    r"\s+(?:about\s+|that\s+)?)"
    r"(?P<about>[^?]+?)\s*(?:,?\s*please)?\s*[.!]*\s*$",
    re.I | re.S,
)
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
    # One field of the profile (``memory_app.extraction.profile``), for a profile fact.
    structured: dict[str, Any] | None = None
    scope: str = MemoryScope.USER  # "session": it holds for the conversation it was said in only


@dataclass(frozen=True)
class ExtractionContext:
    """What came before a job's events in the conversation, read to understand them and never
    extracted itself: the rolling summary of the turns a compaction folded away (``summary``)
    and the turns between it and the job's first event (``events``), both bounded
    (``CONTEXT_EVENTS``, ``CONTEXT_CHARS``). An answer to a question asked before the batch
    ("Where are you flying?" / "Lisbon"), a pronoun or a correction pointing back is read
    through it."""

    summary: str = ""
    events: list[Any] = field(default_factory=list)  # sessions_app.events.Event


CONTEXT_EVENTS = 8
CONTEXT_CHARS = 4000
IMPORTANCE = {EXPLICIT_INSTRUCTIONS: 0.8, PERSONAL_INFO: 0.7}
DEFAULT_IMPORTANCE = 0.5

# What a model writes when it records a request, a question or a greeting rather than a fact
# about the user: "The user asked for a haiku about autumn leaves.", "The user wants to know how
# photosynthesis works.", "The user greeted the assistant."
_REQUEST_RECORD = re.compile(
    r"^the\s+user\s+(?:(?:has\s+)?(?:asked|asks|requested|requests|inquired|enquired|queried|"
    r"wondered|greeted|thanked|said\s+(?:hello|hi|goodbye|bye|thanks))\b|is\s+asking\b|"
    r"(?:wants|wanted|would\s+like)\s+(?:to\s+(?:know|learn\s+how|understand|see|get|have)|"
    r"help|an?\s+(?:explanation|summary|haiku|poem|list|example|recipe|answer))\b|"
    r"needs?\s+help\s+(?:with|to)\b)"
    r"|\bthe\s+assistant\s+(?:said|explained|wrote|suggested|answered|replied)\b",
    re.I,
)


def fact_is_request(*, text: str) -> bool:
    """Whether a fact only records what the user asked for, asked about or said in passing
    (a request, a question, a greeting, thanks) or what the assistant answered: none of it is
    a fact about the person, so none of it becomes a memory, whatever a model extracted."""
    clean = " ".join(text.split())
    return clean.endswith("?") or bool(_REQUEST_RECORD.search(clean))
