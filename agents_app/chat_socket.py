"""The chat WebSocket's life, whatever its frames ask: who may open it, its channel-layer
messages (the user's notices) kept flowing through a Redis outage, frames read and dispatched
to the handler ``FRAME_HANDLERS`` names, and the close of every socket at a graceful shutdown.

The frames of the chat itself (a message, Retry, edit, regenerate, cancel) are handled by
``consumers.ChatConsumer``, the socket's class, which builds on this one.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any, ClassVar

from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agents_app.chat_protocol import (
    CLOSE_NOT_FOUND,
    CLOSE_NOT_SIGNED_IN,
    CLOSE_SERVER_RESTART,
    SHUTTING_DOWN,
    error_frame,
    frame_decode,
    max_frame_chars,
    notice_frame,
    pong_frame,
)
from agents_app.chat_turn_driver import ChatTurnDriver
from agents_app.runtime.agents import AgentConfig, agent_from_app, agent_from_settings
from agents_app.runtime.models import model_for_agent
from agents_app.runtime.runner import Runner
from agents_app.selectors import app_for_user_read
from agents_app.turn_claims import holder_name
from core.notices import user_group_name
from core.outages import (
    CLOSE_DATABASE_UNAVAILABLE,
    DATABASE_UNAVAILABLE_CODE,
    DATABASE_UNAVAILABLE_ERRORS,
    REDIS_ERRORS,
    SOCKET_REFUSED,
)
from core.shutdown import draining
from sessions_app import selectors
from sessions_app.services import IDENTIFIER_PATTERN

logger = logging.getLogger(__name__)

CHANNEL_LAYER_RETRY_FIRST_SECONDS = 0.5
CHANNEL_LAYER_RETRY_MAX_SECONDS = 5.0
# The sockets of this process that are open, for a graceful shutdown to close.
_open_sockets: weakref.WeakSet[ChatSocket] = weakref.WeakSet()
# How long a shutdown waits for the close frames it sent to leave.
CLOSE_FLUSH_SECONDS = 0.5


async def app_agent_get(*, app_name: str, user: Any) -> tuple[AgentConfig, bool]:
    """The app's agent as configured now, so a change in the console applies from the next
    turn, and whether the user may use the app (an app with no record: its agent of the
    settings, usable). One statement, from the event loop on PostgreSQL: a socket opening or
    a turn starting does not queue behind the database thread."""
    found = await selectors.store_read_async(app_for_user_read(app_name=app_name, user=user))
    if found is None:
        return agent_from_settings(app_name), True
    app, usable = found
    return agent_from_app(app), usable


async def _owned_session_app(*, user_pk: int, session_id: str) -> str | None:
    """The app of the user's session with this id; None for anyone else's, an unknown or a
    malformed id. Read from the event loop on PostgreSQL: a burst of sockets connecting does
    not queue its handshakes behind the database thread."""
    if not IDENTIFIER_PATTERN.fullmatch(session_id):
        return None
    return await selectors.store_read_async(
        selectors.session_app_name_read(user_pk=user_pk, session_id=session_id)
    )


async def chat_sockets_restart() -> None:
    """Close every open chat socket of this process with "server restarting" (4012), once its
    turn has ended: for the end of a graceful shutdown, so clients reconnect elsewhere and
    re-send what they are still waiting for."""
    closed = 0
    for consumer in list(_open_sockets):
        if not consumer.closing:
            consumer.closing = True
            await consumer.close(code=CLOSE_SERVER_RESTART)
            closed += 1
    if closed:
        # The reactor drops every connection as soon as the shutdown goes on: give the close
        # frames a moment to leave first, so clients see why.
        await asyncio.sleep(CLOSE_FLUSH_SECONDS)


class ChatSocket(AsyncJsonWebsocketConsumer):
    """A chat socket on one session of its signed-in owner, whose frames go to the methods
    ``FRAME_HANDLERS`` names (a subclass's)."""

    user: Any = None
    session_id: str = ""
    app_name: str = ""
    runner: Runner | None = None
    turns: ChatTurnDriver | None = None
    turn_task: asyncio.Task | None = None
    closing: bool = False
    notice_group: str = ""
    notice_group_joined: bool = False
    _layer_receive: Any = None
    # The frames a client may send and the method each runs (set by the subclass).
    FRAME_HANDLERS: ClassVar[dict[str, str]] = {}

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
        if draining():
            # Accepted only to say why: the client reconnects, through the load balancer,
            # to a process that is not going away.
            await self.accept()
            await self._error("server_shutting_down", SHUTTING_DOWN)
            await self.close(code=CLOSE_SERVER_RESTART)
            return
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        try:
            app_name = await _owned_session_app(user_pk=user.pk, session_id=session_id)
            if app_name is not None:
                agent, _ = await app_agent_get(app_name=app_name, user=user)
        except DATABASE_UNAVAILABLE_ERRORS as error:
            # Accepted only to say why: a socket closed before the handshake completes
            # reaches the client as a bare HTTP 403, with neither code nor reason.
            logger.error("chat socket refused, database unavailable: %s", error)
            await self.accept()
            await self._error(DATABASE_UNAVAILABLE_CODE, SOCKET_REFUSED)
            await self.close(code=CLOSE_DATABASE_UNAVAILABLE)
            return
        if app_name is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.user = user
        self.session_id = session_id
        self.app_name = app_name
        self.runner = Runner(agent=agent, model=model_for_agent(agent))
        self.turns = ChatTurnDriver(
            runner=self.runner,
            user_pk=user.pk,
            session_id=session_id,
            holder=holder_name(self.channel_name),
            error=self._error,
            closing=lambda: self.closing,
        )
        self.notice_group = user_group_name(user.pk)
        await self._notice_group_join()
        await self.accept()
        await self._memory_presence("session_opened")
        _open_sockets.add(self)

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
        if self.user is not None:
            await self._memory_presence("session_left")

    async def _memory_presence(self, hook: str) -> None:
        """Tell long-term memory the user opened or left this chat (``session_opened`` or
        ``session_left``): leaving a chat is when its turns become memories. A database
        outage costs only that trigger (the idle trigger remains), never the socket."""
        try:
            await getattr(self.runner.memory, hook)(
                user_id=str(self.user.pk), session_id=self.session_id
            )
        except DATABASE_UNAVAILABLE_ERRORS as error:
            logger.warning("memory %s not recorded for %s: %s", hook, self.session_id, error)

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
                f"The message is too long: its frame has {len(text_data)} characters; "
                f"at most {limit} are read.",
            )
            return
        try:
            content = await self.decode_json(text_data)
        except (ValueError, RecursionError):
            await self._error("invalid_json", "The frame is not valid JSON.")
            return
        await self.receive_json(content)

    async def websocket_receive_too_large(self, message: dict[str, Any]) -> None:
        """A message longer than the server keeps (chatapp.webserver) was read and dropped:
        refused like any oversized frame, and the socket stays open."""
        await self._error(
            "frame_too_large",
            f"The message is too long: its frame has {message['bytes_received']} bytes; "
            f"at most {max_frame_chars()} characters are read.",
        )

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            await self._error("invalid_frame", "A frame must be a JSON object with a type.")
            return
        frame_type = content.get("type")
        if not isinstance(frame_type, str):
            await self._error("invalid_frame", "A frame needs a type string.")
            return
        handler = self.FRAME_HANDLERS.get(frame_type)
        if handler is None:
            await self._error("unknown_type", f"Unknown frame type {frame_type[:64]!r}.")
            return
        await getattr(self, handler)(content)

    async def _ping_frame(self, content: dict[str, Any]) -> None:
        await self.send_json(pong_frame())

    async def notice(self, message: dict[str, Any]) -> None:
        """Forward a notice sent to the user's group, only if it names this socket's user."""
        if self.user is None or message.get("user_id") != self.user.pk:
            return
        await self.send_json(notice_frame(notice=message.get("notice")))

    async def _error(self, code: str, message: str) -> None:
        await self.send_json(error_frame(code=code, message=message))
