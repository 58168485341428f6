"""The plain async client: every route of the service-account API, JSON in and out.

An app's service account acts for the app's end users, named by the app's own
string ids. Every method is a coroutine taking keyword arguments and answering
the server's JSON (dicts and lists, as the API documents them); an error status
raises the matching :mod:`agent_memory_client.errors` class.

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
import time
import weakref
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode, urlsplit
from urllib.request import getproxies, proxy_bypass

import aiohttp
from multidict import CIMultiDictProxy
from yarl import URL

from agent_memory_client.errors import JobFailedError, TransportError, api_error

__all__ = ["AgentMemoryClient", "Response"]

API_PREFIX = "/api/v1/apps"
JOB_FINAL_STATUSES = frozenset({"done", "failed", "dead"})
_IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "DELETE", "PUT"})
_RETRY_STATUSES_ANY_METHOD = frozenset({429, 503})
_RETRY_STATUSES_IDEMPOTENT = frozenset({502, 504})
_MAX_RETRY_AFTER_SECONDS = 30.0


def _segment(value: str) -> str:
    """A path segment: every character that could leave the segment is escaped."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string id, got {value!r}")
    return quote(value, safe="")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agent-memory-client")
    except PackageNotFoundError:
        return "0"


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


class AgentMemoryClient:
    """One app's service account on one server.

    Safe to share between tasks. Connections are pooled per event loop (an HTTP
    connection belongs to the loop that opened it), so one client also serves
    code that runs several loops one after another; ``aclose`` closes the pool
    of the running loop, ``async with`` does it on leaving, and a loop that ends
    with ``asyncio.run`` (or anything else that shuts down its async generators)
    closes its pool itself.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        timeout: float = 30.0,
        retries: int = 3,
        max_connections: int = 100,
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

    def __repr__(self) -> str:
        return f"AgentMemoryClient(base_url={self.base_url!r})"

    async def __aenter__(self) -> AgentMemoryClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

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

    # --- The one way out --------------------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content: bytes | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> Response:
        """Send one request (``path`` below the base URL; a JSON ``body``, or ``content``
        already encoded as JSON) and return the successful response; an error status raises.

        Retries what is safe to retry (see the module's docstring)."""
        if body is not None:
            content = json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
        headers = {"Content-Type": "application/json"} if content is not None else None
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
                    raise TransportError(f"{method} {path}: {error!r}") from error
            except (aiohttp.ClientError, asyncio.TimeoutError) as error:
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

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = await self.request(method, path, **kwargs)
        return response.json() if response.content else None

    # --- Sessions ---------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: Mapping[str, Any] | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Create a session (state in any scope; ``temp:`` keys are not kept). A
        ``session_id`` the end user already has raises ``ConflictError``."""
        body: dict[str, Any] = {"state": dict(state or {})}
        if session_id is not None:
            body["session_id"] = session_id
        return await self._json("POST", sessions_path(app_name, user_id), body=body)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        num_recent_events: int | None = None,
        after_timestamp: float | None = None,
    ) -> dict[str, Any]:
        """The session with its merged state and its history, oldest event first: the last
        ``num_recent_events`` only, and only events at or after ``after_timestamp``."""
        params = {"num_recent_events": num_recent_events, "after_timestamp": after_timestamp}
        return await self._json("GET", session_path(app_name, user_id, session_id), params=params)

    async def list_sessions(
        self,
        *,
        app_name: str,
        user_id: str,
        page_size: int | None = None,
        page_token: str | None = None,
    ) -> dict[str, Any]:
        """One page of the end user's sessions (no events), newest first:
        ``{"sessions": [...], "next_page_token": str | None}``."""
        params = {"page_size": page_size, "page_token": page_token}
        return await self._json("GET", sessions_path(app_name, user_id), params=params)

    async def iter_sessions(
        self, *, app_name: str, user_id: str, page_size: int | None = None
    ) -> AsyncIterator[dict[str, Any]]:
        """Every session of the end user, page after page."""
        token = None
        while True:
            page = await self.list_sessions(
                app_name=app_name, user_id=user_id, page_size=page_size, page_token=token
            )
            for session in page["sessions"]:
                yield session
            token = page.get("next_page_token")
            if not token:
                return

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session, its events and the memories drawn only from it."""
        await self.request("DELETE", session_path(app_name, user_id, session_id))

    async def append_event(
        self, *, app_name: str, user_id: str, session_id: str, event: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Store an event (ADK's Event JSON) and apply its state delta, atomically:
        ``{"event": <as stored>, "last_update_time": float}``."""
        return await self._json(
            "POST", session_path(app_name, user_id, session_id) + "events/", body=event
        )

    async def rewind_session(
        self, *, app_name: str, user_id: str, session_id: str, invocation_id: str
    ) -> dict[str, Any]:
        """Revert the session to just before ``invocation_id``; answers the session."""
        return await self._json(
            "POST",
            session_path(app_name, user_id, session_id) + "rewind/",
            body={"invocation_id": invocation_id},
        )

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The end user's ``user:`` state, keys prefixed (``{"user:name": ...}``)."""
        body = await self._json("GET", user_path(app_name, user_id) + "state/")
        return body["user"]

    async def get_app_state(self, *, app_name: str) -> dict[str, Any]:
        """The app's ``app:`` state, keys prefixed."""
        body = await self._json("GET", app_path(app_name) + "state/")
        return body["app"]

    # --- Memory -----------------------------------------------------------------------------

    async def generate_memories(
        self, *, app_name: str, user_id: str, session_id: str
    ) -> dict[str, Any]:
        """Queue memory generation from a stored session; answers the job
        (``{"job_id", "status"}``), which ``wait_for_job`` follows."""
        return await self._json(
            "POST",
            user_path(app_name, user_id) + "memory/generate/",
            body={"session_id": session_id},
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Mapping[str, Any]],
        session_id: str | None = None,
        custom_metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Queue memory generation from these events (ADK's Event JSON); answers the job."""
        body: dict[str, Any] = {"events": list(events)}
        if session_id is not None:
            body["session_id"] = session_id
        if custom_metadata:
            body["custom_metadata"] = dict(custom_metadata)
        return await self._json("POST", user_path(app_name, user_id) + "memory/events/", body=body)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        text: str,
        topic: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Store a memory as an explicit statement of the end user; answers the memory."""
        body = _memory_body(text=text, topic=topic, metadata=metadata)
        return await self._json("POST", user_path(app_name, user_id) + "memories/", body=body)

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """The memories that best answer ``query``, best first, each with its ``score``
        and ``sources`` (the session and event it came from)."""
        body = await self._json(
            "GET",
            user_path(app_name, user_id) + "memories/search/",
            params={"query": query, "limit": limit},
        )
        return body["memories"]

    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str) -> None:
        await self.request(
            "DELETE", user_path(app_name, user_id) + f"memories/{_segment(memory_id)}/"
        )

    async def get_job(self, *, app_name: str, job_id: str) -> dict[str, Any]:
        """A memory job: ``{"job_id", "status": queued|running|done|failed|dead, "error"}``."""
        return await self._json("GET", app_path(app_name) + f"jobs/{_segment(job_id)}/")

    async def wait_for_job(
        self, *, app_name: str, job_id: str, timeout: float = 60.0, interval: float = 0.25
    ) -> dict[str, Any]:
        """Follow a job until it ends: answers it when done, raises ``JobFailedError`` when
        it failed or died, ``TimeoutError`` when it is still going after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            job = await self.get_job(app_name=app_name, job_id=job_id)
            if job["status"] == "done":
                return job
            if job["status"] in JOB_FINAL_STATUSES:
                raise JobFailedError(job)
            if time.monotonic() >= deadline:
                raise TimeoutError(f"memory job {job_id} still {job['status']} after {timeout} s")
            await asyncio.sleep(interval)

    # --- App-scope memories: shared by every end user of the app ----------------------------

    async def list_app_memories(self, *, app_name: str) -> Any:
        return await self._json("GET", app_path(app_name) + "memories/")

    async def add_app_memory(
        self,
        *,
        app_name: str,
        text: str,
        topic: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Store knowledge every end user's agent may draw on (a bootstrapped memory)."""
        body = _memory_body(text=text, topic=topic, metadata=metadata)
        return await self._json("POST", app_path(app_name) + "memories/", body=body)

    async def delete_app_memory(self, *, app_name: str, memory_id: str) -> None:
        await self.request("DELETE", app_path(app_name) + f"memories/{_segment(memory_id)}/")

    # --- End users (scope users:admin) ------------------------------------------------------

    async def list_users(self, *, app_name: str, page_token: str | None = None) -> Any:
        """One page of the app's end users."""
        return await self._json(
            "GET", app_path(app_name) + "users/", params={"page_token": page_token}
        )

    async def iter_user_ids(self, *, app_name: str) -> AsyncIterator[str]:
        """The id of every end user of the app, page after page."""
        token = None
        while True:
            page = await self.list_users(app_name=app_name, page_token=token)
            for user in page["users"]:
                yield user["user_id"]
            token = page.get("next_page_token")
            if not token:
                return

    async def export_user(self, *, app_name: str, user_id: str) -> Any:
        """Everything kept about the end user, as "export my data" gives it to a person."""
        return await self._json("GET", user_path(app_name, user_id) + "export/")

    async def delete_user(self, *, app_name: str, user_id: str) -> None:
        """Delete everything kept about the end user, as "delete all my data" does."""
        await self.request("DELETE", user_path(app_name, user_id))


def app_path(app_name: str) -> str:
    return f"{API_PREFIX}/{_segment(app_name)}/"


def user_path(app_name: str, user_id: str) -> str:
    return f"{app_path(app_name)}users/{_segment(user_id)}/"


def sessions_path(app_name: str, user_id: str) -> str:
    return f"{user_path(app_name, user_id)}sessions/"


def session_path(app_name: str, user_id: str, session_id: str) -> str:
    return f"{sessions_path(app_name, user_id)}{_segment(session_id)}/"


def _memory_body(
    *, text: str, topic: str | None, metadata: Mapping[str, Any] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"text": text}
    if topic is not None:
        body["topic"] = topic
    if metadata:
        body["metadata"] = dict(metadata)
    return body


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
