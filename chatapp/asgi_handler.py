"""Django's ASGI handler, with each request's sync code on a kept thread instead of a new one,
and the request signals sent on the event loop when they have nothing to do on a thread."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core import signals
from django.core.cache import caches, close_caches
from django.core.cache.backends.base import BaseCache
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import reset_urlconf
from django.db import close_old_connections, reset_queries
from django.dispatch import Signal
from django.http import HttpResponseBase
from django.urls import set_script_prefix

from core.after_response import responses_sent_then_run
from core.log_context import log_context_clear_on_request_finished

IDLE_THREADS_KEPT = 32

# Receivers of the request signals whose only blocking work is closing the database connections
# the request's thread opened and the caches the request opened: with none, they do nothing
# that needs a thread.
CLOSING_ONLY_RECEIVERS = frozenset(
    {
        reset_queries,
        close_old_connections,
        close_caches,
        reset_urlconf,
        log_context_clear_on_request_finished,
    }
)

_request_executor: contextvars.ContextVar[RequestExecutor] = contextvars.ContextVar(
    "request_executor"
)


class RequestExecutor(ThreadPoolExecutor):
    """The one thread of a request's sync code, knowing whether code ran on it since the
    request signals' receivers last did (``used``).

    Django's database connections are kept per thread: those of the requests this thread
    served were opened by code run here, and the receivers close them (``request_finished``
    at a request's end; ``request_started`` at the next one's, for what ran after the end,
    such as work left for after the response). So when nothing ran here since the receivers
    last ran here, there is no connection for them to close.
    """

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="django-request")
        self.used = False

    def submit(self, fn, /, *args, **kwargs):
        self.used = True
        return super().submit(fn, *args, **kwargs)


def signal_sendable_on_loop(signal: Signal, sender: type | None) -> bool:
    """Whether every receiver ``signal`` has for ``sender`` may run on the event loop now: each
    is a closing-only one, the request's thread has run none of its code and it opened no
    cache whose ``close`` does anything (Redis and local-memory caches close nothing).

    Reads the receivers as Django's ``Signal.asend`` does (``_live_receivers``): any other
    receiver, an async one included, leaves the signal to Django's way.
    """
    executor = _request_executor.get(None)
    if executor is None or executor.used:
        return False
    sync_receivers, async_receivers = signal._live_receivers(sender)
    return (
        not async_receivers
        and all(receiver in CLOSING_ONLY_RECEIVERS for receiver in sync_receivers)
        and all(type(cache).close is BaseCache.close for cache in caches.all(initialized_only=True))
    )


def _receivers_ran_on_the_thread() -> None:
    executor = _request_executor.get(None)
    if executor is not None:
        executor.used = False


class KeptThreadASGIHandler(ASGIHandler):
    """Django's ``ASGIHandler``, each request's thread taken from a pool and put back after,
    and no thread at all for a request whose code is async from end to end.

    Django runs every HTTP request in a thread-sensitive context of its own, so that the sync
    code of one request (the request signals, sync middleware and views) runs on one thread
    and never beside another request's. asgiref makes that thread anew for each context and
    joins it when the request ends: two thread starts and a join per request, every request,
    since Django's request signals have sync receivers (about a tenth of a web process's
    time under the service API's load, bench.remote_sessions). Here the context is given an
    executor of one thread from a pool, the same isolation (one request at a time on it), and
    the executor goes back to the pool when the request ends; at most ``IDLE_THREADS_KEPT``
    wait there. asgiref refuses sync calls from tasks that outlive their request's context,
    so a kept thread never runs a finished request's work beside the next one's.

    Django hands ``request_started`` and the response's ``close`` (which sends
    ``request_finished``) to that thread whatever their receivers do: two switches between
    threads per request, a tenth of a service API read's time. Their receivers in this
    project only close connections opened on that thread (``CLOSING_ONLY_RECEIVERS``), so
    when no code has run there since they last ran (the service API's reads and appends,
    whose database work is async, and ``/healthz``) they run on the event loop; any other
    receiver, or code run on the thread, and they go to the thread as in Django.

    Work a view left for after its response (``core.after_response``: the service API's audit
    row) runs once the response is sent, still in the request's context.
    """

    def __init__(self) -> None:
        super().__init__()
        self._idle_executors: deque[RequestExecutor] = deque()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)  # Django refuses it
            return
        executor = self._executor_take()
        token = _request_executor.set(executor)
        try:
            async with ThreadSensitiveContext(executor=executor), responses_sent_then_run():
                await self.handle(scope, receive, send)
        finally:
            _request_executor.reset(token)
            self._executor_give_back(executor)

    async def handle(self, scope, receive, send) -> None:
        """Django's ``ASGIHandler.handle`` step for step (the body read, ``request_started``,
        the response raced against the client going away, the response closed), but for how
        the two request signals are sent (``_signal_send``, ``_response_close``).
        tests/chatapp/test_asgi_handler.py notices when Django's own changes."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        await self._signal_send(signals.request_started, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            body_file.close()
            await self.send_response(error_response, send)
            await self._response_close(error_response)
            return

        async def respond() -> HttpResponseBase:
            response = await self.run_get_response(request)
            with contextlib.suppress(asyncio.CancelledError):  # the client went away meanwhile
                await self.send_response(response, send)
            return response

        # The disconnect listener first: of two done at once, its RequestAborted is the one
        # to swallow before the response's outcome is looked at.
        tasks = [
            asyncio.create_task(self.listen_for_disconnect(receive)),
            asyncio.create_task(respond()),
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()  # a view may handle its cancellation
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            await self._signal_send(signals.request_finished)
        else:
            await self._response_close(response)
        body_file.close()

    async def _signal_send(self, signal: Signal, **named) -> None:
        if signal_sendable_on_loop(signal, type(self)):
            signal.send(sender=type(self), **named)
        else:
            await signal.asend(sender=type(self), **named)
            _receivers_ran_on_the_thread()

    async def _response_close(self, response: HttpResponseBase) -> None:
        """``response.close()``, which closes what the response holds and sends
        ``request_finished``: on the loop for a response whose content is all in memory."""
        sender = response._handler_class
        if not response.streaming and signal_sendable_on_loop(signals.request_finished, sender):
            response.close()
        else:
            await sync_to_async(response.close)()
            _receivers_ran_on_the_thread()

    def _executor_take(self) -> RequestExecutor:
        try:
            return self._idle_executors.pop()
        except IndexError:
            return RequestExecutor()

    def _executor_give_back(self, executor: RequestExecutor) -> None:
        if len(self._idle_executors) < IDLE_THREADS_KEPT:
            self._idle_executors.append(executor)
        else:
            executor.shutdown(wait=False)
