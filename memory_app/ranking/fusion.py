"""Blending lexical and semantic scores (and optional priors) into one deterministic order."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .bm25 import DocId


@dataclass(frozen=True, slots=True)
class Ranked:
    """One ranked memory: its id, the blended score it was ordered by, and the two signals."""

    doc_id: DocId
    score: float
    lexical: float
    semantic: float


def _scaled(values: np.ndarray, *, floor_at_zero: bool) -> np.ndarray:
    """Scale into [0, 1]: BM25 by its best score (absent documents score 0, the natural floor),
    cosine min-max (it has no natural zero)."""
    if not values.size:
        return values
    high = float(values.max())
    low = 0.0 if floor_at_zero else float(values.min())
    span = high - low
    if span <= 0:
        return np.full_like(values, 1.0 if high > 0 else 0.0)
    return (values - low) / span


def _ranks(values: np.ndarray, ids: Sequence[DocId]) -> np.ndarray:
    """1-based rank of each value, best first, ties by id (for reciprocal-rank fusion)."""
    order = sorted(range(len(ids)), key=lambda i: (-values[i], ids[i]))
    ranks = np.empty(len(ids), dtype=np.float64)
    ranks[order] = np.arange(1, len(ids) + 1)
    return ranks


def rank_arrays(
    *,
    ids: Sequence[DocId],
    lexical: np.ndarray,
    semantic: np.ndarray | None = None,
    has_vector: np.ndarray | None = None,
    method: Literal["blend", "rrf"] = "blend",
    semantic_weight: float = 0.5,
    rrf_k: int = 60,
    priors: np.ndarray | None = None,
    prior_weight: float = 0.0,
    bonus: np.ndarray | None = None,
    neighbours: Callable[[np.ndarray], np.ndarray] | None = None,
    neighbour_weight: float = 0.0,
    groups: np.ndarray | None = None,
    limit: int = 10,
) -> list[Ranked]:
    """:func:`rank` on arrays aligned with ``ids`` (the fast path for thousands of memories).

    ``has_vector`` marks which rows carry a real semantic score (default: all, when ``semantic``
    is given); rows without one count 0 on that signal. ``bonus`` is added to the blended
    score (and makes a row eligible); then ``neighbours``, given those scores, returns each
    row's best neighbouring score, of which ``neighbour_weight`` is added; priors come last.
    ``groups``: rows sharing a number >= 0 are one result, only the best-ranked of them
    returned (-1: a row of its own).
    """
    n = len(ids)
    if not n or limit <= 0:
        return []
    lexical = np.asarray(lexical, dtype=np.float64)
    weight = semantic_weight if semantic is not None else 0.0
    sem = np.zeros(n) if semantic is None else np.asarray(semantic, dtype=np.float64)
    mask = np.ones(n, dtype=bool) if has_vector is None else np.asarray(has_vector, dtype=bool)
    if semantic is None:
        mask = np.zeros(n, dtype=bool)
    if method == "rrf":
        lex_part = np.where(lexical > 0, 1.0 / (rrf_k + _ranks(lexical, ids)), 0.0)
        sem_part = np.zeros(n)
        if mask.any():
            sub = [ids[i] for i in np.flatnonzero(mask)]
            sem_part[mask] = 1.0 / (rrf_k + _ranks(sem[mask], sub))
    elif method == "blend":
        lex_part = _scaled(lexical, floor_at_zero=True)
        sem_part = np.zeros(n)
        if mask.any():
            sem_part[mask] = _scaled(sem[mask], floor_at_zero=False)
    else:
        raise ValueError(f"unknown method {method!r}")
    score = (1.0 - weight) * lex_part + weight * sem_part
    relevant = (lexical > 0) | (mask if weight > 0 else False)
    if bonus is not None:
        score = score + bonus
        relevant |= bonus > 0
    if neighbours is not None and neighbour_weight:
        around = neighbours(np.where(relevant, score, 0.0))
        score = score + neighbour_weight * around
        relevant |= around > 0
    if priors is not None and prior_weight:
        score = score + prior_weight * np.asarray(priors, dtype=np.float64)
    eligible = np.flatnonzero(relevant)
    wanted = limit
    while True:
        candidates = eligible
        if len(eligible) > wanted:
            # Keep everything tied with the wanted-th score, so the id tie-break is exact.
            kth = np.partition(score[eligible], len(eligible) - wanted)[len(eligible) - wanted]
            candidates = eligible[score[eligible] >= kth]
        ordered = sorted(candidates.tolist(), key=lambda i: (-score[i], ids[i]))
        chosen = ordered if groups is None else _one_per_group(ordered, groups)
        if len(chosen) >= limit or len(candidates) == len(eligible):
            break
        wanted *= 2  # rows of one group took places: look further down
    chosen = chosen[:limit]
    return [
        Ranked(ids[i], float(score[i]), float(lexical[i]), float(sem[i]) if mask[i] else 0.0)
        for i in chosen
    ]


def _one_per_group(ordered: list[int], groups: np.ndarray) -> list[int]:
    """``ordered`` without the rows of a group (>= 0) already represented earlier in it."""
    seen: set[int] = set()
    kept = []
    for i in ordered:
        group = int(groups[i])
        if group >= 0:
            if group in seen:
                continue
            seen.add(group)
        kept.append(i)
    return kept


def rank(
    *,
    lexical: Mapping[DocId, float],
    semantic: Mapping[DocId, float] | None = None,
    method: Literal["blend", "rrf"] = "blend",
    semantic_weight: float = 0.5,
    rrf_k: int = 60,
    priors: Mapping[DocId, float] | None = None,
    prior_weight: float = 0.0,
    limit: int = 10,
) -> list[Ranked]:
    """Order documents by a blend of lexical and semantic relevance, best first, ``limit`` long.

    ``blend`` (default): each signal is scaled to [0, 1] (BM25 by its best score, cosine min-max
    over the documents that have a vector) and mixed as ``(1 - w) * lexical + w * semantic``, so
    a strong match on either signal lifts a memory, and one on both lifts it most. ``rrf``:
    weighted reciprocal-rank fusion, ``(1 - w) / (k + rank_lex) + w / (k + rank_sem)``, which
    ignores score gaps. Without semantic scores, ranking is lexical alone. ``priors`` (recency,
    importance: values in [0, 1]) add ``prior_weight * prior``; the default weight 0 keeps them
    neutral. Documents absent from both signals are not returned. Ties are broken by ``doc_id``,
    so results are deterministic; ids must therefore be mutually orderable (all str or all int).
    """
    semantic = semantic or None
    ids = sorted(set(lexical) | set(semantic or ()))
    return rank_arrays(
        ids=ids,
        lexical=np.array([lexical.get(d, 0.0) for d in ids]),
        semantic=None if semantic is None else np.array([semantic.get(d, 0.0) for d in ids]),
        has_vector=None if semantic is None else np.array([d in semantic for d in ids]),
        method=method,
        semantic_weight=semantic_weight,
        rrf_k=rrf_k,
        priors=None if priors is None else np.array([priors.get(d, 0.0) for d in ids]),
        prior_weight=prior_weight,
        limit=limit,
    )


def recency_prior(*, ages_seconds: Mapping[DocId, float], half_life_days: float) -> dict:
    """Map each memory's age to ``0.5 ** (age / half_life)``: 1 for now, 0.5 one half-life ago."""
    half_life = half_life_days * 86400.0
    return {d: 0.5 ** (max(age, 0.0) / half_life) for d, age in ages_seconds.items()}
