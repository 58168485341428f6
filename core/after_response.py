"""Work a request owes that its client need not wait for, done once its response is sent.

An ASGI server's handler opens a ``responses_sent_then_run`` block around a request; inside it,
``after_response`` keeps the work and the block runs it when the response has gone out, before
the request ends (in the same thread-sensitive context, so a sync hop in it uses the request's
thread). Outside such a block (WSGI, Django's test client, a coroutine run on its own)
``after_response`` runs the work at once, so nothing is lost where no handler would run it.

The cost: work kept this way is not done if the process dies between sending the response
and running it (a few milliseconds), so only work whose loss on a crash is acceptable belongs
here: an audit row, not a write the response reports as done.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable

logger = logging.getLogger(__name__)

_kept: contextvars.ContextVar[list[Awaitable[None]] | None] = contextvars.ContextVar(
    "after_response", default=None
)


async def after_response(work: Awaitable[None]) -> None:
    """Await ``work`` once the current request's response is sent, or now if no handler of
    this request runs work after its response (then its errors are the caller's)."""
    kept = _kept.get()
    if kept is None:
        await work
        return
    kept.append(work)


@contextlib.asynccontextmanager
async def responses_sent_then_run() -> AsyncIterator[None]:
    """Around the whole handling of one request: the work ``after_response`` kept inside is
    awaited in order when the block ends, each whatever the others did (a failure is logged:
    the response has gone out, there is no one left to tell)."""
    kept: list[Awaitable[None]] = []
    token = _kept.set(kept)
    try:
        yield
    finally:
        _kept.reset(token)
        for work in kept:
            try:
                await work
            except Exception:
                logger.exception("Work after a response failed")
