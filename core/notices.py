"""Notices pushed to a user's open chat sockets, such as "a memory was saved".

Each chat socket joins its user's channel-layer group; anything in the
project (a view, a Celery task in another process) reaches all of that user's
sockets through ``user_notice_send``. The socket forwards the notice as a
``{"type": "notice", "notice": {...}}`` frame. The same group carries
``user_signin_check_send``: a sign-in of the user ended, and each socket checks its own.
"""

from __future__ import annotations

import logging
from typing import Any

from channels.layers import get_channel_layer

from core.outages import REDIS_ERRORS

logger = logging.getLogger(__name__)


def user_group_name(user_pk: int) -> str:
    """The channel-layer group of every open chat socket of the user."""
    return f"user-{user_pk}"


async def user_notice_send(*, user_pk: int, notice: dict[str, Any]) -> None:
    """Push ``notice`` (a JSON object) to the user's open chat sockets, if any.

    The message names the user again, and a socket forwards it only when that
    is its own user, so a notice sent to a wrong group still reaches no one else.
    A notice is a courtesy about a change already stored: with the channel layer
    unreachable (Redis down) it is logged and dropped, and the work that made it
    (a memory job, a memory edit) still succeeds.
    """
    try:
        await get_channel_layer().group_send(
            user_group_name(user_pk), {"type": "notice", "user_id": user_pk, "notice": notice}
        )
    except REDIS_ERRORS as error:
        logger.warning("notice to user %s not sent, channel layer unavailable: %s", user_pk, error)


# The channel-layer message type of ``user_signin_check_send`` (the socket's ``signin_check``).
SIGNIN_CHECK = "signin.check"


async def user_signin_check_send(*, user_pk: int, ended_session_key: str | None = None) -> None:
    """Have the user's open chat sockets check, at once, that the sign-in each was opened with
    still holds; ``ended_session_key`` names a Django session that just ended (a sign-out),
    whose sockets close without a check. Best effort like a notice (logged and dropped with
    the channel layer down): every frame a socket reads checks its sign-in too."""
    try:
        await get_channel_layer().group_send(
            user_group_name(user_pk),
            {"type": SIGNIN_CHECK, "user_id": user_pk, "ended_session_key": ended_session_key},
        )
    except REDIS_ERRORS as error:
        logger.warning("sign-in check of user %s not sent, channel layer down: %s", user_pk, error)
