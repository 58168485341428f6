"""A running turn's live frames for the sockets that watch it from elsewhere.

A turn runs on one socket of one process, and goes on running when that socket closes (a
reload, a lost connection): the reply a person waits for is not thrown away because their
page went. A socket that asks for the turn meanwhile (the reloaded page, another tab, on this
process or another) watches it (``turn_driver``), and through the channel layer it gets the
text the reply has so far, then each ``delta`` and stored ``event`` as the turn sends them,
so the reply streams on where the person is, instead of showing only at its end.

A watcher joins the turn's watch group, then asks the running side (``TurnRelay``) to be
caught up: the reply so far comes back as one ``delta`` (numbered as the last one streamed),
and from then on every frame goes to the watch group. Frames go out from one task in the order
the turn sent them, the catch-up among them, so a watcher sees no gap and no repeat; a turn
nobody watches publishes nothing, and has no such task. A watcher may also ask the turn to stop
(its ``cancel``).

The ask reaches the turn two ways, as it is sent to both: while the socket that runs the turn
is open, through the user's group, which every chat socket of the user is in for its notices
(``ChatConsumer.turn_watch``, ``turn_stop``: the socket passes it to its turn when the ask
names it); once that socket has gone, through the turn's run group, which the turn joins then
on a channel of its own. So a turn costs the channel layer nothing unless its socket goes away
while it runs or someone watches it. An ask sent while the turn moves from one way to the
other may be lost: a watcher asks again until the turn's text reaches it (``turn_driver``).

The channel layer is the only way between processes here; with it unreachable a turn runs and
stores as ever, and its watchers see it when it ends (they also read its stored events).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Callable
from typing import Any

from channels.layers import get_channel_layer

from core.notices import user_group_name
from core.outages import REDIS_ERRORS
from core.shutdown import work_track

logger = logging.getLogger(__name__)

# Frames a watcher may still need once its turn is sent; more are dropped (logged).
RELAY_QUEUE_FRAMES = 2000
# How long the end of a turn waits for its last frames to reach the channel layer.
RELAY_FLUSH_SECONDS = 2.0
LISTEN_RETRY_SECONDS = 1.0
# The message types on the channel layer: to the running turn (through the user's sockets,
# ``ChatConsumer.turn_watch`` and ``turn_stop``, or its run group), and to a watching socket
# (``ChatConsumer.turn_relay``).
WATCH = "turn.watch"
STOP = "turn.stop"
RELAYED = "turn.relay"
# To a turn's own channel once it has ended: a listener still receiving stops.
CLOSED = "turn.closed"
# The frames a watcher gets: the rest (turn_started, turn_complete...) are each socket's own.
RELAYED_FRAMES = frozenset({"delta", "event", "error"})


def _group(kind: str, *, session_key: str, user_event_id: str) -> str:
    digest = hashlib.sha256(f"{session_key}/{user_event_id}".encode()).hexdigest()[:40]
    return f"chat-turn-{kind}.{digest}"


def turn_watch_group(*, session_key: str, user_event_id: str) -> str:
    """The group of the sockets watching the turn of ``user_event_id``."""
    return _group("watch", session_key=session_key, user_event_id=user_event_id)


def turn_run_group(*, session_key: str, user_event_id: str) -> str:
    """The group of the turn of ``user_event_id`` once the socket running it has gone (one
    member)."""
    return _group("run", session_key=session_key, user_event_id=user_event_id)


async def _turn_ask(
    layer: Any, *, user_pk: int, session_key: str, user_event_id: str, message: dict[str, Any]
) -> None:
    """Send ``message`` to the running turn: to the user's sockets (the one running it takes
    it) and to the turn's run group (joined once that socket has gone)."""
    message = {**message, "session_key": session_key, "user_event_id": user_event_id}
    await layer.group_send(user_group_name(user_pk), message)
    await layer.group_send(
        turn_run_group(session_key=session_key, user_event_id=user_event_id), message
    )


async def turn_watch_ask(
    *, user_pk: int, session_key: str, user_event_id: str, reply_to: str
) -> bool:
    """Join the turn's watch group as ``reply_to`` and ask the running turn for the reply so
    far; False when the channel layer cannot be reached (logged)."""
    layer = get_channel_layer()
    try:
        await layer.group_add(
            turn_watch_group(session_key=session_key, user_event_id=user_event_id), reply_to
        )
        await _turn_ask(
            layer,
            user_pk=user_pk,
            session_key=session_key,
            user_event_id=user_event_id,
            message={"type": WATCH, "reply_to": reply_to},
        )
    except REDIS_ERRORS as error:
        logger.warning("turn %s not watched live: %s", user_event_id, error)
        return False
    return True


async def turn_watch_leave(*, session_key: str, user_event_id: str, channel: str) -> None:
    """Leave the turn's watch group (an unreachable layer leaves a member its expiry removes)."""
    with contextlib.suppress(*REDIS_ERRORS):
        await get_channel_layer().group_discard(
            turn_watch_group(session_key=session_key, user_event_id=user_event_id), channel
        )


async def turn_stop_ask(*, user_pk: int, session_key: str, user_event_id: str) -> None:
    """Ask the process running the turn to stop it, as its own socket's ``cancel`` would."""
    try:
        await _turn_ask(
            get_channel_layer(),
            user_pk=user_pk,
            session_key=session_key,
            user_event_id=user_event_id,
            message={"type": STOP},
        )
    except REDIS_ERRORS as error:
        logger.warning("turn %s not asked to stop: %s", user_event_id, error)


class TurnRelay:
    """The live frames of one turn run here, for whoever watches it; ``stop`` stops the turn.

    The socket running the turn hands it the asks meant for it (``asked``) while it is open;
    once it has gone, the turn listens for them itself (``listen``)."""

    def __init__(self, *, session_key: str, user_event_id: str, stop: Callable[[], None]) -> None:
        self.layer = get_channel_layer()
        self.session_key = session_key
        self.user_event_id = user_event_id
        self.run_group = turn_run_group(session_key=session_key, user_event_id=user_event_id)
        self.watch_group = turn_watch_group(session_key=session_key, user_event_id=user_event_id)
        self.stop = stop
        self.watched = False
        # The reply being streamed: its text so far and its last delta frame.
        self.text = ""
        self.last_delta: dict[str, Any] | None = None
        self.outbox: asyncio.Queue[tuple[str | None, dict[str, Any]]] = asyncio.Queue(
            maxsize=RELAY_QUEUE_FRAMES
        )
        self.channel = ""
        self.listener: asyncio.Task | None = None
        self.publisher: asyncio.Task | None = None
        self.closing = False

    def listen(self) -> None:
        """Listen for watchers on the turn's run group (in the background: the turn does not
        wait for it), once the socket that runs the turn, which passed them on, has gone."""
        if self.listener is None:
            self.listener = asyncio.create_task(self._listen())

    def asked(self, message: dict[str, Any]) -> None:
        """An ask sent to the running turn (``turn_watch_ask``, ``turn_stop_ask``): taken when
        it names this turn. A watcher gets the reply so far, then every frame; a stop stops
        the turn."""
        if (message.get("session_key"), message.get("user_event_id")) != (
            self.session_key,
            self.user_event_id,
        ):
            return
        if message.get("type") == WATCH and isinstance(message.get("reply_to"), str):
            self.watched = True
            if self.publisher is None:
                self.publisher = asyncio.create_task(self._publish())
            if self.last_delta is not None:
                self._put(message["reply_to"], {**self.last_delta, "text": self.text})
        elif message.get("type") == STOP:
            self.stop()

    def frame(self, frame: dict[str, Any]) -> None:
        """A frame the turn sent its own socket: kept as the reply so far, and passed on to
        the watchers if there are any."""
        kind = frame.get("type")
        if kind not in RELAYED_FRAMES:
            return
        if kind == "delta":
            if self.last_delta is None or self.last_delta["message_id"] != frame["message_id"]:
                self.text = ""
            self.text += frame["text"]
            self.last_delta = frame
        elif kind == "event":
            self.text, self.last_delta = "", None
        if self.watched:
            self._put(None, frame)

    def _put(self, reply_to: str | None, frame: dict[str, Any]) -> None:
        try:
            self.outbox.put_nowait((reply_to, frame))
        except asyncio.QueueFull:
            logger.warning("turn %s: a frame for its watchers was dropped", self.user_event_id)

    async def _listen(self) -> None:
        while not self.closing:
            try:
                if not self.channel:
                    self.channel = await self.layer.new_channel()
                    await self.layer.group_add(self.run_group, self.channel)
                message = await self.layer.receive(self.channel)
            except REDIS_ERRORS as error:
                logger.warning("turn %s not relayed: %s", self.user_event_id, error)
                self.channel = ""
                await asyncio.sleep(LISTEN_RETRY_SECONDS)
                continue
            if not self.closing:
                self.asked(message)

    async def _publish(self) -> None:
        while True:
            reply_to, frame = await self.outbox.get()
            message = {"type": RELAYED, "user_event_id": self.user_event_id, "frame": frame}
            try:
                if reply_to is None:
                    await self.layer.group_send(self.watch_group, message)
                else:
                    await self.layer.send(reply_to, message)
            except REDIS_ERRORS as error:
                logger.warning("turn %s: a frame was not relayed: %s", self.user_event_id, error)
            finally:
                self.outbox.task_done()

    def close(self) -> None:
        """Once the turn has sent its last frame: let the frames queued for its watchers go
        and stop listening, in the background (a tracked task; none for a turn that nobody
        watched and whose socket stayed)."""
        if self.listener is not None or self.publisher is not None:
            work_track(asyncio.create_task(self._close()))

    async def _close(self) -> None:
        """Let the frames queued for the watchers go (for a moment at most), then stop
        listening. Cancelled meanwhile, it still stops listening before it ends: a receive
        left waiting would hold the channel layer's receiving to this event loop.

        A receive of channels-redis can miss its cancellation and go on waiting in its
        blocking pop (seen under load): a message to the turn's own channel then ends it, and
        the listener, closing, stops. So a relay always ends, and with it the turn's tracked
        work, which a graceful shutdown waits for."""
        tasks = {task for task in (self.listener, self.publisher) if task is not None}
        try:
            if tasks:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.outbox.join(), RELAY_FLUSH_SECONDS)
        finally:
            self.closing = True
            for task in tasks:
                task.cancel()
            if tasks:
                _, going_on = await asyncio.wait(tasks, timeout=RELAY_FLUSH_SECONDS)
                if going_on and self.channel:
                    with contextlib.suppress(*REDIS_ERRORS):
                        await self.layer.send(self.channel, {"type": CLOSED})
                    _, going_on = await asyncio.wait(going_on, timeout=RELAY_FLUSH_SECONDS)
                if going_on:
                    logger.warning("turn %s: its relay did not stop", self.user_event_id)
            if self.channel:
                with contextlib.suppress(*REDIS_ERRORS):
                    await self.layer.group_discard(self.run_group, self.channel)
