"""The plain async client: every route of the service-account API, JSON in and out.

An app's service account acts for the app's end users, named by the app's own
string ids. Every method is a coroutine taking keyword arguments and answering
the server's JSON (dicts and lists, as the API documents them); an error status
raises the matching :mod:`agent_memory_client.errors` class. What is retried, and
how requests go, is :mod:`agent_memory_client.transport`'s.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from agent_memory_client.errors import JobFailedError
from agent_memory_client.transport import Response, Transport

__all__ = ["AgentMemoryClient", "Response"]

API_PREFIX = "/api/v1/apps"
JOB_FINAL_STATUSES = frozenset({"done", "failed", "dead"})


def _segment(value: str) -> str:
    """A path segment holding ``value`` whole, whatever it holds (``/``, ``%``, spaces,
    any script): percent-encoded twice, since the server's web server decodes the path once
    before routing it (a ``%2F`` would split the segment) and the route decodes the rest."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a non-empty string id, got {value!r}")
    return quote(quote(value, safe=""), safe="")


class AgentMemoryClient(Transport):
    """One app's service account on one server: the API's routes, each a coroutine, over the
    requests of ``Transport`` (``request`` for any other call).

    Safe to share between tasks, and between event loops run one after another: its
    connections are pooled per loop; ``aclose`` closes the running loop's, ``async with``
    does it on leaving.
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
        super().__init__(
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            retries=retries,
            max_connections=max_connections,
        )

    def __repr__(self) -> str:
        return f"AgentMemoryClient(base_url={self.base_url!r})"

    async def __aenter__(self) -> AgentMemoryClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

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

    # --- Artifacts: the files the chat shows, versioned as ADK's -----------------------------

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        data: bytes = b"",
        mime_type: str | None = None,
        session_id: str | None = None,
        custom_metadata: Mapping[str, Any] | None = None,
        file_data: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Save a new version of ``filename``: ``data`` of any ``mime_type`` (None: ``data``
        is a text part's UTF-8), or a ``file_data`` part (``{"file_uri", "mime_type",
        "display_name"}``), kept byte for byte; answers the version's metadata (``version``
        from 0, ``canonical_uri``, ...).

        A ``user:`` filename is the end user's, any other the session's (``session_id``
        needed); a filename may hold ``/``. Over the server's size limit ``BadRequestError``
        says so."""
        if mime_type is not None and not _HEADER_VALUE.fullmatch(mime_type):
            raise ValueError(f"not a MIME type: {mime_type!r}")
        fields = {
            "filename": filename,
            "text": "true" if mime_type is None else "false",
            "custom_metadata": json.dumps(dict(custom_metadata or {})),
        }
        if file_data is not None:
            fields["file_data"] = json.dumps(dict(file_data))
            content, content_type = _multipart(fields, None, "")
        else:
            if mime_type is not None:
                fields["mime_type"] = mime_type
            content, content_type = _multipart(
                fields, data, mime_type or "text/plain; charset=utf-8"
            )
        return await self._json(
            "POST",
            artifacts_path(app_name, user_id, session_id),
            content=content,
            content_type=content_type,
        )

    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        """The filenames of the session and the end user's ``user:`` ones, sorted; the end
        user's only without a session."""
        body = await self._json("GET", artifacts_path(app_name, user_id, session_id))
        return body["filenames"]

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The metadata of every version of ``filename``, oldest first (empty if none)."""
        body = await self._json("GET", artifact_path(app_name, user_id, filename, session_id))
        return body["versions"]

    async def get_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> dict[str, Any]:
        """One version (the newest when ``version`` is None): its metadata and ``part``,
        ``{"text": ...}``, ``{"inline_data": {"mime_type", "data": base64}}`` or
        ``{"file_data": {...}}``; ``NotFoundError`` when there is none."""
        number = "latest" if version is None else str(int(version))
        return await self._json(
            "GET",
            artifact_path(app_name, user_id, filename, session_id) + f"versions/{number}/",
        )

    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        """Delete every version of ``filename`` (nothing happens if it has none)."""
        await self.request("DELETE", artifact_path(app_name, user_id, filename, session_id))

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


def artifacts_path(app_name: str, user_id: str, session_id: str | None) -> str:
    """The artifacts of the session, or the end user's own (``user:`` files) without one."""
    if session_id is None:
        return f"{user_path(app_name, user_id)}artifacts/"
    return f"{session_path(app_name, user_id, session_id)}artifacts/"


def artifact_path(app_name: str, user_id: str, filename: str, session_id: str | None) -> str:
    return f"{artifacts_path(app_name, user_id, session_id)}{_segment(filename)}/"


_HEADER_VALUE = re.compile(r"[\x21-\x7e][\x20-\x7e]*")


def _multipart(fields: Mapping[str, str], data: bytes | None, mime_type: str) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body of text ``fields`` and the file ``data`` (field
    ``file``; none when ``data`` is None), and its Content-Type."""
    boundary = secrets.token_hex(16)
    while (data is not None and boundary.encode() in data) or any(
        boundary in value for value in fields.values()
    ):
        boundary = secrets.token_hex(16)
    chunks = []
    for name, value in fields.items():
        chunks.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n'
            "Content-Type: text/plain; charset=utf-8\r\n\r\n".encode()
            + value.encode()
            + b"\r\n"
        )
    if data is not None:
        chunks.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="artifact"'
            f"\r\nContent-Type: {mime_type}\r\n\r\n".encode()
            + data
            + b"\r\n"
        )
    chunks.append(f"--{boundary}--\r\n".encode())
    return b"".join(chunks), f"multipart/form-data; boundary={boundary}"


def _memory_body(
    *, text: str, topic: str | None, metadata: Mapping[str, Any] | None
) -> dict[str, Any]:
    body: dict[str, Any] = {"text": text}
    if topic is not None:
        body["topic"] = topic
    if metadata:
        body["metadata"] = dict(metadata)
    return body
