"""A sign-in that ends ends the user's open chat sockets too.

Signing out, a password change (from any browser), deactivation (``is_active`` False) and the
deletion of the account each tell the user's open chat sockets, through the channel layer,
to check the sign-in they were opened with (``core.notices.user_signin_check_send``); a socket
whose sign-in no longer holds closes with ``4401`` (docs/websocket-protocol.md). The message
goes once the change is committed, so a socket never checks before the change is visible.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from django.db import transaction

from core.notices import user_signin_check_send

logger = logging.getLogger(__name__)


def user_signin_check_announce(*, user_pk: int, ended_session_key: str | None = None) -> None:
    """Have the user's open chat sockets check their sign-in once the current transaction
    commits (at once outside one). A failure is logged, never raised: the sign-out or the
    change itself is done, and every socket checks its sign-in on each frame anyway."""

    def send() -> None:
        try:
            async_to_sync(user_signin_check_send)(
                user_pk=user_pk, ended_session_key=ended_session_key
            )
        except Exception:
            logger.exception("sign-in check of user %s not sent", user_pk)

    transaction.on_commit(send)


def user_logged_out_receiver(sender, request, user, **kwargs) -> None:
    """``user_logged_out``: the sockets opened with this browser's sign-in close."""
    if user is not None:
        user_signin_check_announce(user_pk=user.pk, ended_session_key=request.session.session_key)


def user_saved_receiver(
    sender, instance, created=False, raw=False, update_fields=None, **kwargs
) -> None:
    """``post_save`` of a user: a new password or ``is_active`` False ends their sign-ins. A new
    account has none yet, and a sign-in's own ``last_login`` update changes neither."""
    if raw or created or (update_fields is not None and set(update_fields) == {"last_login"}):
        return
    user_signin_check_announce(user_pk=instance.pk)


def user_deleted_receiver(sender, instance, **kwargs) -> None:
    """``post_delete`` of a user: every sign-in of theirs has ended."""
    user_signin_check_announce(user_pk=instance.pk)
