"""Graceful shutdown of a web process under daphne (rolling deploys: docs/deploy.md).

daphne runs Twisted's reactor, which on SIGTERM stops: it cancels every
connection's application and exits, which would cut every chat turn under way
short without storing anything. A "before shutdown" trigger returning a
Deferred holds the reactor until it fires, so the trigger installed here
drains the chat turns first (``core.shutdown.drain``): no new turns, running
ones get ``TURN_SHUTDOWN_GRACE_SECONDS`` to finish, the rest are stored as
interrupted (``server_stopped``), and the chat sockets are closed with 4012
("server restarting") so their clients reconnect to another process.
"""

from __future__ import annotations

import asyncio
import sys

from django.conf import settings

from agents_app.chat.consumers import chat_sockets_restart
from agents_app.runtime.turns import CANCEL_SHUTDOWN
from core.shutdown import after_drain, drain


def graceful_shutdown_install() -> bool:
    """Drain the chat turns before the server stops, when this process runs under daphne
    (a Twisted reactor is installed); False elsewhere (tests, management commands)."""
    if "twisted.internet.reactor" not in sys.modules:
        return False
    from twisted.internet import defer, reactor

    after_drain(chat_sockets_restart)

    def before_shutdown() -> defer.Deferred:
        return defer.Deferred.fromFuture(
            asyncio.ensure_future(
                drain(
                    grace_seconds=settings.TURN_SHUTDOWN_GRACE_SECONDS,
                    cancel_message=CANCEL_SHUTDOWN,
                )
            )
        )

    reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)
    return True
