"""The chat WebSocket; the protocol is docs/websocket-protocol.md.

One socket per open session of the signed-in owner. The consumer checks
frames and moves events; the turn itself is the runtime's ``Runner``, run in a
task of its own so the socket keeps reading while a reply streams (a
``cancel`` or a ``ping`` is answered mid-turn). Stored events go out exactly
as the REST API shows them. Bad frames get an ``error`` frame and the socket
stays usable. The socket's own life (who may open it, its notices, reading and
dispatching frames, closing at shutdown) is ``sockets``'s; this module handles
the chat's frames. The frames themselves (reading, checking, their shapes) live in
``protocol``; the sending of one turn's events, in ``turns``; running,
resuming, retrying or watching a turn under its claim, in ``turn_driver``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings

from agents_app.chat.edits import Rewrite
from agents_app.chat.protocol import (
    CLOSE_NOT_FOUND,
    CLOSE_NOT_SIGNED_IN,
    MESSAGE_NOT_STORED,
    SHUTTING_DOWN,
    client_message_id_problem,
    message_id_problem,
    user_message_problem,
)
from agents_app.chat.sockets import ChatSocket, chat_sockets_restart
from agents_app.chat.turn_claims import TurnStart
from agents_app.chat.turns import ChatTurn
from agents_app.rate_limits import chat_turn_rate_limit_exceeded
from agents_app.runtime.models import model_for_agent
from agents_app.runtime.runner import Runner
from core.outages import DATABASE_UNAVAILABLE_CODE, DATABASE_UNAVAILABLE_ERRORS
from core.shutdown import draining, work_track
from sessions_app import selectors
from sessions_app.errors import SessionNotFoundError
from sessions_app.models import ArtifactRecord

# Imported from here by the routing, the shutdown and the tests.
__all__ = ["CLOSE_NOT_FOUND", "CLOSE_NOT_SIGNED_IN", "ChatConsumer", "chat_sockets_restart"]

logger = logging.getLogger(__name__)


class ChatConsumer(ChatSocket):
    """``ws/chat/<session_id>/``: chat in one session of the signed-in user."""

    # The frames a client may send (docs/websocket-protocol.md) and the method each runs; the
    # ACL and write-effect matrices enumerate the socket's frames from here.
    FRAME_HANDLERS: ClassVar[dict[str, str]] = {
        "user_message": "_user_message",
        "retry": "_retry",
        "edit": "_edit",
        "regenerate": "_regenerate",
        "cancel": "_cancel_frame",
        "ping": "_ping_frame",
    }
    # Frames that start a turn: the sign-in is checked in the turn's first read
    # (``_turn_begin``), or before the attachments are read.
    SIGNIN_IN_TURN_FRAMES: ClassVar[frozenset[str]] = frozenset(
        {"user_message", "retry", "edit", "regenerate"}
    )

    async def _cancel_frame(self, content: dict[str, Any]) -> None:
        self._cancel()

    async def _user_message(self, content: dict[str, Any]) -> None:
        text = content.get("text")
        client_message_id = content.get("client_message_id")
        attachment_ids = content.get("attachments")
        problem = user_message_problem(
            text=text, client_message_id=client_message_id, attachments=attachment_ids
        )
        if problem:
            await self._error(*problem)
            return
        attachments: list[ArtifactRecord] = []
        if attachment_ids:
            if not await self._signin_current():
                return
            found = await database_sync_to_async(selectors.session_artifacts_get)(
                user_pk=self.user.pk, session_key=self.session_key, artifact_ids=attachment_ids
            )
            if found is None:
                await self._error(
                    "attachment_not_found",
                    "An attachment is not a file of this chat (it may have been deleted); "
                    "attach it again.",
                )
                return
            attachments = found
        await self._turn_begin(
            client_message_id=client_message_id, text=text, attachments=attachments
        )

    async def _retry(self, content: dict[str, Any]) -> None:
        client_message_id = content.get("client_message_id")
        problem = client_message_id_problem(client_message_id)
        if problem:
            await self._error(*problem)
            return
        await self._turn_begin(client_message_id=client_message_id, text=None)

    async def _edit(self, content: dict[str, Any]) -> None:
        problem = user_message_problem(
            text=content.get("text"), client_message_id=content.get("client_message_id")
        ) or message_id_problem(content.get("message_id"))
        await self._rewrite_begin(content, problem, Rewrite.EDIT, content.get("text"))

    async def _regenerate(self, content: dict[str, Any]) -> None:
        problem = client_message_id_problem(content.get("client_message_id")) or (
            message_id_problem(content.get("message_id"))
        )
        await self._rewrite_begin(content, problem, Rewrite.REGENERATE, None)

    async def _rewrite_begin(
        self, content: dict[str, Any], problem: Any, rewrite: Rewrite, text: str | None
    ) -> None:
        if problem:
            await self._error(*problem)
            return
        await self._turn_begin(
            client_message_id=content["client_message_id"],
            text=text,
            rewrite=(rewrite, content["message_id"]),
        )

    async def _turn_begin(
        self,
        *,
        client_message_id: str,
        text: str | None,
        rewrite: tuple[Rewrite, str] | None = None,
        attachments: list[ArtifactRecord] | None = None,
    ) -> None:
        """Start, resume, retry, replay or watch the turn of a client message (``text`` None
        for a Retry), as its stored events and its claim say (``turn_claims.turn_begin``).
        With ``rewrite`` (an edit or a regeneration, and the message it replaces) a new turn
        first rewinds the session (``edits``).

        The turn's state is read before the rate limit, so a re-sent message never counts as
        a new turn; a Retry that runs the model again does. The frame's sign-in check, when
        due, goes with the first read, the app's (``turn_app_agent_get``): a socket whose
        sign-in ended is closed before anything of the turn is read or stored.
        """
        if self.turn_task is not None and not self.turn_task.done():
            await self._error(
                "turn_in_progress", "A turn is running; wait for turn_complete or cancel it."
            )
            return
        if draining():
            await self._error("server_shutting_down", SHUTTING_DOWN)
            return
        turn = self._turn_new(client_message_id=client_message_id)
        turn.attachments = attachments or []
        try:
            app_agent = await self.turn_app_agent_get()
            if app_agent is None:
                return
            agent, usable = app_agent
            if not usable:
                await self._error(
                    "app_forbidden", f"You may no longer use the app {self.app_name!r}."
                )
                return
            if self.runner.agent != agent:
                self.runner = Runner(agent=agent, model=model_for_agent(agent))
                self.turns.runner = self.runner
            begin = await self.turns.begin(turn, retry=text is None and rewrite is None)
        except DATABASE_UNAVAILABLE_ERRORS as error:
            logger.error("chat turn not started, database unavailable: %s", error)
            await self._error(DATABASE_UNAVAILABLE_CODE, MESSAGE_NOT_STORED)
            await turn.complete_send(duplicate=False)
            return
        except SessionNotFoundError:
            await self._error("session_not_found", "This session no longer exists.")
            await turn.complete_send(duplicate=False)
            return
        if begin.start is TurnStart.ANSWERED:
            await turn.replay(begin.stored)
            return
        if begin.start is TurnStart.NOT_FOUND:
            await self._error("turn_not_found", "This chat has no message with that id.")
            return
        if begin.start in (TurnStart.NEW, TurnStart.RETRY) and await self._rate_limited():
            await self.turns.claim_release(begin.claim)
            return
        if rewrite is not None and begin.start is TurnStart.NEW:
            text = await self.turns.rewrite(
                turn, begin, app_name=self.app_name, rewrite=rewrite, text=text
            )
            if text is None:
                return
        self.turn_task = asyncio.create_task(self.turns.drive(turn, text, begin))
        work_track(self.turn_task)
        # Let the task start, so that a cancel read next always finds it inside the turn.
        await asyncio.sleep(0)

    async def _rate_limited(self) -> bool:
        """Whether the user started too many turns this minute (then told so)."""
        # Not thread-sensitive: a cache call need not queue behind the ORM work of
        # every running turn on the one database thread.
        if not await sync_to_async(chat_turn_rate_limit_exceeded, thread_sensitive=False)(
            user_pk=self.user.pk, limit=settings.CHAT_TURNS_PER_MINUTE
        ):
            return False
        await self._error(
            "rate_limited",
            f"At most {settings.CHAT_TURNS_PER_MINUTE} messages a minute; "
            "wait a moment and send it again.",
        )
        return True

    def _turn_new(self, *, client_message_id: str) -> ChatTurn:
        """A turn of this socket's session, sending its frames on this socket."""
        return ChatTurn(
            client_message_id=client_message_id, session_key=self.session_key, send=self.frame_send
        )

    async def turn_relay(self, message: dict[str, Any]) -> None:
        """A frame of a turn this socket watches, from the socket that runs it
        (``turn_relay``)."""
        if self.turns is not None and not self.gone:
            await self.turns.relayed(message["user_event_id"], message["frame"])

    async def turn_watch(self, message: dict[str, Any]) -> None:
        """Another socket of this user asks to watch a turn (``turn_relay.turn_watch_ask``):
        passed to the turn this socket runs, which answers if it is the one named."""
        if self.turns is not None:
            self.turns.relay_asked(message)

    async def turn_stop(self, message: dict[str, Any]) -> None:
        """Another socket of this user asks to stop a turn it watches
        (``turn_relay.turn_stop_ask``): passed on as ``turn_watch`` is."""
        if self.turns is not None:
            self.turns.relay_asked(message)

    def _cancel(self) -> None:
        task = self.turn_task
        if task is not None and not task.done() and not task.cancelling():
            task.cancel()
