"""Channels' WebSocket test client, waiting for a consumer to finish as long as for a frame."""

from __future__ import annotations

from channels.testing import WebsocketCommunicator

# Seconds a consumer may take to finish once its socket is closed before the test gives up
# (not an assertion), as long as the tests give a frame to come.
DISCONNECT_WAIT_SECONDS = 20


class WebsocketClient(WebsocketCommunicator):
    """``WebsocketCommunicator`` whose ``disconnect`` waits ``DISCONNECT_WAIT_SECONDS`` for the
    consumer to end. Channels' default is one second, while every other wait of these tests
    allows seconds: a chat consumer's end (its turn stopped and stored as interrupted, the
    user's departure recorded on a thread of its own) took up to half a second on a busy
    machine, and one taking a second failed its test with a ``TimeoutError`` of the test's
    own making."""

    async def disconnect(self, code: int = 1000, timeout: float = DISCONNECT_WAIT_SECONDS) -> None:
        await super().disconnect(code, timeout)
