"""The workload both sides of the session benchmark run, and how both report it.

Standard library only: it is imported by our side and by ``bench.adk_side``,
which runs in google-adk's own virtual environment. Everything here is
deterministic, so both sides store the same events and the same state.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

APP_NAME = "bench"

_WORDS = [
    "the",
    "a",
    "we",
    "could",
    "try",
    "to",
    "plan",
    "trip",
    "weekend",
    "budget",
    "train",
    "hotel",
    "museum",
    "dinner",
    "friends",
    "remember",
    "my",
    "sister",
    "likes",
    "hiking",
    "near",
    "lake",
    "mountains",
    "weather",
    "forecast",
    "rain",
    "sunny",
    "book",
    "tickets",
    "morning",
    "evening",
    "cheaper",
    "option",
    "schedule",
    "meeting",
    "project",
    "deadline",
    "report",
    "draft",
    "email",
    "recipe",
    "pasta",
    "garden",
    "tomatoes",
    "running",
    "shoes",
    "marathon",
    "training",
    "week",
]


@dataclass(frozen=True)
class Turn:
    """One event of the benchmark chat: who says what, and the state it changes."""

    invocation_id: str
    author: str
    role: str
    text: str
    state_delta: dict[str, Any]


def chat_turns(count: int, seed: int = 7) -> list[Turn]:
    """``count`` events of a chat, a user message then a model reply, and so on.

    Texts are 10 to 90 words. Every event's state delta mixes the three kinds
    of keys an agent writes: session keys (a counter on every event, a new
    topic key every 25 events), ``user:`` keys (on every event, a structured
    value every 100) and a ``temp:`` key, which neither side stores.
    """
    rng = random.Random(seed)
    turns = []
    for index in range(count):
        is_user = index % 2 == 0
        words = rng.choices(_WORDS, k=rng.randint(10, 90))
        delta: dict[str, Any] = {
            "turn": index,
            "last_author": "user" if is_user else "assistant",
            "user:last_turn": index,
            "temp:scratch": {"step": index, "note": " ".join(words[:5])},
        }
        if index % 25 == 0:
            delta[f"topic_{index // 25}"] = " ".join(words[:8])
        if index % 100 == 0:
            delta["user:preferences"] = {"language": "en", "tone": "brief", "seen": index}
        turns.append(
            Turn(
                invocation_id=f"e-bench-{index // 2:06d}",
                author="user" if is_user else "assistant",
                role="user" if is_user else "model",
                text=" ".join(words).capitalize() + ".",
                state_delta=delta,
            )
        )
    return turns


def list_session_state(index: int) -> dict[str, Any]:
    """The creation state of the ``index``-th session of the list_sessions user."""
    return {"title": f"Chat {index}", "turns": 0, "user:display_name": "Bench user"}


def writer_delta(*, writer: int, index: int) -> dict[str, Any]:
    """The state delta of a concurrent writer's ``index``-th event.

    Each writer owns a session key and a ``user:`` key, so after all writers
    are done every one of those keys must hold its writer's last index.
    """
    return {f"writer_{writer}": index, f"user:writer_{writer}": index, "temp:step": index}


def percentile(samples: list[float], fraction: float) -> float:
    """The nearest-rank percentile of ``samples`` (``fraction`` in 0..1)."""
    ordered = sorted(samples)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def summary(samples: list[float]) -> dict[str, float]:
    """Count, p50, p95 and mean of durations in seconds, the latter three in milliseconds."""
    return {
        "n": len(samples),
        "p50_ms": percentile(samples, 0.50) * 1000,
        "p95_ms": percentile(samples, 0.95) * 1000,
        "mean_ms": sum(samples) / len(samples) * 1000,
    }
