"""The one guard every door that writes a memory goes through (issue 43).

A memory is placed in future prompts, so whatever writes one — extraction and consolidation,
the agent's ``create_memory`` tool ("Remember that ..."), ``add_memory`` and corrections over
MCP, REST and the Memory page, the service API, app memories, and a file kept with a memory
("remember this file") — asks :func:`memory_write_guard` first: the text, and the text of the
file the memory keeps (recalled with it), read as a model reads it (:func:`memory_text_check`).
The same verdict holds everywhere; what a door does with a refusal is the same too: nothing
becomes an active memory, and the caller is told why (a correction or an app memory is
refused outright; a fact said by the person is held for review, its secrets masked, so staff
and the person see what was held about them).

It lives beside the check rather than in ``memory_app.services`` because consolidation, which
every fact goes through, is below the services and may not import them.
"""

from __future__ import annotations

from collections.abc import Iterable

from memory_app.safety import SafetyVerdict, memory_text_check
from sessions_app import selectors as session_selectors
from sessions_app.models import ArtifactRecord


def memory_write_guard(
    *, text: str, files: Iterable[ArtifactRecord] = (), procedural: bool = False
) -> SafetyVerdict:
    """Whether ``text``, and what each of ``files`` says (a text file's text, a PDF's text
    layer), may go into an active memory; the reason names the file that fails. ``procedural``
    for an app memory: guidance staff give the agent, which may tell it what to do (see
    :func:`memory_text_check`)."""
    verdict = memory_text_check(text=text, procedural=procedural)
    if not verdict.ok:
        return verdict
    for record in files:
        file_text = session_selectors.artifact_text(record)
        if not file_text.strip():
            continue
        verdict = memory_text_check(text=file_text, procedural=procedural)
        if not verdict.ok:
            return SafetyVerdict(
                ok=False, reason=f"{verdict.reason}, in the file \u201c{record.filename}\u201d"
            )
    return SafetyVerdict(ok=True)


def fact_files_get(artifact_ids: Iterable[str]) -> list[ArtifactRecord]:
    """The stored file versions a fact is drawn from, by their ids (unknown ids left out)."""
    ids = list(artifact_ids)
    if not ids:
        return []
    return list(ArtifactRecord.objects.filter(pk__in=ids))
