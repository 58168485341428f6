"""Reads of one user's own memories and choices, for their Memory page, the API and the
services that change a memory by id."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Prefetch, QuerySet

from memory_app.models import (
    Memory,
    MemoryRevision,
    MemorySettings,
    MemorySource,
)
from memory_app.selectors.search import memory_search
from sessions_app.models import UserState


def memory_get(*, app_name: str, user_pk: int, memory_id: str) -> Memory | None:
    """The user's own memory with this id (any status), or None (also for a malformed id)."""
    try:
        return Memory.objects.filter(app_name=app_name, user_id=user_pk, pk=memory_id).first()
    except ValidationError:
        return None


def user_profile(*, app_name: str, user_pk: int) -> list[tuple[str, Any]]:
    """The user's ``user:`` state in the app as (key without prefix, value), by key: what the
    agent keeps about them outside memories (the name it saved, any profile key)."""
    rows = UserState.objects.filter(app_name=app_name, user_id=user_pk).order_by("key")
    return list(rows.values_list("key", "value"))


def memory_settings_get(*, user_pk: int) -> MemorySettings:
    """The user's choices; a user who never chose has both on (no row is created)."""
    found = MemorySettings.objects.filter(user_id=user_pk).first()
    return found or MemorySettings(user_id=user_pk)


def user_memories(
    *, app_name: str, user_pk: int, memory_ids: list[str] | None = None
) -> QuerySet[Memory]:
    """The user's own memories of the app (user and session scope, every status), by topic and
    newest first, each with the file it keeps, its sources (events in conversation order, with
    the file each was drawn from) and its revisions, for the user's Memory page and API.
    ``memory_ids`` narrows them to those ids."""
    rows = Memory.objects.filter(app_name=app_name, user_id=user_pk)
    if memory_ids is not None:
        rows = rows.filter(pk__in=memory_ids)
    sources = MemorySource.objects.select_related("event", "artifact").order_by(
        "event__session_id", "event__sequence"
    )
    revisions = MemoryRevision.objects.select_related("source_event").order_by("created_at", "id")
    rows = rows.select_related("image")
    return rows.order_by("topic", "-updated_at", "id").prefetch_related(
        Prefetch("sources", queryset=sources), Prefetch("revisions", queryset=revisions)
    )


def user_memories_matching(*, app_name: str, user_pk: int, query: str, limit: int) -> list[Memory]:
    """The best matches of ``query`` among the user's active memories, best first, as
    :func:`user_memories` gives them (sources and revisions), each with its ``score``.

    The same retrieval as the assistant's (:func:`memory_search`), so what the user finds is
    what a reply could use; app-wide memories, not the user's, are left out."""
    found = memory_search(app_name=app_name, user_pk=user_pk, query=query, limit=limit)
    rows = user_memories(
        app_name=app_name, user_pk=user_pk, memory_ids=[result.id for result in found]
    )
    by_id = {str(memory.id): memory for memory in rows}
    matching = []
    for result in found:
        memory = by_id.get(result.id)
        if memory is not None:
            memory.score = result.score
            matching.append(memory)
    return matching
