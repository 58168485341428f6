"""Django's ASGI handler, with each request's sync code on a kept thread instead of a new one."""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext
from django.core.handlers.asgi import ASGIHandler

from core.after_response import responses_sent_then_run

IDLE_THREADS_KEPT = 32


class KeptThreadASGIHandler(ASGIHandler):
    """Django's ``ASGIHandler``, each request's thread taken from a pool and put back after.

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

    Work a view left for after its response (``core.after_response``: the service API's audit
    row) runs once the response is sent, still in the request's context.
    """

    def __init__(self) -> None:
        super().__init__()
        self._idle_executors: deque[ThreadPoolExecutor] = deque()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)  # Django refuses it
            return
        executor = self._executor_take()
        try:
            async with ThreadSensitiveContext(executor=executor), responses_sent_then_run():
                await self.handle(scope, receive, send)
        finally:
            self._executor_give_back(executor)

    def _executor_take(self) -> ThreadPoolExecutor:
        try:
            return self._idle_executors.pop()
        except IndexError:
            return ThreadPoolExecutor(max_workers=1, thread_name_prefix="django-request")

    def _executor_give_back(self, executor: ThreadPoolExecutor) -> None:
        if len(self._idle_executors) < IDLE_THREADS_KEPT:
            self._idle_executors.append(executor)
        else:
            executor.shutdown(wait=False)
