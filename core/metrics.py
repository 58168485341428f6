"""Prometheus counters of chat turns, counted by the process that ran them.

The web process that runs a turn counts it, so each web process is its own scrape target (sum
over instances); ``chatapp.metrics`` serves the registry at ``/metrics`` with the
deployment-wide figures read at scrape time.
"""

from __future__ import annotations

import logging

from prometheus_client import Counter, Histogram, disable_created_metrics

logger = logging.getLogger(__name__)

# The *_created series only repeat each process's start time, once per label set.
disable_created_metrics()

TURN_OUTCOMES = ("completed", "error", "interrupted", "incomplete")

TURNS = Counter(
    "chatapp_turns",
    "Chat turns finished by this process, by outcome: completed, error (the model or the "
    "agent failed; an error event was stored), interrupted (cancelled), incomplete (no "
    "final event was stored).",
    ["outcome"],
)
TURN_SECONDS = Histogram(
    "chatapp_turn_duration_seconds",
    "Time from a user message to its turn's end, model time included.",
    buckets=(0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
)
for _outcome in TURN_OUTCOMES:
    TURNS.labels(outcome=_outcome)


def turn_observe(*, outcome: str, seconds: float) -> None:
    """Count one finished turn, and log it; ``outcome`` is one of ``TURN_OUTCOMES``."""
    TURNS.labels(outcome=outcome).inc()
    TURN_SECONDS.observe(seconds)
    logger.info(
        "turn %s in %.3f s",
        outcome,
        seconds,
        extra={"outcome": outcome, "duration_seconds": round(seconds, 4)},
    )


def turn_outcome(*, final_event: object | None) -> str:
    """The outcome of a turn from its final stored event (None when none was stored)."""
    if final_event is None:
        return "incomplete"
    if getattr(final_event, "interrupted", False):
        return "interrupted"
    if getattr(final_event, "error_code", None):
        return "error"
    return "completed"
