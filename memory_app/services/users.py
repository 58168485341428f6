"""Per-user pieces every memory write shares: the user's lock, their settings, the search cache
version and the notices sent to their open chat pages."""

from __future__ import annotations

import logging
import secrets

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import transaction

from memory_app.consolidation import (
    ConsolidationReport,
)
from memory_app.models import (
    AppIndexVersion,
    Memory,
    MemorySettings,
)
from sessions_app.notices import user_notice_send

logger = logging.getLogger(__name__)


NOTICE_TEXT_CHARS = 200


# --- Cache invalidation -------------------------------------------------------------------


def memory_index_invalidate(
    *, app_name: str, user_pk: int | None, settings_create: bool = True
) -> None:
    """Make every process rebuild its search index of this user (or, for None, of the app).

    Replaces the version in the database, in the caller's transaction: the change and the new
    version commit together or not at all, whatever state the cache is in, and a search in
    any process compares its index with the committed version (see
    ``selectors.search._versions``). The version is random rather than counted, so an index built
    inside a transaction that was then rolled back can never match a later write's version.
    A user with no settings row gets one (no process keeps an index of such a user), unless
    ``settings_create`` is False: a memory deleted as its user is being deleted.
    """
    version = secrets.randbits(63)
    if user_pk is None:
        if not AppIndexVersion.objects.filter(app_name=app_name).update(version=version):
            AppIndexVersion.objects.update_or_create(
                app_name=app_name, defaults={"version": version}
            )
        return
    if MemorySettings.objects.filter(user_id=user_pk).update(index_version=version):
        return
    if settings_create and get_user_model().objects.filter(pk=user_pk).exists():
        MemorySettings.objects.update_or_create(
            user_id=user_pk, defaults={"index_version": version}
        )


# --- Settings -------------------------------------------------------------------------------


def memory_settings_update(
    *, user_pk: int, create_enabled: bool | None = None, use_enabled: bool | None = None
) -> MemorySettings:
    """Record the user's choices; a job already queued checks ``create_enabled`` again when it
    runs, so turning creation off stops pending work too. The next turn reads the choices
    afresh, and the user's open chat pages get a notice."""
    with transaction.atomic():
        row, _ = MemorySettings.objects.select_for_update().get_or_create(user_id=user_pk)
        if create_enabled is not None:
            row.create_enabled = create_enabled
        if use_enabled is not None:
            row.use_enabled = use_enabled
        row.save(update_fields=["create_enabled", "use_enabled", "updated_at"])
    memory_change_notice_send(
        user_pk=user_pk,
        notice={
            "kind": "memory_settings",
            "message": (
                f"Memory settings changed: creating memories "
                f"{'on' if row.create_enabled else 'off'}, using memories in replies "
                f"{'on' if row.use_enabled else 'off'}."
            ),
            "create_enabled": row.create_enabled,
            "use_enabled": row.use_enabled,
        },
    )
    return row


def user_lock(user_pk: int) -> MemorySettings:
    """Take the user's memory lock for the rest of the transaction and return their settings.

    On PostgreSQL a ``SELECT ... FOR UPDATE`` of the user's settings row (created if missing);
    on SQLite every write transaction already holds the database's write lock.
    """
    MemorySettings.objects.get_or_create(user_id=user_pk)
    return MemorySettings.objects.select_for_update().get(user_id=user_pk)


# --- Notices ----------------------------------------------------------------------------------


def _notice_text(prefix: str, memories: list[Memory]) -> str:
    text = prefix + "; ".join(memory.text for memory in memories)
    return text if len(text) <= NOTICE_TEXT_CHARS else text[: NOTICE_TEXT_CHARS - 1] + "…"


def memory_change_notice_send(*, user_pk: int, notice: dict) -> None:
    """Send ``notice`` to the user's open chat pages once the current transaction commits
    (at once outside one), so a page never hears of a change that was rolled back. A channel
    layer that fails is logged, never raised: the change itself already happened."""

    def send() -> None:
        try:
            async_to_sync(user_notice_send)(user_pk=user_pk, notice=notice)
        except Exception:
            logger.exception("notice %s to user %s not sent", notice.get("kind"), user_pk)

    transaction.on_commit(send)


def memory_notices_send(*, user_pk: int, report: ConsolidationReport) -> None:
    """Tell the user's open chat pages what was remembered or updated (nothing if neither).

    Called after the transaction committed, from whichever process ran the job: the channel
    layer carries it to the sockets.
    """
    for prefix, touched in (("Remembered: ", report.created), ("Updated: ", report.updated)):
        memories = list({memory.pk: memory for memory in touched}.values())
        if memories:
            notice = {
                "kind": "memory",
                "message": _notice_text(prefix, memories),
                "memory_ids": [str(memory.id) for memory in memories],
            }
            async_to_sync(user_notice_send)(user_pk=user_pk, notice=notice)
