"""Files attached to the users' messages a job reads: which versions they are, and the facts an
explicit "remember this" about them yields without a model.

A user message holds each attached file as an ``artifact://`` reference (``agents_app``'s
runner stores them so); only references to the job's own user's files in the job's app are
read, so a message naming someone else's file yields nothing from it.

Without a model nothing can be said about what a file shows, so the offline rule keeps only
what the user asked for explicitly: a user message with attached files whose words ask to
remember them ("remember this logo", "please keep these", "don't forget it") yields, for each
file, a fact that keeps the file itself, its text naming what the user called it and the
file's name, type and size ("The user asked to remember this logo: logo.png, a PNG image of
2.1 KB."); topic ``explicit_instructions``, source ``explicit``, confidence 0.95, importance
0.8, the message its only source.
"""

from __future__ import annotations

import re

from core.sizes import size_words
from memory_app.extraction.facts import (
    EXCERPT_CHARS,
    IMPORTANCE,
    USER_AUTHOR,
    ExtractedFact,
    FactFile,
)
from memory_app.models import SourceType
from memory_app.topics import EXPLICIT_INSTRUCTIONS
from sessions_app import selectors as session_selectors
from sessions_app.events import Event
from sessions_app.models import ArtifactRecord

ARTIFACT_SCHEME = "artifact://"

# "remember this logo", "please keep these", "don't forget it": the words after the request
# point at something in the message, not at a clause ("remember that my cat is ..."): a bare
# "this" or "that" ends the sentence or comes before a closing word.
KEEP_REQUEST = re.compile(
    r"\b(?:remember|keep|save|store|don'?t\s+forget|do\s+not\s+forget)\s+(?:"
    r"(?P<what>(?:this|these|that|those)\s+(?!(?:is|are|was|were|i|my|we|you|the|a|an|to|"
    r"please|for|and|as|in|on|of|too|also)\b)(?P<noun>[a-z][\w-]*))"
    r"|(?P<bare>this|these|that|those|it|them)"
    r"(?=\s*(?:$|[.!?,;:)]|(?:please|too|also|for\s+me|for\s+later)\b)))",
    re.IGNORECASE,
)

_KINDS = {
    "image/png": "a PNG image",
    "image/jpeg": "a JPEG image",
    "image/webp": "a WebP image",
    "image/gif": "a GIF image",
    "application/pdf": "a PDF document",
    "text/markdown": "a Markdown document",
    "text/plain": "a text document",
}


def event_file_references(event: Event) -> list[str]:
    """The ``artifact://`` addresses of the files a user event holds, in order."""
    if event.author != USER_AUTHOR or event.content is None:
        return []
    return [
        part.file_data.file_uri
        for part in event.content.parts or ()
        if part.file_data and (part.file_data.file_uri or "").startswith(ARTIFACT_SCHEME)
    ]


def attached_files_read(
    *, app_name: str, user_pk: int, events: list[Event]
) -> dict[str, list[ArtifactRecord]]:
    """The files attached to the users' events, by event id, each event's in the order
    attached; only the user's own files in ``app_name`` that still exist, of a type a model
    reads. Events without references cost no query."""
    files: dict[str, list[ArtifactRecord]] = {}
    for event in events:
        for uri in event_file_references(event):
            record = session_selectors.artifact_referenced_get(
                uri=uri, app_name=app_name, user_id=str(user_pk)
            )
            if record is not None and session_selectors.artifact_model_readable(record):
                files.setdefault(event.id, []).append(record)
    return files


def file_described(record: ArtifactRecord) -> str:
    """A file as a fact names it: "logo.png, a PNG image of 2.1 KB"."""
    kind = _KINDS.get(record.mime_type, f"a {record.mime_type} file")
    return f"{record.filename}, {kind} of {size_words(record.size)}"


def facts_kept_offline(
    *, events: list[Event], files: dict[str, list[ArtifactRecord]]
) -> list[ExtractedFact]:
    """The offline rule of the module docstring: one fact keeping each file of a user message
    that asks to remember what it attached."""
    facts = []
    for event in events:
        attached = files.get(event.id)
        if not attached:
            continue
        request = KEEP_REQUEST.search(event.text())
        if request is None:
            continue
        said = " ".join((request["what"] or request["bare"]).lower().split())
        for record in attached:
            what = said
            if request["bare"] and said not in {"it", "them"}:
                noun = "image" if record.mime_type.startswith("image/") else "file"
                what = f"{said} {noun}{'s' if said in {'these', 'those'} else ''}"
            facts.append(
                ExtractedFact(
                    text=f"The user asked to remember {what}: {file_described(record)}.",
                    topic=EXPLICIT_INSTRUCTIONS,
                    source_type=SourceType.EXPLICIT,
                    confidence=0.95,
                    importance=IMPORTANCE[EXPLICIT_INSTRUCTIONS],
                    event_ids=[event.id],
                    excerpt=event.text().strip()[:EXCERPT_CHARS],
                    files=[FactFile(event_id=event.id, artifact_id=str(record.pk))],
                    keeps_file=True,
                )
            )
    return facts
