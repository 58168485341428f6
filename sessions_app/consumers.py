"""The chat WebSocket; the protocol is docs/websocket-protocol.md.

One socket per open session of the signed-in owner. The consumer checks
frames and moves events; the turn itself is the runtime's ``Runner``, run in a
task of its own so the socket keeps reading while a reply streams (a
``cancel`` or a ``ping`` is answered mid-turn). Stored events go out exactly
as the REST API shows them. Bad frames get an ``error`` frame and the socket
stays usable. The frames themselves (reading, checking, their shapes) live in
``chat_protocol``; the sending of one turn's events, in ``chat_turns``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from google.genai import types

from chatapp.metrics import turn_observe, turn_outcome
from chatapp.outages import (
    CLOSE_DATABASE_UNAVAILABLE,
    DATABASE_UNAVAILABLE_CODE,
    DATABASE_UNAVAILABLE_ERRORS,
    REDIS_ERRORS,
    SOCKET_REFUSED,
)
from sessions_app import selectors
from sessions_app.chat_protocol import (
    CLOSE_NOT_FOUND,
    CLOSE_NOT_SIGNED_IN,
    MESSAGE_NOT_STORED,
    REPLY_NOT_STORED,
    error_frame,
    frame_decode,
    max_frame_chars,
    notice_frame,
    pong_frame,
    user_message_problem,
)
from sessions_app.chat_turns import ChatTurn, runner_events_cancel
from sessions_app.errors import SessionNotFoundError
from sessions_app.models import SessionRecord
from sessions_app.notices import user_group_name
from sessions_app.rate_limits import chat_turn_rate_limit_exceeded
from sessions_app.runtime.agents import agent_for_app
from sessions_app.runtime.models import model_for_agent
from sessions_app.runtime.runner import DuplicateTurnError, Runner, user_event_id_for
from sessions_app.services import IDENTIFIER_PATTERN

logger = logging.getLogger(__name__)

CHANNEL_LAYER_RETRY_FIRST_SECONDS = 0.5
CHANNEL_LAYER_RETRY_MAX_SECONDS = 5.0


@database_sync_to_async
def _owned_session(*, user_pk: int, session_id: str) -> SessionRecord | None:
    """The user's session with this id; None for anyone else's, an unknown or a malformed id."""
    if not IDENTIFIER_PATTERN.fullmatch(session_id):
        return None
    return selectors.session_record_get(user_pk=user_pk, session_id=session_id)


class ChatConsumer(AsyncJsonWebsocketConsumer):
    """``ws/chat/<session_id>/``: chat in one session of the signed-in user."""

    user: Any = None
    session_id: str = ""
    runner: Runner | None = None
    turn_task: asyncio.Task | None = None
    closing: bool = False
    notice_group: str = ""
    notice_group_joined: bool = False
    _layer_receive: Any = None

    @property
    def channel_receive(self) -> Any:
        """What Channels reads the socket's channel-layer messages with: the layer's own
        receive (set by Channels through the setter), wrapped to outlast a layer outage."""
        return self._channel_receive_resilient

    @channel_receive.setter
    def channel_receive(self, receive: Any) -> None:
        self._layer_receive = receive

    async def _channel_receive_resilient(self) -> dict[str, Any]:
        """The channel layer's next message for this socket, waiting out a layer outage.

        Channels ends the whole consumer when its channel-layer receive raises, which
        would drop every open socket of the process whenever Redis goes away, though the
        chat needs only the database. Instead the error is logged and the receive tried
        again with backoff; the notice group is joined again first, as a restarted Redis
        has forgotten its groups.
        """
        delay = CHANNEL_LAYER_RETRY_FIRST_SECONDS
        while True:
            if self.notice_group and not self.notice_group_joined:
                await self._notice_group_join()
            try:
                return await self._layer_receive()
            except REDIS_ERRORS as error:
                logger.warning("channel layer receive failed, retrying in %s s: %s", delay, error)
                self.notice_group_joined = False
            await asyncio.sleep(delay)
            delay = min(2 * delay, CHANNEL_LAYER_RETRY_MAX_SECONDS)

    async def _notice_group_join(self) -> None:
        """Join the user's notice group; with the channel layer unreachable the socket goes
        on without notices (logged) and joins once the layer answers again."""
        try:
            await self.channel_layer.group_add(self.notice_group, self.channel_name)
        except REDIS_ERRORS as error:
            logger.warning("notice group %s not joined: %s", self.notice_group, error)
            self.notice_group_joined = False
        else:
            self.notice_group_joined = True

    async def connect(self) -> None:
        """Accept only the session's signed-in owner, and join the user's notice group.

        Anyone else is closed before the handshake completes, with the same
        code for another user's session as for one that does not exist.
        """
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_NOT_SIGNED_IN)
            return
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        try:
            record = await _owned_session(user_pk=user.pk, session_id=session_id)
        except DATABASE_UNAVAILABLE_ERRORS as error:
            # Accepted only to say why: a socket closed before the handshake completes
            # reaches the client as a bare HTTP 403, with neither code nor reason.
            logger.error("chat socket refused, database unavailable: %s", error)
            await self.accept()
            await self._error(DATABASE_UNAVAILABLE_CODE, SOCKET_REFUSED)
            await self.close(code=CLOSE_DATABASE_UNAVAILABLE)
            return
        if record is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.user = user
        self.session_id = session_id
        agent = agent_for_app(record.app_name)
        self.runner = Runner(agent=agent, model=model_for_agent(agent))
        self.notice_group = user_group_name(user.pk)
        await self._notice_group_join()
        await self.accept()

    async def disconnect(self, code: int) -> None:
        """Cancel the running turn and wait until the runner has stored it as interrupted,
        then leave the notice group (a layer outage only leaves a stale member behind,
        which the group's expiry removes)."""
        self.closing = True
        task = self.turn_task
        if task is not None and not task.done():
            if not task.cancelling():
                task.cancel()
            await asyncio.wait({task})
        if self.notice_group_joined:
            try:
                await self.channel_layer.group_discard(self.notice_group, self.channel_name)
            except REDIS_ERRORS as error:
                logger.warning("notice group %s not left: %s", self.notice_group, error)

    @classmethod
    async def decode_json(cls, text_data: str) -> Any:
        """Strict JSON: NaN and Infinity are refused like any other invalid JSON."""
        return frame_decode(text_data)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        """Decode a frame; binary, oversized or invalid JSON gets an error frame instead of a
        crash. An oversized frame is refused before it is parsed: no frame the protocol
        needs comes near the limit, so parsing megabytes would only spend the server's time."""
        if text_data is None:
            await self._error("invalid_frame", "Frames must be text: a JSON object with a type.")
            return
        limit = max_frame_chars()
        if len(text_data) > limit:
            await self._error(
                "frame_too_large",
                f"The frame has {len(text_data)} characters; at most {limit} are accepted.",
            )
            return
        try:
            content = await self.decode_json(text_data)
        except (ValueError, RecursionError):
            await self._error("invalid_json", "The frame is not valid JSON.")
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            await self._error("invalid_frame", "A frame must be a JSON object with a type.")
            return
        frame_type = content.get("type")
        if not isinstance(frame_type, str):
            await self._error("invalid_frame", "A frame needs a type string.")
            return
        if frame_type == "user_message":
            await self._user_message(content)
        elif frame_type == "cancel":
            self._cancel()
        elif frame_type == "ping":
            await self.send_json(pong_frame())
        else:
            await self._error("unknown_type", f"Unknown frame type {frame_type[:64]!r}.")

    async def notice(self, message: dict[str, Any]) -> None:
        """Forward a notice sent to the user's group, only if it names this socket's user."""
        if self.user is None or message.get("user_id") != self.user.pk:
            return
        await self.send_json(notice_frame(notice=message.get("notice")))

    async def _user_message(self, content: dict[str, Any]) -> None:
        text = content.get("text")
        client_message_id = content.get("client_message_id")
        problem = user_message_problem(text=text, client_message_id=client_message_id)
        if problem:
            await self._error(*problem)
            return
        if self.turn_task is not None and not self.turn_task.done():
            await self._error(
                "turn_in_progress", "A turn is running; wait for turn_complete or cancel it."
            )
            return
        try:
            if await self._turn_new(client_message_id=client_message_id).replay_if_stored():
                return
        except DATABASE_UNAVAILABLE_ERRORS as error:
            logger.error("chat turn not started, database unavailable: %s", error)
            await self._error(DATABASE_UNAVAILABLE_CODE, MESSAGE_NOT_STORED)
            await self._turn_new(client_message_id=client_message_id).complete_send(duplicate=False)
            return
        # Not thread-sensitive: a cache call need not queue behind the ORM work of
        # every running turn on the one database thread.
        if await sync_to_async(chat_turn_rate_limit_exceeded, thread_sensitive=False)(
            user_pk=self.user.pk, limit=settings.CHAT_TURNS_PER_MINUTE
        ):
            await self._error(
                "rate_limited",
                f"At most {settings.CHAT_TURNS_PER_MINUTE} messages a minute; "
                "wait a moment and send it again.",
            )
            return
        self.turn_task = asyncio.create_task(
            self._turn_run(self._turn_new(client_message_id=client_message_id), text)
        )
        # Let the task start, so that a cancel read next always finds it inside the turn.
        await asyncio.sleep(0)

    def _turn_new(self, *, client_message_id: str) -> ChatTurn:
        """A turn of this socket's session, sending its frames on this socket."""
        return ChatTurn(
            client_message_id=client_message_id, session_id=self.session_id, send=self.send_json
        )

    def _cancel(self) -> None:
        task = self.turn_task
        if task is not None and not task.done() and not task.cancelling():
            task.cancel()

    async def _turn_run(self, turn: ChatTurn, text: str) -> None:
        """Run one turn and stream it to the client.

        Ends with ``turn_complete`` whatever happens once the turn was accepted
        (a refused duplicate replays the stored turn instead of running it),
        except when the socket itself went away.
        """
        events = self.runner.run_async(
            user_id=str(self.user.pk),
            session_id=self.session_id,
            new_message=types.Content(role="user", parts=[types.Part(text=text)]),
            client_message_id=turn.client_message_id,
        )
        database_down = False
        try:
            async for event in events:
                await turn.event_forward(event)
        except DuplicateTurnError as duplicate:
            await turn.stored_send(user_event_id=duplicate.user_event_id)
            await turn.complete_send(duplicate=True)
            return
        except SessionNotFoundError:
            await self._error("session_not_found", "This session no longer exists.")
        except DATABASE_UNAVAILABLE_ERRORS as error:
            logger.error(
                "chat turn failed in session %s, database unavailable: %s", self.session_id, error
            )
            stored = user_event_id_for(turn.client_message_id) in turn.sent_event_ids
            await self._error(
                DATABASE_UNAVAILABLE_CODE, REPLY_NOT_STORED if stored else MESSAGE_NOT_STORED
            )
            database_down = True
        except asyncio.CancelledError:
            await runner_events_cancel(events)
            if self.closing:
                raise
        except Exception:
            logger.exception("chat turn failed in session %s", self.session_id)
            await self._error("internal_error", "The turn failed on the server.")
        if turn.final is None and not database_down:
            # Cut short: send whatever of the turn got stored (the interrupted reply).
            await turn.stored_send(user_event_id=user_event_id_for(turn.client_message_id))
        turn_observe(
            outcome=turn_outcome(final_event=turn.final), seconds=time.monotonic() - turn.started
        )
        await turn.complete_send(duplicate=False)

    async def _error(self, code: str, message: str) -> None:
        await self.send_json(error_frame(code=code, message=message))
