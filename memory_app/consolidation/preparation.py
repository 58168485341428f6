"""Facts made ready for consolidation before any memory is read: third-person text, safety
verdict, PII redaction and the embedder's vectors (see :func:`consolidation_prepare`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from memory_app.embedding import embedder_get
from memory_app.extraction import ExtractedFact, fact_text_normalise, memory_model_configured
from memory_app.extraction.offline.claims import Claim, fact_claims
from memory_app.extraction.profile import profile_read
from memory_app.models import MemoryScope
from memory_app.safety import SafetyVerdict, pii_redact, secrets_mask
from memory_app.safety.guard import fact_files_get, memory_write_guard

if TYPE_CHECKING:
    from memory_app.consolidation.model import PlannedOperation


@dataclass
class PreparedFact:
    """A fact as consolidation stores it: normalised and redacted text, redacted excerpt, the
    safety verdict, and the text's vector (None for a refused text or with no embedder)."""

    fact: ExtractedFact
    text: str
    excerpt: str
    verdict: SafetyVerdict
    vector: np.ndarray | None = None
    structured: dict[str, Any] | None = None  # the profile field it holds (extraction.profile)
    plan: PlannedOperation | None = None  # the model's operation (consolidation.model)
    claims: list[Claim] = field(default_factory=list)  # what it says of which subject


@dataclass(frozen=True)
class PreparedFacts:
    """What :func:`consolidation_prepare` computed for one app's facts, in the facts' order,
    with the name of the embedder that made the vectors."""

    app_name: str
    items: list[PreparedFact]
    embedder_name: str


def _structured(*, fact: ExtractedFact, text: str, app_name: str) -> dict[str, Any] | None:
    """The profile field the memory holds: a user-scope fact's own (the model's reading), else
    what its stored text states (:func:`profile_read`), its values redacted like the text."""
    if fact.scope != MemoryScope.USER:
        return None
    structured = fact.structured or profile_read(text=text)
    if structured is None:
        return None

    def redacted(value: Any) -> Any:
        if isinstance(value, dict):
            return {key: redacted(each) for key, each in value.items()}
        return secrets_mask(text=pii_redact(text=value, app_name=app_name))

    return redacted(structured)


def _fact_prepare(*, fact: ExtractedFact, app_name: str) -> PreparedFact:
    """The fact as stored, with the write guard's verdict on both the text given and the
    third-person text made of it (the rewrite may split a disguise the check would have read
    whole), and on the text of the file the memory keeps ("remember this file"), which is
    recalled with it. A file a fact is only drawn from is not: the fact's own words are all of
    it that is stored."""
    text = fact_text_normalise(text=fact.text)
    files = fact_files_get(each.artifact_id for each in fact.files) if fact.keeps_file else []
    verdict = memory_write_guard(text=text, files=files)
    if verdict.ok and text != fact.text:
        verdict = memory_write_guard(text=fact.text)
    excerpt = secrets_mask(text=pii_redact(text=fact.excerpt, app_name=app_name))
    stored = pii_redact(text=text, app_name=app_name)
    user_scope = verdict.ok and fact.scope == MemoryScope.USER
    return PreparedFact(
        fact=fact,
        text=stored,
        excerpt=excerpt,
        verdict=verdict,
        structured=_structured(fact=fact, text=stored, app_name=app_name) if verdict.ok else None,
        claims=fact_claims(text=stored) if user_scope else [],
    )


def consolidation_prepare(
    *, app_name: str, facts: list[ExtractedFact], user_pk: int | None = None
) -> PreparedFacts:
    """Everything consolidation needs of ``facts`` that reads no memory: third-person text,
    safety verdict, PII redaction per ``app_name``, and one embedder call for the safe texts.
    With ``user_pk`` and the model configured, also the model's operation for each fact
    (:func:`~memory_app.consolidation.model.consolidation_plan`, which does read the user's
    memories).

    Kept apart from :func:`memories_consolidate` so a caller can run it before taking the
    user's lock: with a provider's embeddings the embedder call is a network round trip, which
    must not hold up the user's other jobs. Every vector consolidation may store is made here (an
    updated memory takes the fact's text, hence the fact's vector). Reads no database unless
    a plan is asked for, or a fact keeps a file (the guard reads the file's text).
    """
    items = [_fact_prepare(fact=fact, app_name=app_name) for fact in facts]
    safe = [item for item in items if item.verdict.ok]
    embedder = embedder_get()
    vectors = embedder.encode([item.text for item in safe]) if safe else None
    if vectors is not None:
        for item, vector in zip(safe, vectors, strict=True):
            item.vector = np.asarray(vector, dtype=np.float32)
    prepared = PreparedFacts(app_name=app_name, items=items, embedder_name=embedder.name)
    if user_pk is not None and items and memory_model_configured():
        from memory_app.consolidation.model import consolidation_plan

        consolidation_plan(user_pk=user_pk, prepared=prepared)
    return prepared
