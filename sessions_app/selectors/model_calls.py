"""How much an app asked of its model: its background work's calls (``BackgroundModelCall``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q, Sum

from sessions_app.models import BackgroundModelCall


@dataclass(frozen=True)
class ModelUsage:
    """Model calls over a period, in tokens as their servers reported them; ``unreported``:
    how many of the ``calls`` came with no counts (their tokens are not in the sums)."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    unreported: int = 0


def background_usage(*, app_name: str, since: datetime) -> dict[str, ModelUsage]:
    """The app's background model calls since ``since``, by purpose
    (``BackgroundModelCall.Purpose``), purposes without a call left out."""
    rows = (
        BackgroundModelCall.objects.filter(app_name=app_name, called_at__gte=since)
        .values("purpose")
        .annotate(
            calls=Count("pk"),
            unreported=Count("pk", filter=Q(prompt_tokens__isnull=True)),
            prompt=Sum("prompt_tokens"),
            completion=Sum("completion_tokens"),
        )
        .order_by("purpose")
    )
    return {
        row["purpose"]: ModelUsage(
            calls=row["calls"],
            prompt_tokens=row["prompt"] or 0,
            completion_tokens=row["completion"] or 0,
            unreported=row["unreported"],
        )
        for row in rows
    }
