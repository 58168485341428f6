"""Reads of one user's own memories and choices, for their Memory page, the API and the
services that change a memory by id."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Prefetch, Q, QuerySet
from django.utils import timezone

from memory_app.extraction.profile import (
    MAPPING_FIELDS,
    PROFILE_FIELDS,
    profile_field_valid,
    profile_merge,
)
from memory_app.models import (
    AppIndexVersion,
    Memory,
    MemoryRevision,
    MemoryScope,
    MemorySettings,
    MemorySource,
    MemoryStatus,
)
from memory_app.ranking.text import tokenize
from memory_app.selectors.search import memory_search
from sessions_app.models import UserState
from sessions_app.selectors import StoreRead, store_read_run


def memory_get(*, app_name: str, user_pk: int, memory_id: str) -> Memory | None:
    """The user's own memory with this id (any status but retired, as ``user_memories``), or
    None (also for a malformed id): a retired record of what was said is no memory to
    correct, restore or expire."""
    try:
        return (
            Memory.objects.filter(app_name=app_name, user_id=user_pk, pk=memory_id)
            .exclude(status=MemoryStatus.RETIRED)
            .first()
        )
    except ValidationError:
        return None


def user_profile(*, app_name: str, user_pk: int) -> list[tuple[str, Any]]:
    """The user's ``user:`` state in the app as (key without prefix, value), by key: what the
    agent keeps about them outside memories (the name it saved, any profile key)."""
    rows = UserState.objects.filter(app_name=app_name, user_id=user_pk).order_by("key")
    return list(rows.values_list("key", "value"))


@dataclass(frozen=True)
class ProfileEntry:
    """One line of the profile card: a field of the profile (or one entry of ``family`` or
    ``preferences``), its value, and the memory it comes from; None for a ``user:`` key that no
    memory holds (one the agent saved itself), which the card corrects as a key."""

    key: str
    value: str
    memory: Memory | None = None
    field: str = ""  # the profile field it is (or is an entry of); "" for a bare key


def profile_active(*, app_name: str, user_pk: int) -> dict[str, Any]:
    """The profile the user's active, unexpired user-scope memories of the app hold, by field
    (a newer memory's value replaces an older one's): what their ``user:`` keys of the
    profile's fields say (``memory_app.services.profile``)."""
    rows = (
        Memory.objects.filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()),
            app_name=app_name,
            user_id=user_pk,
            scope=MemoryScope.USER,
            status=MemoryStatus.ACTIVE,
            structured__isnull=False,
        )
        .order_by("updated_at", "pk")
        .values_list("structured", flat=True)
    )
    return profile_merge([row for row in rows if profile_field_valid(row)])


def profile_entries(*, app_name: str, user_pk: int) -> list[ProfileEntry]:
    """The user's profile card: the fields their active profile memories hold, in the
    profile's order (a newer memory's value of a field replaces an older one's), then their
    other ``user:`` keys."""
    held: dict[tuple[str, str], tuple[str, Memory]] = {}
    memories = Memory.objects.filter(
        app_name=app_name,
        user_id=user_pk,
        scope=MemoryScope.USER,
        status=MemoryStatus.ACTIVE,
        structured__isnull=False,
    ).order_by("updated_at", "pk")
    for memory in memories:
        if not profile_field_valid(memory.structured):
            continue
        ((field_name, value),) = memory.structured.items()
        pairs = value.items() if field_name in MAPPING_FIELDS else [("", value)]
        for key, each in pairs:
            held[(field_name, key)] = (each, memory)
    order = {name: index for index, name in enumerate(PROFILE_FIELDS)}
    entries = [
        ProfileEntry(key=key or field_name, value=value, memory=memory, field=field_name)
        for (field_name, key), (value, memory) in sorted(
            held.items(), key=lambda item: (order[item[0][0]], item[0][1])
        )
    ]
    fields_held = {field_name for field_name, _ in held}
    for key, value in user_profile(app_name=app_name, user_pk=user_pk):
        if key not in fields_held:
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            entries.append(ProfileEntry(key=key, value=shown))
    return entries


APP_GUIDANCE_LIMIT = 20
APP_GUIDANCE_MAX_CHARS = 4000


def _app_guidance_assemble(results: list[list[tuple]]) -> tuple[int, list[str]]:
    versions, texts = results
    guidance, size = [], 0
    for (text,) in texts:
        line = " ".join(text.split())
        if size + len(line) > APP_GUIDANCE_MAX_CHARS:
            break
        guidance.append(line)
        size += len(line)
    return (versions[0][0] if versions else 0) or 0, guidance


def app_guidance_read(*, app_name: str) -> StoreRead:
    """The read behind :func:`app_guidance`, written out in SQL so that a turn runs it from the
    event loop on PostgreSQL (``store_read_async``)."""
    memories = Memory._meta.db_table
    versions = AppIndexVersion._meta.db_table
    return StoreRead(
        [
            (f"SELECT version FROM {versions} WHERE app_name = %s", [app_name]),
            (
                f"SELECT text FROM {memories} WHERE app_name = %s AND scope = %s"
                " AND status = %s AND (expires_at IS NULL OR expires_at > %s)"
                f" ORDER BY importance DESC, updated_at DESC, id LIMIT {APP_GUIDANCE_LIMIT}",
                [app_name, MemoryScope.APP.value, MemoryStatus.ACTIVE.value, timezone.now()],
            ),
        ],
        _app_guidance_assemble,
    )


def app_guidance(*, app_name: str) -> tuple[int, list[str]]:
    """The app's guidance for its agent, with the app's index version it was read at: the text
    of its active, unexpired shared (app-scope) memories, which staff and the app's service
    accounts write (the whitepaper's procedural memory). Most important first, newest first
    among equals; at most ``APP_GUIDANCE_LIMIT`` of them and ``APP_GUIDANCE_MAX_CHARS``
    together, so the system instruction stays bounded however many an app holds."""
    return store_read_run(app_guidance_read(app_name=app_name))


def memory_settings_get(*, user_pk: int) -> MemorySettings:
    """The user's choices; a user who never chose has both on (no row is created)."""
    found = MemorySettings.objects.filter(user_id=user_pk).first()
    return found or MemorySettings(user_id=user_pk)


def user_memories(
    *, app_name: str, user_pk: int, memory_ids: list[str] | None = None
) -> QuerySet[Memory]:
    """The user's own memories of the app (user and session scope, every status but retired:
    a retired record of what was said is not a memory), by topic and newest first, each with
    the file it keeps, its sources (events in conversation order, with the file each was drawn
    from) and its revisions, for the user's Memory page and API. ``memory_ids`` narrows them
    to those ids."""
    rows = Memory.objects.filter(app_name=app_name, user_id=user_pk).exclude(
        status=MemoryStatus.RETIRED
    )
    if memory_ids is not None:
        rows = rows.filter(pk__in=memory_ids)
    sources = MemorySource.objects.select_related("event__session", "artifact").order_by(
        "event__session_id", "event__sequence"
    )
    revisions = MemoryRevision.objects.select_related("source_event__session").order_by(
        "created_at", "id"
    )
    rows = rows.select_related("image")
    return rows.order_by("topic", "-updated_at", "id").prefetch_related(
        Prefetch("sources", queryset=sources), Prefetch("revisions", queryset=revisions)
    )


# Stems as short as this and shorter must be equal to match: "car" is no root of "cardigan".
_SHORTEST_SHARED_ROOT = 5


def _shares_a_root(query_roots: set[str], text: str) -> bool:
    """Whether ``text`` holds a word whose stem is one of ``query_roots``, or begins one of
    them, or begins with one (the stemmer leaves "allergi" and "allerg")."""
    for word in set(tokenize(text)):
        for root in query_roots:
            if word == root:
                return True
            shorter, longer = sorted((word, root), key=len)
            if len(shorter) >= _SHORTEST_SHARED_ROOT and longer.startswith(shorter):
                return True
    return False


def user_memories_matching(*, app_name: str, user_pk: int, query: str, limit: int) -> list[Memory]:
    """The best matches of ``query`` among the user's active memories, best first, as
    :func:`user_memories` gives them (sources and revisions), each with its ``score``.

    The same retrieval as the assistant's (:func:`memory_search`), so what the user finds is
    what a reply could use; app-wide memories, not the user's, are left out. A memory that
    holds one of the query's words (or a word of the same root: "allergy", "allergic") comes
    before one found only by meaning, recency or importance, which a person searching for a
    word does not expect to see first."""
    found = memory_search(app_name=app_name, user_pk=user_pk, query=query, limit=limit)
    query_roots = set(tokenize(query))
    found.sort(key=lambda result: not _shares_a_root(query_roots, result.text))
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
