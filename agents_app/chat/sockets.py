"""The chat WebSocket's life, whatever its frames ask: who may open it, its channel-layer
messages (the user's notices) kept flowing through a Redis outage, frames read and dispatched
to the handler ``FRAME_HANDLERS`` names, and the close of every socket at a graceful shutdown.

A socket lives only as long as the sign-in it was opened with: signing out, a password change
(from any browser), deactivation or deletion of the account closes it with ``4401``
(``CLOSE_NOT_SIGNED_IN``), its running turn cancelled first. The change is pushed through the
user's channel-layer group (``access_app.signin_end``), and since a channel layer may drop a
message, every frame read checks the sign-in again too (at most once a
``CHAT_SIGNIN_RECHECK_SECONDS``: one statement over the session row and the user row, the
session itself loaded and decoded only when that statement finds something changed). A frame
that starts a turn (``SIGNIN_IN_TURN_FRAMES``) has it checked in the turn's first read, the
same round trip as the app's (``turn_app_agent_get``), before the turn reads or stores anything
else; such a frame refused before that read (for its shape, a turn already running, a
shutdown) gets its error without a check, which tells nothing of the user's data.

The frames of the chat itself (a message, Retry, edit, regenerate, cancel) are handled by
``consumers.ChatConsumer``, the socket's class, which builds on this one.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from importlib import import_module
from typing import Any, ClassVar
from urllib.parse import parse_qs

from channels.auth import get_user
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from access_app.selectors import signin_state_read
from agents_app.chat.protocol import (
    CLOSE_NOT_FOUND,
    CLOSE_NOT_SIGNED_IN,
    CLOSE_SERVER_RESTART,
    SHUTTING_DOWN,
    error_frame,
    frame_decode,
    frame_problem,
    max_frame_chars,
    notice_frame,
    pong_frame,
)
from agents_app.chat.turn_claims import holder_name
from agents_app.chat.turn_driver import ChatTurnDriver
from agents_app.runtime.agents import AgentConfig, agent_from_app, agent_from_settings
from agents_app.runtime.models import model_for_agent
from agents_app.runtime.runner import Runner
from agents_app.selectors import app_for_user_read
from core.async_database import StoreRead, store_reads_joined
from core.notices import user_group_name
from core.outages import (
    CLOSE_DATABASE_UNAVAILABLE,
    DATABASE_UNAVAILABLE_CODE,
    DATABASE_UNAVAILABLE_ERRORS,
    REDIS_ERRORS,
    SOCKET_REFUSED,
)
from core.shutdown import draining
from core.sizes import size_words
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
    return _app_agent(app_name=app_name, found=found)


def _app_agent(*, app_name: str, found: Any) -> tuple[AgentConfig, bool]:
    """``app_agent_get``'s answer from what ``app_for_user_read`` found."""
    if found is None:
        return agent_from_settings(app_name), True
    app, usable = found
    return agent_from_app(app), usable


async def _owned_session(
    *, user_pk: int, session_id: str, app_name: str | None
) -> tuple[str, str] | None:
    """The (key, app) of the user's session with this id in ``app_name`` (or in the one app
    where they hold it, when none is named); None for anyone else's, an unknown or a
    malformed id. Read from the event loop on PostgreSQL: a burst of sockets connecting does
    not queue its handshakes behind the database thread."""
    if not IDENTIFIER_PATTERN.fullmatch(session_id):
        return None
    return await selectors.store_read_async(
        selectors.session_key_and_app_read(
            user_pk=user_pk, session_id=session_id, app_name=app_name
        )
    )


def _query_app_name(scope: dict[str, Any]) -> str | None:
    """The ``app_name`` the socket's URL names (``?app_name=``), if any."""
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("app_name")
    return values[0] if values else None


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
    # The session row's key, which its rows (claims, departures) point to.
    session_key: str = ""
    app_name: str = ""
    runner: Runner | None = None
    turns: ChatTurnDriver | None = None
    turn_task: asyncio.Task | None = None
    closing: bool = False
    # The client went away: what the socket's turn still sends goes nowhere.
    gone: bool = False
    notice_group: str = ""
    notice_group_joined: bool = False
    # When the sign-in was last found to hold (time.monotonic()), and the password hash the
    # user had then: the session's sign-in rests on it.
    signin_checked_at: float = 0.0
    signin_password: str = ""
    _layer_receive: Any = None
    # The frames a client may send and the method each runs (set by the subclass).
    FRAME_HANDLERS: ClassVar[dict[str, str]] = {}
    # The frames whose handler checks the sign-in itself, in its first read
    # (``turn_app_agent_get``), before it reads or stores anything else (set by the subclass).
    SIGNIN_IN_TURN_FRAMES: ClassVar[frozenset[str]] = frozenset()

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
            owned = await _owned_session(
                user_pk=user.pk, session_id=session_id, app_name=_query_app_name(self.scope)
            )
            if owned is not None:
                agent, _ = await app_agent_get(app_name=owned[1], user=user)
        except DATABASE_UNAVAILABLE_ERRORS as error:
            # Accepted only to say why: a socket closed before the handshake completes
            # reaches the client as a bare HTTP 403, with neither code nor reason.
            logger.error("chat socket refused, database unavailable: %s", error)
            await self.accept()
            await self._error(DATABASE_UNAVAILABLE_CODE, SOCKET_REFUSED)
            await self.close(code=CLOSE_DATABASE_UNAVAILABLE)
            return
        if owned is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.user = user
        self.session_id = session_id
        self.session_key, self.app_name = owned
        self.runner = Runner(agent=agent, model=model_for_agent(agent))
        self.turns = ChatTurnDriver(
            runner=self.runner,
            user_pk=user.pk,
            session_id=session_id,
            session_key=self.session_key,
            holder=holder_name(self.channel_name),
            error=self._error,
            closing=lambda: self.closing,
            channel=self.channel_name,
        )
        self.notice_group = user_group_name(user.pk)
        await self._notice_group_join()
        self.signin_checked_at = time.monotonic()
        self.signin_password = user.password
        await self.accept()
        await self._memory_presence("session_opened")
        _open_sockets.add(self)

    async def disconnect(self, code: int) -> None:
        """Leave the socket's turn to run to its end (a reloaded page, or another tab, watches
        it live: ``turn_driver``), or stop the one it watches; then leave the notice group (a
        layer outage only leaves a stale member behind, which the group's expiry removes)."""
        self.closing = True
        self.gone = True
        if self.turns is None or not self.turns.detach():
            await self._turn_stop()
        if self.notice_group_joined:
            try:
                await self.channel_layer.group_discard(self.notice_group, self.channel_name)
            except REDIS_ERRORS as error:
                logger.warning("notice group %s not left: %s", self.notice_group, error)
        if self.user is not None:
            await self._memory_presence("session_left")

    async def _turn_stop(self) -> None:
        """Cancel the running turn and wait until the runner has stored it as interrupted."""
        task = self.turn_task
        if task is not None and not task.done():
            if not task.cancelling():
                task.cancel()
            await asyncio.wait({task})

    async def signin_check(self, message: dict[str, Any]) -> None:
        """A sign-in of this socket's user ended (``core.notices.user_signin_check_send``):
        close if it was this socket's own, or if this socket's no longer holds."""
        if self.user is None or message.get("user_id") != self.user.pk:
            return
        ended = message.get("ended_session_key")
        if ended is not None:
            if ended == self.scope["session"].session_key:
                await self._signin_end()
            return
        if not await self._signin_holds():
            await self._signin_end()

    async def _signin_current(self) -> bool:
        """Whether the socket's sign-in holds, checked at most once a
        ``CHAT_SIGNIN_RECHECK_SECONDS``; a socket whose sign-in ended is closed. With the
        database unreachable the frame goes on: nothing it asks can be stored either. A socket
        that is closing, or was accepted only to say why it closes, reads no more frames."""
        if self.closing or self.user is None:
            return False
        if not self._signin_due():
            return True
        try:
            holds = await self._signin_holds()
        except DATABASE_UNAVAILABLE_ERRORS as error:
            logger.warning("sign-in of socket not checked, database unavailable: %s", error)
            return True
        if not holds:
            await self._signin_end()
        return holds

    def _signin_due(self) -> bool:
        """Whether the sign-in is to be checked again (``CHAT_SIGNIN_RECHECK_SECONDS``)."""
        return time.monotonic() - self.signin_checked_at >= settings.CHAT_SIGNIN_RECHECK_SECONDS

    def _signin_read(self) -> StoreRead:
        """What the sign-in check reads (``signin_state_read``) of the session the socket was
        opened with."""
        return signin_state_read(
            user_pk=self.user.pk, session_key=self.scope["session"].session_key
        )

    async def turn_app_agent_get(self) -> tuple[AgentConfig, bool] | None:
        """``app_agent_get`` for a turn starting, with the sign-in check of its frame
        (``SIGNIN_IN_TURN_FRAMES``) when one is due, in the same round trip; None when the
        sign-in has ended (the socket is then closed). Raises what a read raises with the
        database unreachable: the turn then starts no more than the check could pass."""
        if self.closing:
            return None
        if not self._signin_due():
            return await app_agent_get(app_name=self.app_name, user=self.user)
        found, state = await selectors.store_read_async(
            store_reads_joined(
                app_for_user_read(app_name=self.app_name, user=self.user), self._signin_read()
            )
        )
        if not await self._signin_state_holds(state):
            await self._signin_end()
            return None
        return _app_agent(app_name=self.app_name, found=found)

    async def _signin_holds(self) -> bool:
        """Whether the Django session the socket was opened with still signs its user in: not
        signed out, the password it was made with, the account active and not deleted. Read
        afresh: the scope's session is the one read when the socket opened."""
        return await self._signin_state_holds(await selectors.store_read_async(self._signin_read()))

    async def _signin_state_holds(self, state: tuple[str, bool] | None) -> bool:
        """``_signin_holds`` from the sign-in's state as ``signin_state_read`` just read it.

        A session that still exists, of an active user whose password is the one it was last
        found to hold with, holds as it did (a session never changes user without changing
        its key); anything else, the session is loaded and checked as Django does."""
        session_key = self.scope["session"].session_key
        if state is not None and state == (self.signin_password, True):
            self.signin_checked_at = time.monotonic()
            return True
        store = import_module(settings.SESSION_ENGINE).SessionStore
        user = await get_user({"session": store(session_key)})
        if user.is_authenticated and user.pk == self.user.pk:
            self.signin_checked_at = time.monotonic()
            self.signin_password = user.password
            return True
        return False

    async def _signin_end(self) -> None:
        """Close with ``4401``, the running turn cancelled (and stored as interrupted) first,
        so that nothing more runs, and no memory is read, under the ended sign-in."""
        if self.closing:
            return
        self.closing = True
        logger.info("chat socket of user %s closed: its sign-in ended", self.user.pk)
        await self._turn_stop()
        await self.close(code=CLOSE_NOT_SIGNED_IN)

    async def _memory_presence(self, hook: str) -> None:
        """Tell long-term memory the user opened or left this chat (``session_opened`` or
        ``session_left``): leaving a chat is when its turns become memories. A database
        outage costs only that trigger (the idle trigger remains), never the socket."""
        try:
            await getattr(self.runner.memory, hook)(
                app_name=self.app_name, user_id=str(self.user.pk), session_id=self.session_id
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
        needs comes near the limit, so parsing megabytes would only spend the server's time.
        Every frame first checks the socket's sign-in still holds (``_signin_current``), but
        one that starts a turn, whose handler checks it in the turn's first read
        (``SIGNIN_IN_TURN_FRAMES``); nothing is sent before the check."""
        if self.closing or self.user is None:
            return
        content, problem = await self._frame_read(text_data)
        in_turn = isinstance(content, dict) and content.get("type") in self.SIGNIN_IN_TURN_FRAMES
        if not in_turn and not await self._signin_current():
            return
        if problem is not None:
            await self._error(*problem)
            return
        await self.receive_json(content)

    async def _frame_read(self, text_data: str | None) -> tuple[Any, tuple[str, str] | None]:
        """The frame decoded, or why it cannot be: (content, None) or (None, (code, message))."""
        if text_data is None:
            return None, ("invalid_frame", "Frames must be text: a JSON object with a type.")
        limit = max_frame_chars()
        if len(text_data) > limit:
            return None, (
                "frame_too_large",
                f"The message is too long: its frame has {len(text_data)} characters; "
                f"at most {limit} are read.",
            )
        try:
            return await self.decode_json(text_data), None
        except (ValueError, RecursionError):
            return None, ("invalid_json", "The frame is not valid JSON.")

    async def websocket_receive_too_large(self, message: dict[str, Any]) -> None:
        """A message longer than the server keeps (chatapp.webserver) was read and dropped:
        refused like any oversized frame, and the socket stays open."""
        await self._error(
            "frame_too_large",
            f"The message is too long: its frame is {size_words(message['bytes_received'])}; "
            f"at most {max_frame_chars():,} characters are read.",
        )

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            await self._error("invalid_frame", "A frame must be a JSON object with a type.")
            return
        problem = frame_problem(content)
        if problem:
            await self._error(*problem)
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
        await self.frame_send(pong_frame())

    async def notice(self, message: dict[str, Any]) -> None:
        """Forward a notice sent to the user's group, only if it names this socket's user."""
        if self.user is None or message.get("user_id") != self.user.pk:
            return
        await self.send_json(notice_frame(notice=message.get("notice")))

    async def frame_send(self, frame: dict[str, Any]) -> None:
        """Send a frame, unless the client has gone: a turn outlives its socket, and a socket
        may close before the server hears of it, so a send that finds it closed marks it gone
        (each server says so with an error of its own) instead of failing the turn."""
        if self.gone:
            return
        text = await self.encode_json(frame)
        try:
            await self.send(text_data=text)
        except Exception as error:
            self.gone = True
            logger.info("chat socket of %s closed while sending: %r", self.session_id, error)

    async def _error(self, code: str, message: str) -> None:
        await self.frame_send(error_frame(code=code, message=message))
