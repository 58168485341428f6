"""The model calls of a piece of background work, in tokens as each server reported them.

A chat turn keeps each model call's usage on its events; background work (a memory job's
extraction and consolidation, a summary of a conversation) has no event to keep it on, so
the clients report every call they complete to the collector of the work running
(:func:`model_calls_collect`), which the work stores for its app. A call whose server
reported no counts (llama-cpp-python sends none on a stream) is kept as not reported, never
as zero.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from google.genai import types


@dataclass(frozen=True)
class ModelCall:
    """One completed model call; None tokens: the server did not report them."""

    model: str
    prompt_tokens: int | None
    completion_tokens: int | None


_collected: ContextVar[list[ModelCall] | None] = ContextVar("model_calls", default=None)


@contextmanager
def model_calls_collect() -> Iterator[list[ModelCall]]:
    """Collect the model calls made in this context (its threads and event loops included:
    ``asgiref`` carries the context over) into the list yielded."""
    calls: list[ModelCall] = []
    token = _collected.set(calls)
    try:
        yield calls
    finally:
        _collected.reset(token)


def model_call_report(
    *, model: str, usage: types.GenerateContentResponseUsageMetadata | None
) -> None:
    """Report a completed call of ``model`` and the usage its server gave (None or empty: none)
    to the collector running, if any."""
    calls = _collected.get()
    if calls is None:
        return
    calls.append(
        ModelCall(
            model=model,
            prompt_tokens=usage.prompt_token_count if usage else None,
            completion_tokens=usage.candidates_token_count if usage else None,
        )
    )


def usage_unreported() -> types.GenerateContentResponseUsageMetadata:
    """The usage of a call whose server reported none: every count absent, so that the call is
    known to have been made and its tokens known to be unknown (not zero)."""
    return types.GenerateContentResponseUsageMetadata()
