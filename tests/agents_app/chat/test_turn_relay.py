"""The relay of a running turn to the sockets that watch it (agents_app/chat/turn_relay.py)."""

from __future__ import annotations

import asyncio

from channels.layers import get_channel_layer

from agents_app.chat.turn_relay import RELAY_FLUSH_SECONDS, TurnRelay
from core import shutdown


async def test_a_relay_whose_receive_misses_its_cancellation_still_stops(monkeypatch):
    """channels-redis's receive can miss a cancellation and go on waiting (seen under load):
    the relay of a turn that ended stops all the same, and the turn's work with it."""
    layer = get_channel_layer()
    receive = layer.receive

    async def deaf_receive(channel):
        while True:
            try:
                return await receive(channel)
            except asyncio.CancelledError:
                asyncio.current_task().uncancel()

    monkeypatch.setattr(layer, "receive", deaf_receive)
    relay = TurnRelay(session_key="session", user_event_id="turn", stop=lambda: None)
    relay.listen()
    while not relay.channel:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)

    relay.close()
    closing = shutdown.work_pending()
    _, going_on = await asyncio.wait(closing, timeout=3 * RELAY_FLUSH_SECONDS)

    assert closing and not going_on
    assert relay.listener.done()
