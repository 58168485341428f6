"""Writes across the apps for a user's data rights: deleting everything kept about a user.

One home for it, so that what "all my data" means is written down once: every app's rows that
hold the user's content are listed here, and a test walks every model to prove none is missed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.db.models import CharField, Exists, OuterRef
from django.db.models.functions import Cast

from access_app.services import access_data_delete
from access_app.signin import signin_records_delete
from agents_app.models import EndUser, ServiceRequest
from memory_app.models import GenerationJob, Memory, MemoryRevision, MemoryScope, MemorySource
from memory_app.services import (
    memory_change_notice_send,
    memory_index_invalidate,
    memory_index_invalidations_merged,
    user_lock,
)
from sessions_app.models import ArtifactRecord, EventRecord, SessionRecord, UserState

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DataDeletionReport:
    """What went: counts of the user's rows, and whether the account went too."""

    sessions: int
    memories: int
    shared_memories: int
    account_deleted: bool


def _shared_memories_release(*, user_pk: int) -> int:
    """App-scope memories (shared by every user of an app) that were drawn from the user's
    conversations: deleted when the user's turns were their only sources, otherwise kept with
    the user's sources unlinked and a revision that says so without naming the user or their
    sessions. Returns how many were deleted."""
    theirs = MemorySource.objects.filter(event__session__user_id=user_pk)
    others = MemorySource.objects.filter(memory_id=OuterRef("pk")).exclude(
        event__session__user_id=user_pk
    )
    shared = (
        Memory.objects.filter(scope=MemoryScope.APP, pk__in=theirs.values("memory_id"))
        .annotate(kept=Exists(others))
        .values_list("pk", "kept")
    )
    kept = [pk for pk, keeps in shared if keeps]
    gone = [pk for pk, keeps in shared if not keeps]
    MemoryRevision.objects.bulk_create(
        MemoryRevision(
            memory_id=pk,
            action=MemoryRevision.Action.SOURCES_CHANGED,
            reason="A user deleted their data; their conversations no longer support this memory.",
        )
        for pk in kept
    )
    theirs.filter(memory_id__in=kept).delete()
    return Memory.objects.filter(pk__in=gone).delete()[1].get(Memory._meta.label, 0)


def _admin_log_release(*, user_pk: int, memory_ids: list[str], delete_account: bool) -> None:
    """Admin log entries about the user's rows (their ``object_repr`` quotes a memory's text or
    a chat's title). Entries of staff actions by the user are theirs only with the account."""
    about = {
        Memory: memory_ids,
        SessionRecord: SessionRecord.objects.filter(user_id=user_pk).values("pk"),
        EventRecord: EventRecord.objects.filter(session__user_id=user_pk)
        .annotate(text_pk=Cast("pk", CharField()))
        .values("text_pk"),
    }
    if delete_account:
        about[get_user_model()] = [str(user_pk)]
    for model, ids in about.items():
        LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(model), object_id__in=ids
        ).delete()


def user_data_delete(*, user, delete_account: bool) -> DataDeletionReport:
    """Delete everything kept about ``user``: sessions with their events and state, ``user:``
    state, attached files (rows now, files from storage once the deletion commits), memories
    with sources, revisions and embeddings, generation jobs, access grants they gave or hold,
    the audit log of staff access to their data, admin log entries about those rows, and
    shared memories that only their conversations supported; with the account, the failed
    sign-ins kept under its name; for an app's end user, the service API's requests
    made for them and their link to the app.

    The audit log goes too: it is the user's record of staff access to data that no longer
    exists, and its entries name that data (ids, staff reasons). Entries of what the user, as
    staff, did to other users' data stay in those users' logs under their username. With
    ``delete_account`` the account goes too (with their memory settings); without it the
    account and its memory settings stay, so an opt-out survives a clean slate. Sign-ins on
    other devices stop working with a deleted account (Django finds no user for them); their
    session rows hold only that signed id and expire on their own.

    One transaction that first takes the user's memory lock, the one lock every memory job
    takes before it writes, so a job mid-run either finished before (and its memories go
    here) or finds its job and session gone and writes nothing. The account row is not locked
    first: a job's writes take a key-share lock on it, and holding it here while waiting for
    the job's lock would deadlock (a test runs that race on PostgreSQL). Then the search
    caches: every process's index of the user is made stale, this process's dropped, and open
    chat pages are told.
    """
    user_pk = user.pk
    apps = set(Memory.objects.filter(user_id=user_pk).values_list("app_name", flat=True))
    with transaction.atomic(), memory_index_invalidations_merged():
        user_lock(user_pk)
        apps.update(
            SessionRecord.objects.filter(user_id=user_pk).values_list("app_name", flat=True)
        )
        memory_ids = [
            str(pk) for pk in Memory.objects.filter(user_id=user_pk).values_list("pk", flat=True)
        ]
        _admin_log_release(user_pk=user_pk, memory_ids=memory_ids, delete_account=delete_account)
        shared = _shared_memories_release(user_pk=user_pk)
        memories = Memory.objects.filter(user_id=user_pk).delete()[1].get(Memory._meta.label, 0)
        GenerationJob.objects.filter(user_id=user_pk).delete()
        sessions = (
            SessionRecord.objects.filter(user_id=user_pk)
            .delete()[1]
            .get(SessionRecord._meta.label, 0)
        )
        UserState.objects.filter(user_id=user_pk).delete()
        ArtifactRecord.objects.filter(user_id=user_pk).delete()
        access_data_delete(user=user)
        ServiceRequest.objects.filter(end_user_id=user_pk).delete()
        EndUser.objects.filter(user_id=user_pk).delete()
        if delete_account:
            signin_records_delete(username=user.get_username())
            get_user_model().objects.filter(pk=user_pk).delete()
    for app_name in apps:
        memory_index_invalidate(app_name=app_name, user_pk=user_pk)
        if shared:
            memory_index_invalidate(app_name=app_name, user_pk=None)
    memory_change_notice_send(
        user_pk=user_pk,
        notice={
            "kind": "data_deleted",
            "message": "All your chats and memories were deleted.",
            "account_deleted": delete_account,
        },
    )
    logger.info(
        "user %s deleted their data: %s sessions, %s memories, account %s",
        user_pk,
        sessions,
        memories,
        "deleted" if delete_account else "kept",
    )
    return DataDeletionReport(
        sessions=sessions,
        memories=memories,
        shared_memories=shared,
        account_deleted=delete_account,
    )
