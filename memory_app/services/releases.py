"""Memories whose sources leave the conversation: a session deleted, or turns rewound (a user
edited a message or asked for another reply).

Both follow the memories' provenance the same way: a memory whose every source is among the
events that left is deleted; one that keeps sources elsewhere loses these with a
``sources_changed`` revision saying why.

A rewind's revision runs in the background, after the rewind committed; the rewind writes
that it is due (``RewindRelease``), in its own transaction, so a revision whose task was lost
(the broker down as it was sent, a process gone before it) is run by the periodic sweep.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, prefetch_related_objects
from django.utils import timezone

from core.background import task_enqueue
from memory_app.models import (
    Memory,
    MemoryRevision,
    MemorySource,
    MemoryWatermark,
    RewindRelease,
)
from memory_app.services.rederivation import memories_rederive_request
from memory_app.services.users import memory_index_invalidate, memory_index_invalidations_merged
from sessions_app.app_policy import app_policy_get
from sessions_app.models import ArtifactRecord, SessionRecord


@dataclass(frozen=True)
class SessionReleaseReport:
    """Memories whose sources all left (deleted), and those revised because sources remain."""

    deleted: list[str]
    revised: list[str]


def _source_list(sources) -> list[dict[str, str]]:
    return [
        {"session_id": s.event.session.session_id, "event_id": s.event.event_id} for s in sources
    ]


_OUTLIVED = (
    "Its session was deleted; the app keeps memories after their sessions, so this one stays."
)


def _release(
    *,
    leaving: Q,
    affected_extra: Q | None,
    dies_anyway: Callable[[Memory], bool],
    reason: Callable[[Memory], str],
    cause: Callable[[Memory], str],
    outlives: Callable[[Memory], bool] = lambda memory: False,
) -> SessionReleaseReport:
    """Release the memories sourced from the events ``leaving`` selects (a filter on
    ``MemorySource``); ``affected_extra`` adds memories (a filter on ``Memory``) and
    ``dies_anyway`` says which go even with sources left. Those revised are to be derived
    again from the sources they keep (:mod:`.rederivation`), ``cause`` saying to the person
    what took the others away. Those ``outlives`` keeps (an app whose memories outlive their
    sessions) stay as they are, whatever sources they keep, the revision saying why."""
    affected_query = MemorySource.objects.filter(leaving).values_list("memory_id", flat=True)
    if affected_extra is not None:
        affected_query = affected_query.union(
            Memory.objects.filter(affected_extra).values_list("pk", flat=True)
        )
    affected_ids = list(affected_query)
    if not affected_ids:
        return SessionReleaseReport(deleted=[], revised=[])
    elsewhere = MemorySource.objects.filter(memory_id=OuterRef("pk")).exclude(leaving)
    affected = list(Memory.objects.filter(pk__in=affected_ids).annotate(kept=Exists(elsewhere)))
    prefetch_related_objects([m for m in affected if not dies_anyway(m)], "sources__event__session")
    kept = [m for m in affected if not dies_anyway(m) and outlives(m)]
    deleted = [m for m in affected if m not in kept and (not m.kept or dies_anyway(m))]
    revised = [m for m in affected if m not in kept and m.kept and not dies_anyway(m)]
    leaving_ids = set(
        MemorySource.objects.filter(leaving, memory__in=[m.pk for m in revised + kept]).values_list(
            "pk", flat=True
        )
    )
    MemoryRevision.objects.bulk_create(
        MemoryRevision(
            memory=memory,
            action=MemoryRevision.Action.SOURCES_CHANGED,
            before={"sources": _source_list(memory.sources.all())},
            after={
                "sources": _source_list(s for s in memory.sources.all() if s.pk not in leaving_ids)
            },
            reason=reason(memory) if memory in revised else _OUTLIVED,
        )
        for memory in revised + kept
    )
    MemorySource.objects.filter(pk__in=leaving_ids).delete()
    memories_rederive_request(causes={memory.pk: cause(memory) for memory in revised})
    with memory_index_invalidations_merged():
        Memory.objects.filter(pk__in=[m.pk for m in deleted]).delete()
        for app_name, user_pk in {(m.app_name, m.user_id) for m in affected}:
            memory_index_invalidate(app_name=app_name, user_pk=user_pk)
    return SessionReleaseReport(
        deleted=[str(m.pk) for m in deleted], revised=[str(m.pk) for m in revised]
    )


def session_memories_release(*, session_ids: Sequence[str]) -> SessionReleaseReport:
    """Before sessions' events go: delete the memories whose only sources were in them, and for
    those that keep sources elsewhere drop these sessions' sources with a ``sources_changed``
    revision saying why. Session-scope memories of the sessions go too.

    Must run in the deleting transaction, before the events are deleted: source links cascade
    with the events, and afterwards no one could tell which memories relied on them alone.
    The memories concerned are found from the sessions' events and from the sessions
    themselves, each through its index: the cost follows what the sessions hold, not how many
    memories and sources the whole deployment keeps (one query finding none, for a session
    that made no memory).
    """
    released = set(session_ids)

    def reason(memory: Memory) -> str:
        gone = sorted(
            {
                s.event.session.session_id
                for s in memory.sources.all()
                if s.event.session_id in released
            }
        )
        if len(gone) == 1:
            return f"Session {gone[0]} was deleted; its events no longer support this memory."
        return (
            f"Sessions {', '.join(gone)} were deleted; their events no longer support this memory."
        )

    lifetimes: dict[str, bool] = {}

    def outlives(memory: Memory) -> bool:
        """Every session it loses is of an app whose memories outlive their sessions."""
        apps = {
            s.event.session.app_name for s in memory.sources.all() if s.event.session_id in released
        }
        for app_name in apps - lifetimes.keys():
            policy = app_policy_get().app_settings(app_name=app_name)
            lifetimes[app_name] = policy.memories_outlive_sessions
        return bool(apps) and all(lifetimes[app_name] for app_name in apps)

    def cause(memory: Memory) -> str:
        gone = sorted(
            {s.event.session for s in memory.sources.all() if s.event.session_id in released},
            key=lambda session: session.pk,
        )
        if not gone:
            return "after a chat went"
        return _chat_gone(title=gone[0].title, expired=gone[0].last_update_time < _idle_cutoff())

    return _release(
        leaving=Q(event__session_id__in=list(released)),
        affected_extra=Q(session_id__in=list(released)),
        dies_anyway=lambda memory: memory.session_id in released,
        reason=reason,
        cause=cause,
        outlives=outlives,
    )


def _idle_cutoff() -> float:
    """The last update before which a session has expired (never, with no TTL)."""
    ttl = settings.SESSION_IDLE_TTL_SECONDS
    return time.time() - ttl if ttl > 0 else float("-inf")


def _chat_gone(*, title: str, expired: bool) -> str:
    """What took a chat's sources away, said to its person: "after you deleted the chat
    “Moving”", "after the chat “Moving” expired"."""
    named = f"the chat \u201c{title}\u201d" if title else "a chat"
    return f"after {named} expired" if expired else f"after you deleted {named}"


def artifact_memories_release(*, artifact_ids: Sequence[str]) -> SessionReleaseReport:
    """Before files of a session go (removed by the person or their app): the memories drawn
    from them lose those sources, deleted when none is left, else derived again from the
    sources they keep. Must run in the deleting transaction, as the source links name the file
    until then."""
    names = dict(ArtifactRecord.objects.filter(pk__in=artifact_ids).values_list("pk", "filename"))

    def removed(memory: Memory) -> str:
        name = next(
            (names[s.artifact_id] for s in memory.sources.all() if s.artifact_id in names), ""
        )
        return f"after you removed the file \u201c{name}\u201d" if name else "after a file went"

    return _release(
        leaving=Q(artifact_id__in=list(artifact_ids)),
        affected_extra=None,
        dies_anyway=lambda memory: False,
        reason=lambda memory: "A file it was drawn from was removed; it no longer supports it.",
        cause=removed,
    )


def session_rewound_release_request(
    *, session_id: str, restored_from_sequence: int | None = None
) -> None:
    """Record, in the rewind's transaction, that the session's rewound turns have memories to
    revise, and send the revision to a worker once the rewind commits. Should the broker not
    take it, the record stays and the periodic ``rewind_releases_sweep`` runs it later.

    ``restored_from_sequence``: the first event a rewind to a turn an earlier rewind took out
    brought back into the history. The watermark goes back before it, so memory generation
    reads those turns again, as any turn of the history (their memories may have been revised
    away meanwhile; a fact still stored is only linked again, not duplicated)."""
    from memory_app.tasks import session_rewound_memories_release as release_task

    now = timezone.now()
    with transaction.atomic():
        if restored_from_sequence is not None:
            MemoryWatermark.objects.filter(
                session_id=session_id, last_sequence__gte=restored_from_sequence
            ).update(last_sequence=restored_from_sequence - 1)
        counted = RewindRelease.objects.filter(session_id=session_id).update(
            rewinds=F("rewinds") + 1, rewound_at=now
        )
        if not counted:
            RewindRelease.objects.get_or_create(session_id=session_id, defaults={"rewound_at": now})
    task_enqueue(task=release_task, session_id=session_id)


def session_rewound_memories_release(*, session_id: str) -> SessionReleaseReport:
    """After a rewind of the session (an edited message, a regenerated reply): the memories
    generated from the turns it took out of the history are revised as for a deleted session,
    their rewound sources dropped, and those left with no source deleted; the session's
    ``RewindRelease`` goes with it, unless a rewind made meanwhile counted another.

    The rewound events stay stored (the history keeps them, marked), so this can run after
    the rewind's transaction, in the background; it covers every rewound event of the
    session, so running it again, or once for several rewinds, changes nothing more.
    """
    with transaction.atomic():
        counted = (
            RewindRelease.objects.filter(session_id=session_id)
            .values_list("rewinds", flat=True)
            .first()
        )
        report = _release(
            leaving=Q(event__session_id=session_id, event__rewound=True),
            affected_extra=None,
            dies_anyway=lambda memory: False,
            reason=lambda memory: (
                f"Turns of session {session_id} it came from were edited or regenerated; "
                "they no longer support this memory."
            ),
            cause=lambda memory: _rewound_cause(session_id),
        )
        if counted is not None:
            RewindRelease.objects.filter(session_id=session_id, rewinds=counted).delete()
        return report


def _rewound_cause(session_id: str) -> str:
    title = SessionRecord.objects.filter(pk=session_id).values_list("title", flat=True).first()
    named = f"the chat \u201c{title}\u201d" if title else "a chat"
    return f"after you edited or regenerated a message in {named}"


def rewind_releases_sweep(*, now: datetime | None = None) -> int:
    """Revise the memories of rewinds whose revision has not run within
    ``MEMORY_JOB_REDISPATCH_AFTER_SECONDS`` (its task lost: the broker was down, or its
    process went away), oldest first, at most ``MEMORY_IDLE_SCAN_BATCH_SIZE`` sessions a run;
    returns how many sessions were revised. Running it twice changes nothing more."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.MEMORY_JOB_REDISPATCH_AFTER_SECONDS)
    due = list(
        RewindRelease.objects.filter(rewound_at__lt=cutoff)
        .order_by("rewound_at")
        .values_list("session_id", flat=True)[: settings.MEMORY_IDLE_SCAN_BATCH_SIZE]
    )
    for session_id in due:
        session_rewound_memories_release(session_id=session_id)
    return len(due)
