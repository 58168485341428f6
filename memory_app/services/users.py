"""Per-user pieces every memory write shares: the user's lock, their settings, the search cache
version and the notices sent to their open chat pages."""

from __future__ import annotations

import contextlib
import logging
import secrets
from collections.abc import Iterator
from contextvars import ContextVar

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.db import transaction

from core.notices import user_notice_send
from memory_app.consolidation import (
    ConsolidationReport,
)
from memory_app.models import (
    AppIndexVersion,
    Memory,
    MemorySettings,
)
from memory_app.wording import memories_said_to_user, sentence

logger = logging.getLogger(__name__)


NOTICE_TEXT_CHARS = 200
# (app name, user pk) -> settings_create, of the invalidations a merged block holds back.
_merged_invalidations: ContextVar[dict[tuple[str, int | None], bool] | None] = ContextVar(
    "merged_index_invalidations", default=None
)


# --- Cache invalidation -------------------------------------------------------------------


def memory_index_invalidate(
    *, app_name: str, user_pk: int | None, settings_create: bool = True
) -> None:
    """Tell every process that this user's memories (or, for None, the app's shared ones)
    changed.

    Replaces the version in the database, in the caller's transaction: the change and the new
    version commit together or not at all, whatever state the cache is in. Processes compare
    what they keep with the committed version (the app's guidance, ``app_guidance``), and a
    user's version that is not 0 says they have had a memory (a turn's preload searches only
    then). The version is random rather than counted, so what was read inside a transaction
    that was then rolled back can never match a later write's version.
    A user with no settings row gets one (its version says they have had a memory), unless
    ``settings_create`` is False: a memory deleted as its user is being deleted.
    """
    merged = _merged_invalidations.get()
    if merged is not None:
        merged[(app_name, user_pk)] = merged.get((app_name, user_pk), False) or settings_create
        return
    version = secrets.randbits(63) or 1  # 0 says the user never had a memory
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


@contextlib.contextmanager
def memory_index_invalidations_merged() -> Iterator[None]:
    """Within the block, each (app, user) index is invalidated once, as the block ends, however
    many of its memories the block writes or deletes: deleting a user's 10,000 memories
    replaces their version once, not once per memory (each memory's ``post_delete`` asks for
    it). Wrap it in the caller's transaction, as each invalidation is; a block that raises
    invalidates nothing, its writes being rolled back. Nested blocks leave it to the outer one.
    """
    if _merged_invalidations.get() is not None:
        yield
        return
    merged: dict[tuple[str, int | None], bool] = {}
    token = _merged_invalidations.set(merged)
    try:
        yield
    finally:
        _merged_invalidations.reset(token)
    for (app_name, user_pk), settings_create in merged.items():
        memory_index_invalidate(app_name=app_name, user_pk=user_pk, settings_create=settings_create)


# --- Settings -------------------------------------------------------------------------------


def memory_settings_update(
    *,
    user_pk: int,
    create_enabled: bool | None = None,
    use_enabled: bool | None = None,
    past_chats_enabled: bool | None = None,
) -> MemorySettings:
    """Record the user's choices; a job already queued checks ``create_enabled`` again when it
    runs, so turning creation off stops pending work too. The next turn reads the choices
    afresh (``past_chats_enabled``: whether replies search the user's past chats), and the
    user's open chat pages get a notice."""
    with transaction.atomic():
        row, _ = MemorySettings.objects.select_for_update().get_or_create(user_id=user_pk)
        if create_enabled is not None:
            row.create_enabled = create_enabled
        if use_enabled is not None:
            row.use_enabled = use_enabled
        if past_chats_enabled is not None:
            row.past_chats_enabled = past_chats_enabled
        row.save(
            update_fields=["create_enabled", "use_enabled", "past_chats_enabled", "updated_at"]
        )
    memory_change_notice_send(
        user_pk=user_pk,
        notice={
            "kind": "memory_settings",
            "message": _settings_notice_text(
                create_enabled=row.create_enabled, use_enabled=row.use_enabled
            ),
            "create_enabled": row.create_enabled,
            "use_enabled": row.use_enabled,
            "past_chats_enabled": row.past_chats_enabled,
        },
    )
    return row


def _settings_notice_text(*, create_enabled: bool, use_enabled: bool) -> str:
    creating = f"{'new' if create_enabled else 'no new'} memories will be made from your chats"
    using = f"replies {'will' if use_enabled else 'will not'} use what is remembered"
    joint = "and" if create_enabled == use_enabled else "but"
    return f"Memory settings changed: {creating}, {joint} {using}."


def user_lock(user_pk: int) -> MemorySettings:
    """Take the user's memory lock for the rest of the transaction and return their settings.

    On PostgreSQL a ``SELECT ... FOR UPDATE`` of the user's settings row (created if missing);
    on SQLite every write transaction already holds the database's write lock.
    """
    MemorySettings.objects.get_or_create(user_id=user_pk)
    return MemorySettings.objects.select_for_update().get(user_id=user_pk)


# --- Notices ----------------------------------------------------------------------------------


def _notice_text(lead: str, memories: list[Memory]) -> str:
    """ "Remembered: your name is Dana, and you live in Lisbon." (cut short if long)."""
    text = sentence(lead + memories_said_to_user([memory.text for memory in memories]))
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
    for lead, touched in (("Remembered: ", report.created), ("Updated: ", report.updated)):
        memories = list({memory.pk: memory for memory in touched}.values())
        if memories:
            notice = {
                "kind": "memory",
                "message": _notice_text(lead, memories),
                "memory_ids": [str(memory.id) for memory in memories],
            }
            async_to_sync(user_notice_send)(user_pk=user_pk, notice=notice)
