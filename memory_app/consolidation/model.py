"""Consolidation by the model, as the whitepaper defines it: with ``LLM_PROVIDER`` configured,
the model is shown the new facts together with the user's most similar existing memories (ids,
texts, trust, confidence, dates) and answers, as structured output, one operation per fact:

- ``CREATE``: the fact is new, store it;
- ``UPDATE`` (``memory_id``, ``text``): the memory is outdated or incomplete, its text becomes
  ``text`` (which may merge the old and the new);
- ``INVALIDATE`` or ``DELETE`` (``memory_id``): the fact shows the memory is no longer true; it
  is invalidated (kept in the history, never used again);
- ``NOTHING`` (optionally ``memory_id``): the memory already says it (the fact's events become
  its sources), or the fact is not worth keeping;

each with a ``reason``, which goes into the memory's revision.

The model decides *what* changes; code keeps what must always hold. :func:`consolidation_plan`
accepts an operation only on a memory that was shown to the model for that fact (an invented
id, another fact's candidate or another user's memory is refused, and that fact goes through
the similarity rules instead), checks an UPDATE's new text like any extracted text, and embeds
it. Applying the plan (``decisions``) keeps the trust order (a lower-trust fact never changes a
higher-trust memory), the provenance links and the one transaction. A model that fails, or
answers out of the schema, leaves every fact to the similarity rules, which also remain the
whole of consolidation without a model.

The plan is made before the user's lock is taken (it reads memories and calls the model);
``decisions`` re-reads the memories under the lock, so an operation on a memory that changed
meanwhile falls back to the rules as well.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from memory_app.consolidation.matching import KnownMemories, KnownMemory
from memory_app.consolidation.preparation import PreparedFact, PreparedFacts
from memory_app.embedding import embedder_get
from memory_app.extraction import fact_is_turn_record, fact_text_normalise
from memory_app.models import SourceType
from memory_app.safety import pii_redact
from memory_app.safety.guard import memory_write_guard

logger = logging.getLogger(__name__)

CANDIDATES_SHOWN = 5
REASON_CHARS = 300


class Operation(StrEnum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    INVALIDATE = "INVALIDATE"
    DELETE = "DELETE"
    NOTHING = "NOTHING"


@dataclass(frozen=True)
class PlannedOperation:
    """The model's operation for one fact, checked: ``memory_id`` was shown for that fact,
    ``text`` (UPDATE) is normalised, redacted and safe, ``vector`` is its embedding."""

    operation: Operation
    reason: str
    memory_id: uuid.UUID | None = None
    text: str = ""
    vector: np.ndarray | None = None


def consolidation_schema() -> dict[str, Any]:
    """The JSON Schema of the model's answer: one operation per fact."""
    return {
        "type": "object",
        "properties": {
            "operations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "fact": {"type": "integer", "description": "The fact's number."},
                        "operation": {"type": "string", "enum": [op.value for op in Operation]},
                        "memory_id": {
                            "type": "string",
                            "description": "For UPDATE, INVALIDATE, DELETE (and NOTHING when "
                            "a memory already says it): the id of one of the fact's memories.",
                        },
                        "text": {
                            "type": "string",
                            "description": "For UPDATE: the memory's new text, 'The user ...'.",
                        },
                        "reason": {"type": "string", "description": "Why, in one sentence."},
                    },
                    "required": ["fact", "operation", "reason"],
                },
            }
        },
        "required": ["operations"],
    }


SYSTEM_INSTRUCTION = """You consolidate a user's long-term memories.
You get new facts about the user, each with the user's existing memories most similar to it
(id, text, source, confidence, last update). For each fact choose exactly one operation:
- CREATE: the fact is new information; it will be stored as it is.
- UPDATE: one of the fact's memories is outdated or incomplete given the fact; give its
  memory_id and its new text (one self-contained sentence, 'The user ...').
- INVALIDATE: the fact shows one of the fact's memories is no longer true (the user moved,
  changed their mind, corrected it) and the fact itself need not be kept; give its memory_id.
- DELETE: as INVALIDATE, for a memory that was never true.
- NOTHING: a memory already says this (give its memory_id), or the fact is not worth keeping.
Between two things the user said, the newer wins, whether or not they asked you to remember
the older one: "I moved to Porto" UPDATES "The user lives in Lisbon" even when that was an
explicit request, and "I no longer eat meat" INVALIDATES "The user eats meat". Only tool output
must never override what the user said.
Match a fact to a memory by what both are about, not by their wording or where it stands in
the sentence: where the user lives ("moved to", "is based in", "these days lives"), their work
("is a teacher now", "quit nursing", "retired"), their studies, diet, partner and family
members by name, a favourite or a preference. A newer fact about the same subject UPDATES the
older memory (the history keeps what it said); a negation ("not ... anymore", "no longer",
"quit", "stopped", "used to", "broke up with") INVALIDATES the memory it negates. When a memory
joins several things ("The user lives in Gdansk, where they work as a ferry mechanic.") and the
fact changes only one, UPDATE it to keep the rest true ("The user lives in Gdansk, where they
teach welding."). A negation whose replacement another fact of the same message states
("I quit nursing, I'm a teacher now") is NOTHING: that fact's UPDATE carries the change.
Use only the memory ids listed under that fact. Give a short reason for each operation,
written for the user ("You said you moved to Porto.")."""


def _candidate_line(known: KnownMemory) -> str:
    memory = known.memory
    source = SourceType(memory.source_type).label.lower()
    return (
        f"  - id {memory.id}: {memory.text} (source: {source}, confidence "
        f"{memory.confidence:.2f}, updated {memory.updated_at:%Y-%m-%d})"
    )


def _prompt(facts: dict[int, PreparedFact], shown: dict[int, list[KnownMemory]]) -> str:
    lines = []
    for number, item in facts.items():
        lines.append(f"Fact {number}: {item.text} (kind: {item.fact.kind})")
        if shown[number]:
            lines.append("  Similar memories:")
            lines.extend(_candidate_line(known) for known in shown[number])
        else:
            lines.append("  Similar memories: none")
    return "\n".join(lines)


def _operation_parse(
    entry: Any, *, facts: dict[int, PreparedFact], shown: dict[int, list[KnownMemory]]
) -> tuple[int, Operation, uuid.UUID | None, str, str] | None:
    """One entry of the answer as (fact number, operation, memory id, text, reason), or None
    with a logged warning when it is malformed or names a memory not shown for its fact."""
    if not isinstance(entry, dict):
        logger.warning("consolidation: an operation is not an object: %.80r", entry)
        return None
    number, name = entry.get("fact"), entry.get("operation")
    if isinstance(number, bool) or not isinstance(number, int) or number not in facts:
        logger.warning("consolidation: an operation names no fact shown: %.80r", number)
        return None
    if name not in {op.value for op in Operation}:
        logger.warning("consolidation: unknown operation %.80r for fact %s", name, number)
        return None
    operation = Operation(name)
    reason = entry.get("reason")
    reason = " ".join(reason.split())[:REASON_CHARS] if isinstance(reason, str) else ""
    text = entry.get("text") if isinstance(entry.get("text"), str) else ""
    raw_id = entry.get("memory_id") or ""
    allowed = {str(known.memory.id): known.memory.id for known in shown[number]}
    if (raw_id and not isinstance(raw_id, str)) or (raw_id and raw_id not in allowed):
        logger.warning(
            "consolidation: fact %s names memory %.80r, which was not shown for it", number, raw_id
        )
        return None
    memory_id = allowed.get(raw_id) if raw_id else None
    if operation in (Operation.UPDATE, Operation.INVALIDATE, Operation.DELETE) and not memory_id:
        logger.warning("consolidation: %s for fact %s names no memory", operation, number)
        return None
    if operation == Operation.UPDATE and not text.strip():
        logger.warning("consolidation: UPDATE for fact %s has no text", number)
        return None
    return number, operation, memory_id, text, reason


def consolidation_plan(*, user_pk: int, prepared: PreparedFacts) -> int:
    """Ask the model for one operation per fact of ``prepared`` and attach each checked one to
    its fact (``PreparedFact.plan``); returns how many facts got one.

    Facts that were refused by the safety check, and turn records (append-only), are not
    shown. A fact whose operation is missing, malformed or unsafe keeps no plan: the
    similarity rules decide it. A model error leaves every fact to them. Must be called
    without the user's lock: it reads their memories and calls the model and the embedder.
    """
    from core.llm import ModelError
    from memory_app.extraction.model import model_json

    eligible = {
        number: item
        for number, item in enumerate(prepared.items, start=1)
        if item.verdict.ok and not fact_is_turn_record(text=item.text, topic=item.fact.topic)
    }
    if not eligible:
        return 0
    known = KnownMemories(
        user_pk=user_pk, app_name=prepared.app_name, embedder_name=prepared.embedder_name
    )
    shown = {
        number: [entry[0] for entry in known.similar(item)[:CANDIDATES_SHOWN]]
        for number, item in eligible.items()
    }
    try:
        answer = model_json(
            system_instruction=SYSTEM_INSTRUCTION,
            contents=_prompt(eligible, shown),
            response_schema=consolidation_schema(),
        )
    except ModelError as error:
        logger.warning("consolidation by the model failed, the rules decide: %s", error)
        return 0
    entries = answer.get("operations")
    if not isinstance(entries, list):
        logger.warning("consolidation: the answer has no operations list, the rules decide")
        return 0
    parsed = {}
    for entry in entries:
        operation = _operation_parse(entry, facts=eligible, shown=shown)
        if operation is not None and operation[0] not in parsed:
            parsed[operation[0]] = operation
    texts = {}
    for number, operation, _memory_id, text, _reason in parsed.values():
        if operation == Operation.UPDATE:
            text = pii_redact(text=fact_text_normalise(text=text), app_name=prepared.app_name)
            verdict = memory_write_guard(text=text)
            if verdict.ok:
                texts[number] = text
            else:
                logger.warning("consolidation: UPDATE text of fact %s refused", number)
    embedder = embedder_get()
    vectors = (
        dict(zip(texts, embedder.encode(list(texts.values())), strict=True))
        if (texts and embedder.name == prepared.embedder_name and embedder.name != "none")
        else {}
    )
    planned = 0
    for number, operation, memory_id, _text, reason in parsed.values():
        if operation == Operation.UPDATE and number not in texts:
            continue
        vector = vectors.get(number)
        eligible[number].plan = PlannedOperation(
            operation=operation,
            reason=reason or f"{operation.value.lower()} decided by the model",
            memory_id=memory_id,
            text=texts.get(number, ""),
            vector=None if vector is None else np.asarray(vector, dtype=np.float32),
        )
        planned += 1
    return planned
