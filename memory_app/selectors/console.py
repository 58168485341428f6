"""Reads of the staff console: a memory's provenance and history, generation jobs counted
by status, and the open embedding warnings."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count

from memory_app.models import (
    EmbeddingWarning,
    GenerationJob,
    MemoryRevision,
    MemorySource,
)


def memory_provenance_sources(*, memory_id) -> list[MemorySource]:
    """The memory's source links with their events and files, in conversation order."""
    return list(
        MemorySource.objects.filter(memory_id=memory_id)
        .select_related("event__session", "artifact")
        .order_by("event__timestamp", "event__sequence")
    )


def memory_revisions(*, memory_id) -> list[MemoryRevision]:
    """The memory's history, oldest first, with the job or person behind each change."""
    return list(
        MemoryRevision.objects.filter(memory_id=memory_id)
        .select_related("actor_user", "actor_job")
        .order_by("created_at", "id")
    )


def memory_job_status_counts(*, since: datetime) -> dict[str, int]:
    """Generation jobs created since ``since``, counted by status (every status present)."""
    counts = dict.fromkeys(GenerationJob.Status.values, 0)
    rows = (
        GenerationJob.objects.filter(created_at__gte=since)
        .values_list("status")
        .annotate(total=Count("id"))
    )
    counts.update(dict(rows))
    return counts


def embedding_warnings_open() -> list[EmbeddingWarning]:
    """The embedding warnings not yet acknowledged or resolved, one at most a kind."""
    return list(EmbeddingWarning.objects.filter(closed_at__isnull=True).order_by("kind"))
