"""What an app's background work asked of its model, kept for the staff console's usage."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from core.model_usage import ModelCall, model_calls_collect
from sessions_app.models import BackgroundModelCall


def background_calls_record(
    *, app_name: str, purpose: str, calls: Sequence[ModelCall]
) -> list[BackgroundModelCall]:
    """Keep ``calls`` of ``app_name``'s background work for ``purpose``
    (``BackgroundModelCall.Purpose``), their tokens as reported (None: not reported)."""
    return BackgroundModelCall.objects.bulk_create(
        BackgroundModelCall(
            app_name=app_name,
            purpose=purpose,
            model=call.model[:255],
            prompt_tokens=call.prompt_tokens,
            completion_tokens=call.completion_tokens,
        )
        for call in calls
    )


@contextmanager
def background_calls_kept(*, app_name: str, purpose: str) -> Iterator[None]:
    """Keep every model call completed inside the block for ``app_name``'s ``purpose``, also
    when the block fails after some (a job whose consolidation failed still spent its
    extraction's tokens)."""
    with model_calls_collect() as calls:
        try:
            yield
        finally:
            if calls:
                background_calls_record(app_name=app_name, purpose=purpose, calls=calls)
