"""Generation of memories evaluated against a golden set (``memory_eval golden``).

The golden sets (``memory_app/golden/*.json``) are conversations with the memories a good
extractor keeps from them. A kept memory matches an expected one when at least
``GOLDEN_MATCH`` (0.6) of the expected memory's index terms (``memory_app.ranking.tokenize``:
stopwords dropped, stemmed; "user" left out too, as every fact is about the user) occur in it;
memories and expectations are paired one to one, best overlap first. Precision is matched /
kept, recall matched / expected. The measure asks whether a memory carries the expected fact,
so a verbose memory that contains it counts as a match.

Each conversation's chats are stored and generated through the real pipeline, as LoCoMo's are
(:func:`memory_app.evaluation.session_ingest`), for a user of its own under the app name
``golden-eval``, deleted at the end unless asked to keep it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memory_app.evaluation import Progress, session_ingest, silent, user_create
from memory_app.extraction import fact_negated, memory_model_configured
from memory_app.models import Memory, MemoryStatus
from memory_app.ranking import tokenize

GOLDEN_APP = "golden-eval"
GOLDEN_MATCH = 0.6
GOLDEN_DATE = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def _golden_terms(text: str) -> set[str]:
    return set(tokenize(text)) - {"user"}


def golden_matches(*, kept: Sequence[str], expected: Sequence[str]) -> list[tuple[int, int]]:
    """Pairs (kept index, expected index), one to one, best overlap first, each with at least
    ``GOLDEN_MATCH`` of the expected memory's index terms found in the kept memory."""
    kept_terms = [_golden_terms(text) for text in kept]
    candidates = []
    for j, text in enumerate(expected):
        wanted = _golden_terms(text)
        for i, terms in enumerate(kept_terms):
            overlap = len(wanted & terms) / len(wanted) if wanted else 0.0
            if overlap >= GOLDEN_MATCH:
                candidates.append((overlap, i, j))
    pairs, used_kept, used_expected = [], set(), set()
    for _overlap, i, j in sorted(candidates, key=lambda c: (-c[0], c[1], c[2])):
        if i not in used_kept and j not in used_expected:
            pairs.append((i, j))
            used_kept.add(i)
            used_expected.add(j)
    return pairs


def _ratio(a: int, b: int) -> float:
    return round(a / b, 4) if b else 0.0


def _scores(*, matched: int, expected: int, kept_matched: int, kept: int) -> dict[str, Any]:
    precision, recall = _ratio(kept_matched, kept), _ratio(matched, expected)
    f1 = round(2 * precision * recall / (precision + recall), 4) if precision + recall else 0.0
    return {
        "expected": expected,
        "kept": kept,
        "precision": precision,
        "recall": recall,
        "f1": f1,
    }


def golden_evaluate(
    *, path: Path, app_name: str = GOLDEN_APP, keep: bool = False, progress: Progress = silent
) -> dict[str, Any]:
    """Precision, recall and F1 of the active memories generated from each golden conversation
    against its expected memories, with each conversation's misses and extras.

    The file is a list of ``{"id", "turns": [{"author": "user"|"assistant", "text"}],
    "expected": [memory text, ...]}``; each conversation is one session of a new user. Instead
    of ``turns``, ``sessions`` may list several chats of that user, in order, a day apart, each
    ``{"turns", "create": false (said with memory creation off), "temporary": true}``; the
    memories expected are those active after the last one. An expected memory may be
    ``{"text", "topic"}``: then ``by_topic`` gives precision, recall and F1 per topic (recall
    by the expected memory's topic, precision by the kept memory's).

    A conversation may also name its ``family`` (how it is phrased: "negation", "past-tense"
    ...) and list ``stale`` memories, the older values a correction replaced: it ends *exact*
    when every expected memory is kept and no other active memory of the same polarity
    carries a stale one. ``exact`` counts those conversations, ``by_family`` per family.
    """
    conversations = json.loads(Path(path).read_text())
    kept_total = expected_total = matched_total = 0
    details = []
    users = []
    topics: dict[str, dict[str, int]] = {}
    families: dict[str, dict[str, int]] = {}
    exact_total = 0

    def count(topic: str, key: str) -> None:
        if topic:
            topics.setdefault(topic, {"kept": 0, "expected": 0, "kept_matched": 0, "matched": 0})
            topics[topic][key] += 1

    try:
        for number, conversation in enumerate(conversations, start=1):
            progress(f"golden {number}/{len(conversations)}")
            user = user_create(app_name=app_name, label=str(conversation["id"]))
            users.append(user)
            sessions = conversation.get("sessions") or [{"turns": conversation["turns"]}]
            for day, session in enumerate(sessions):
                session_ingest(
                    app_name=app_name,
                    user_pk=user.pk,
                    turns=[(turn["author"], turn["text"], {}) for turn in session["turns"]],
                    start=GOLDEN_DATE.timestamp() + day * 86400,
                    create=session.get("create", True),
                    temporary=session.get("temporary", False),
                )
            rows = list(
                Memory.objects.filter(user=user, status=MemoryStatus.ACTIVE)
                .order_by("created_at", "id")
                .values_list("text", "topic")
            )
            kept = [text for text, _topic in rows]
            entries = [e if isinstance(e, dict) else {"text": e} for e in conversation["expected"]]
            expected = [entry["text"] for entry in entries]
            pairs = golden_matches(kept=kept, expected=expected)
            if any("topic" in entry for entry in entries):
                for _text, topic in rows:
                    count(topic, "kept")
                for entry in entries:
                    count(entry.get("topic", ""), "expected")
                for i, j in pairs:
                    count(rows[i][1], "kept_matched")
                    count(entries[j].get("topic", ""), "matched")
            paired = {i for i, _j in pairs}
            stale = [
                k
                for i, k in enumerate(kept)
                if i not in paired
                for text in conversation.get("stale", [])
                if fact_negated(text=k) == fact_negated(text=text)
                and golden_matches(kept=[k], expected=[text])
            ]
            exact = len(pairs) == len(expected) and not stale
            exact_total += exact
            family = families.setdefault(
                conversation.get("family", ""), {"conversations": 0, "exact": 0}
            )
            family["conversations"] += 1
            family["exact"] += exact
            kept_total += len(kept)
            expected_total += len(expected)
            matched_total += len(pairs)
            details.append(
                {
                    "id": conversation["id"],
                    "missing": [
                        e for j, e in enumerate(expected) if j not in {p[1] for p in pairs}
                    ],
                    "unexpected": [k for i, k in enumerate(kept) if i not in {p[0] for p in pairs}],
                    "stale": stale,
                    "exact": exact,
                }
            )
    finally:
        if not keep:
            for user in users:
                user.delete()
    precision = _ratio(matched_total, kept_total)
    recall = _ratio(matched_total, expected_total)
    f1 = round(2 * precision * recall / (precision + recall), 4) if precision + recall else 0.0
    return {
        "conversations": len(conversations),
        "expected": expected_total,
        "kept": kept_total,
        "matched": matched_total,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "match_threshold": GOLDEN_MATCH,
        "exact": exact_total,
        "by_family": {
            name or "-": {**values, "rate": _ratio(values["exact"], values["conversations"])}
            for name, values in sorted(families.items())
        },
        "by_topic": {
            topic: _scores(
                matched=values["matched"],
                expected=values["expected"],
                kept_matched=values["kept_matched"],
                kept=values["kept"],
            )
            for topic, values in sorted(topics.items())
        },
        "extraction": "gemini" if memory_model_configured() else "offline",
        "details": details,
    }
