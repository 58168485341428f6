"""At most so many requests at once to one model server, the chat's first.

Local servers often serve one request at a time, and some cut a stream off when another
arrives: a compaction summary cut a chat reply short, and a turn failed after a minute behind a
summary. A server's slots (``OPENAI_MAX_CONCURRENT_REQUESTS``; 0, the default, is no limit, as a
cloud needs none) are counted in this process across its event loops and threads; a request of
the chat takes a free slot before any waiting background request (memory generation,
compaction), so background work waits rather than a reply.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

# How often a waiting request looks for a free slot: short beside any model call.
POLL_SECONDS = 0.02


@dataclass
class _Slots:
    busy: int = 0
    chat_waiting: int = 0


_lock = threading.Lock()
_servers: dict[str, _Slots] = {}


def _take(slots: _Slots, *, limit: int, chat: bool) -> bool:
    with _lock:
        if slots.busy >= limit or (not chat and slots.chat_waiting > 0):
            return False
        slots.busy += 1
        return True


@asynccontextmanager
async def request_slot(*, server: str, limit: int, chat: bool) -> AsyncIterator[None]:
    """Hold one of ``server``'s ``limit`` slots for the block (none when ``limit`` is 0),
    waiting for one as long as it takes; ``chat`` requests go before background ones."""
    if limit <= 0:
        yield
        return
    with _lock:
        slots = _servers.setdefault(server, _Slots())
        if chat:
            slots.chat_waiting += 1
    try:
        while not _take(slots, limit=limit, chat=chat):
            await asyncio.sleep(POLL_SECONDS)
    finally:
        if chat:
            with _lock:
                slots.chat_waiting -= 1
    try:
        yield
    finally:
        with _lock:
            slots.busy -= 1
