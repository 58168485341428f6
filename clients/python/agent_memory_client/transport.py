"""HTTP to the server: the connections of each event loop, retries, error statuses raised.

Transient failures are retried with backoff: a connection that could not be
opened, 429 and 503 answers (the server did nothing), and for reads and deletes
also a broken connection or a 502/504. A write that may have reached the server
is never sent twice.

HTTP goes through aiohttp, whose parser is compiled: an agent calls this client at
every step, and a pure-Python HTTP stack (httpx) took about 1.4 ms of processor per
call where aiohttp takes about 0.5 (docs/benchmarks.md, issue 12). As with most HTTP
clients, the environment's proxy settings apply (``HTTP_PROXY``, ``HTTPS_PROXY``,
``NO_PROXY``, read when a loop's connections are opened); no cookies are kept.
"""

from __future__ import annotations

import asyncio
import json
import random
import weakref
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
from multidict import CIMultiDictProxy
from yarl import URL

from agent_memory_client.errors import RequestTimeoutError, TransportError, api_error

__all__ = ["Response", "Transport"]

_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "DELETE", "PUT"})
_RETRY_STATUSES_ANY_METHOD = frozenset({429, 503})
_RETRY_STATUSES_IDEMPOTENT = frozenset({502, 504})
_MAX_RETRY_AFTER_SECONDS = 30.0


@dataclass(frozen=True)
class Response:
    """An answer of the server, read whole."""

    status_code: int
    headers: CIMultiDictProxy[str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class Transport:
    """Requests to one server with one key, safe to share between tasks.

    Connections are pooled per event loop (an HTTP connection belongs to the loop
    that opened it), so one transport also serves code that runs several loops one
    after another; ``aclose`` closes the pool of the running loop, and a loop that
    ends with ``asyncio.run`` (or anything else that shuts down its async
    generators) closes its pool itself.
    """

    def __init__(
        self, *, base_url: str, api_key: str, timeout: float, retries: int, max_connections: int
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL, got {base_url!r}")
        if not api_key:
            raise ValueError("api_key is empty")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.max_connections = max_connections
        self._headers = {
            "Authorization": f"Bearer {api_key}",
            "Accept": "application/json",
            "User-Agent": f"agent-memory-client/{_version()}",
        }
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool] = (
            weakref.WeakKeyDictionary()
        )

    async def aclose(self) -> None:
        """Close the connections of the running event loop."""
        pool = self._pools.pop(asyncio.get_running_loop(), None)
        if pool is not None:
            await pool.close()

    async def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None or pool.session.closed:
            session = aiohttp.ClientSession(
                headers=self._headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                connector=aiohttp.TCPConnector(limit=self.max_connections),
                cookie_jar=aiohttp.DummyCookieJar(),
                proxy=_environment_proxy(self.base_url),
            )
            pool = self._pools[loop] = await _Pool.open(
                session, closed=lambda: self._pool_forget(loop, session)
            )
        return pool.session

    def _pool_forget(self, loop: asyncio.AbstractEventLoop, session: aiohttp.ClientSession) -> None:
        """Forget the loop's pool if it is still the one of ``session`` (a pool closing late
        leaves a newer one of its loop alone)."""
        pool = self._pools.get(loop)
        if pool is not None and pool.session is session:
            del self._pools[loop]

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content: bytes | None = None,
        content_type: str = "application/json",
        params: Mapping[str, Any] | None = None,
    ) -> Response:
        """Send one request (``path`` below the base URL; a JSON ``body``, or ``content``
        already encoded, as JSON unless ``content_type`` says otherwise) and return the
        successful response; an error status raises.

        Retries what is safe to retry (see the module's docstring)."""
        if body is not None:
            content = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        headers = {"Content-Type": content_type} if content is not None else None
        query = urlencode(
            {name: value for name, value in (params or {}).items() if value is not None}
        )
        url = URL(f"{self.base_url}{path}{'?' + query if query else ''}", encoded=True)
        idempotent = method in _IDEMPOTENT_METHODS
        attempt = 0
        while True:
            try:
                session = await self._session()
                async with session.request(
                    method, url, data=content, headers=headers, allow_redirects=False
                ) as answer:
                    response = Response(answer.status, answer.headers, await answer.read())
            except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as error:
                if attempt >= self.retries:
                    unreached = (
                        RequestTimeoutError
                        if isinstance(error, asyncio.TimeoutError)
                        else TransportError
                    )
                    raise unreached(f"{method} {path}: {error!r}") from error
            except asyncio.TimeoutError as error:
                if not idempotent or attempt >= self.retries:
                    raise RequestTimeoutError(
                        f"{method} {path}: no answer within {self.timeout} s"
                    ) from error
            except aiohttp.ClientError as error:
                if not idempotent or attempt >= self.retries:
                    raise TransportError(f"{method} {path}: {error!r}") from error
            else:
                if 200 <= response.status_code < 300:
                    return response
                retryable = response.status_code in _RETRY_STATUSES_ANY_METHOD or (
                    idempotent and response.status_code in _RETRY_STATUSES_IDEMPOTENT
                )
                if not retryable or attempt >= self.retries:
                    raise api_error(response.status_code, _answer_of(response))
                retry_after = _retry_after_seconds(response)
                if retry_after is not None:
                    attempt += 1
                    await asyncio.sleep(retry_after)
                    continue
            await asyncio.sleep(min(0.1 * 2**attempt, 2.0) * (0.5 + random.random()))
            attempt += 1


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-memory-client")
    except PackageNotFoundError:
        return "0"


class _Pool:
    """A loop's connections, closed by the loop itself when it shuts down.

    aiohttp warns about a session left open when it is collected, a loop that ended
    (``asyncio.run``) cannot close it afterwards, and a session holds its loop, so a pool
    kept for a loop would keep that loop alive. So the session is held by an async
    generator of that loop: a loop that shuts down its async generators, as ``asyncio.run``
    does, closes the session in them before it closes, and ``closed`` then forgets the
    pool (a loop closed without that keeps its pool until the client goes).
    """

    def __init__(self, session: aiohttp.ClientSession, closed: Callable[[], object]) -> None:
        self.session = session
        self._closed = closed
        self._holder = self._held()

    @classmethod
    async def open(cls, session: aiohttp.ClientSession, *, closed: Callable[[], object]) -> _Pool:
        pool = cls(session, closed)
        await pool._holder.__anext__()
        return pool

    async def _held(self) -> AsyncIterator[None]:
        try:
            yield
        finally:
            try:
                await self.session.close()
            finally:
                self._closed()

    async def close(self) -> None:
        await self._holder.aclose()


def _environment_proxy(base_url: str) -> str | None:
    """The proxy the environment names for ``base_url``, if any (``NO_PROXY`` heeded).

    Read once for a pool, as httpx read it once for a client: aiohttp's own ``trust_env``
    reads the environment and ``~/.netrc`` again for every request, which cost 0.45 ms a
    call, as much as the rest of the client's work."""
    url = urlsplit(base_url)
    if url.hostname and proxy_bypass(url.hostname):
        return None
    return getproxies().get(url.scheme)


def _answer_of(response: Response) -> Any:
    """What an error answer says: its JSON or text, and for a redirect where to (a redirect is
    not followed: a POST would be sent again as a GET, and the key to another origin)."""
    location = response.headers.get("Location")
    if 300 <= response.status_code < 400 and location:
        return f"redirected to {location}: use the server's own address as base_url"
    return _json_or_text(response)


def _json_or_text(response: Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text


def _retry_after_seconds(response: Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return min(max(float(value), 0.0), _MAX_RETRY_AFTER_SECONDS) if value else None
    except ValueError:
        return None
