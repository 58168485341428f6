"""Corrections by subject (:mod:`memory_app.extraction.offline.claims`): a fact's claims
matched to the claims of the user's active memories, whatever the words of either.

For a fact with claims, before the similarity rules:

- each negated claim retires the memories' claims it names ("The user quit nursing" retires
  "The user works as a nurse"): a memory whose first clause it is becomes invalidated; a claim
  in a later clause of its own ("..., where they work as a ferry mechanic") is cut from the
  memory, which is updated and keeps the rest;
- each affirmative claim of a single-valued subject supersedes the memories' claims of the
  same subject with another value ("The user is a teacher now" after "The user works as a
  nurse"), and any negation of what it affirms ("The user and Mia got back together" after
  "The user and Mia broke up"): the first such memory whose first clause it is becomes the
  fact (an update, its before and after in the revision), the others are invalidated or cut;
- a negation whose memory an affirmative fact of the same message replaces ("I quit nursing,
  I'm a teacher now") leaves that memory to the update and is not kept on its own: the update
  carries the change and its history.

Every change obeys the conflict rule (``_Run.wins``): a memory the fact does not win
against is left as it is.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from memory_app.consolidation.matching import KnownMemory
from memory_app.consolidation.preparation import PreparedFact
from memory_app.extraction.offline.claims import Claim, claim_retires, claim_supersedes
from memory_app.extraction.offline.rules import time_bound_days

if TYPE_CHECKING:
    from memory_app.consolidation.decisions import _Run

_JOINER = re.compile(r"[\s,;:]*(?:\b(?:and|but|so|where|while)\s*)?$", re.I)


def _without_clause(text: str, claim: Claim) -> str:
    """``text`` with the clause of ``claim`` (not its first) cut out."""
    head = _JOINER.sub("", text[: claim.start].rstrip())
    tail = text[claim.end :].strip(" .")
    joined = f"{head}, {tail}" if tail else head
    return joined.rstrip(" ,") + "."


def _targets(item_claims: list[Claim], known: KnownMemory) -> list[tuple[Claim, Claim]]:
    """(fact's claim, memory's claim) pairs where the first retires or supersedes the second."""
    pairs = []
    for mine in item_claims:
        for theirs in known.claims:
            if claim_retires(mine, theirs) or claim_supersedes(mine, theirs):
                pairs.append((mine, theirs))
    return pairs


def claims_apply(run: _Run, item: PreparedFact, *, replaced_slots: set[tuple[str, str]]) -> bool:
    """Apply ``item`` by its claims (see the module docstring); False when it has none that
    touch a memory and is not a negation left to a same-message update, so the similarity
    rules decide. ``replaced_slots``: the (who, slot) pairs an affirmative fact of the same
    message states."""
    claims = item.claims
    if not claims or item.fact.expires_at is not None:
        return False  # a statement bound to a time ("in Berlin this week") replaces nothing
    touched: list[tuple[KnownMemory, list[tuple[Claim, Claim]]]] = []
    for known in list(run.known.by_id.values()):
        if known.record or time_bound_days(known.memory.text) is not None:
            continue  # a stay bound to a time ends by itself: no lasting statement replaces it
        pairs = _targets(claims, known)
        if pairs:
            touched.append((known, pairs))
    negation_only = all(claim.negated for claim in claims)
    left_to_update = updated = changed = False
    for known, pairs in sorted(touched, key=lambda entry: -entry[0].last_seen):
        if known.memory.id not in run.known.by_id:
            continue
        deferred = [
            theirs
            for mine, theirs in pairs
            if mine.negated and (theirs.who, theirs.slot) in replaced_slots and theirs.slot
        ]
        if deferred and len(deferred) == len(pairs):
            left_to_update = True
            continue
        if not run.wins(item, known):
            run.report.unchanged.append(known.memory)
            continue
        changed = True
        whole = any(theirs.main for _mine, theirs in pairs) or len(known.claims) == 1
        superseding = any(not mine.negated and not theirs.negated for mine, theirs in pairs)
        reason = run.said_reason(item)
        if whole and superseding and not updated:
            run.writes.update(known, item, reason=reason)
            updated = True
        elif whole:
            run.writes.invalidate(known, item, reason=reason)
        else:
            text = known.memory.text
            for _mine, theirs in sorted(pairs, key=lambda pair: -pair[1].start):
                text = _without_clause(text, theirs)
            run.writes.revise(known, item, text=text, reason=reason)
    if updated:
        return True
    if negation_only and left_to_update:
        run.report.unchanged.extend(known.memory for known, _pairs in touched[:1])
        return True
    if not touched:
        return False
    if changed:
        run.writes.create(item, reason="extracted from the conversation")
    return True


def claims_conflict(mine: list[Claim], theirs: list[Claim]) -> bool:
    """Whether two facts say different values of one subject (so they are no duplicates,
    however many words they share)."""
    return any(claim_supersedes(a, b) and not b.negated for a in mine for b in theirs)
