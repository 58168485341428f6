"""``RemoteArtifactService``: ADK's ``BaseArtifactService`` over the server's files.

The artifacts an agent saves are the files the chat shows the person (every
version, as the chat lists them), in their data export and gone with their data
deletion. As with ADK's own services, a ``user:`` filename is the end user's
(every session of theirs sees it) and any other belongs to one session; versions
count from 0; what is absent loads as ``None``.

As ADK's services, any part is kept byte for byte: inline data of any MIME type,
text (empty too), ``file_data`` (a URI kept as given). An ``artifact://`` reference
is checked and followed as ADK's ``InMemoryArtifactService`` does: it must stay in
the caller's app, user (and session), and loading it loads what it names, at most
five references deep. A filename may hold ``/``; the client percent-encodes it. A
save over the server's size limit raises ADK's ``InputValidationError`` saying so.
"""

from __future__ import annotations

import base64
from typing import Any

from google.adk.artifacts import artifact_util
from google.adk.artifacts.base_artifact_service import (
    ArtifactVersion,
    BaseArtifactService,
    ensure_part,
)
from google.adk.errors.input_validation_error import InputValidationError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.genai import types
from typing_extensions import override

from agent_memory_client.adk.sessions import client_from_arguments
from agent_memory_client.client import AgentMemoryClient
from agent_memory_client.errors import BadRequestError, NotFoundError, PayloadTooLargeError

__all__ = ["RemoteArtifactService"]

USER_PREFIX = "user:"
# The part ADK's rewind saves as a new version to hide a file (``artifact_util``): every
# artifact service loads it as absent.
_REWIND_MARKER = types.Part(inline_data=types.Blob(mime_type="application/octet-stream", data=b""))


def _session_of(filename: str, session_id: str | None) -> str | None:
    """The session a file belongs to: none for the end user's ``user:`` files; a session
    file without a session is refused, as ADK's services refuse it."""
    if filename.startswith(USER_PREFIX):
        return None
    if session_id is None:
        raise InputValidationError("Session ID must be provided for session-scoped artifacts.")
    return session_id


def _version_of(stored: dict[str, Any]) -> ArtifactVersion:
    return ArtifactVersion(
        version=stored["version"],
        canonical_uri=stored["canonical_uri"],
        custom_metadata=stored.get("custom_metadata") or {},
        create_time=stored["create_time"],
        mime_type=stored.get("mime_type"),
    )


# How many artifact:// references a load follows, as ADK's services.
_MAX_REFERENCE_DEPTH = 5


def _part_of(stored: dict[str, Any]) -> types.Part:
    if "text" in stored:
        return types.Part(text=stored["text"])
    if "file_data" in stored:
        return types.Part(file_data=types.FileData.model_validate(stored["file_data"]))
    inline = stored["inline_data"]
    return types.Part(
        inline_data=types.Blob(mime_type=inline["mime_type"], data=base64.b64decode(inline["data"]))
    )


class RemoteArtifactService(BaseArtifactService):
    """ADK artifacts kept by an agent memory server, through an app's API key.

    ``app_name`` is the server's app, ``user_id`` the app's own id of the end user,
    ``session_id`` a session the server stores (``RemoteSessionService``'s): a session
    file saved to a session the server does not have raises ``SessionNotFoundError``.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AgentMemoryClient | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.client = client_from_arguments(
            base_url=base_url, api_key=api_key, client=client, timeout=timeout
        )

    async def close(self) -> None:
        """Close the connections of the running event loop."""
        await self.client.aclose()

    @override
    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: types.Part | dict[str, Any],
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        session = _session_of(filename, session_id)
        part = ensure_part(artifact)
        data, mime_type, file_data = b"", None, None
        if part.inline_data is not None:
            data = part.inline_data.data or b""
            mime_type = part.inline_data.mime_type or "application/octet-stream"
        elif part.text is not None:
            data = part.text.encode("utf-8")
        elif part.file_data is not None:
            if artifact_util.is_artifact_ref(part):
                parsed = artifact_util.parse_artifact_uri(part.file_data.file_uri or "")
                if parsed is None:
                    raise InputValidationError(
                        f"Invalid artifact reference URI: {part.file_data.file_uri}"
                    )
                artifact_util.validate_artifact_reference_scope(
                    app_name=app_name, user_id=user_id, session_id=session_id, parsed_uri=parsed
                )
            file_data = part.file_data.model_dump(mode="json", exclude_none=True)
        else:
            raise InputValidationError("Not supported artifact type.")
        try:
            saved = await self.client.save_artifact(
                app_name=app_name,
                user_id=user_id,
                filename=filename,
                data=data,
                mime_type=mime_type,
                session_id=session,
                custom_metadata=custom_metadata,
                file_data=file_data,
            )
        except (BadRequestError, PayloadTooLargeError) as error:
            raise InputValidationError(error.detail) from error
        except NotFoundError as error:
            raise SessionNotFoundError(
                f"Session {session_id} of user {user_id!r} is not stored in app {app_name!r}."
            ) from error
        return saved["version"]

    @override
    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> types.Part | None:
        return await self._load(
            app_name=app_name,
            user_id=user_id,
            filename=filename,
            session_id=session_id,
            version=version,
            depth=_MAX_REFERENCE_DEPTH,
        )

    async def _load(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None,
        version: int | None,
        depth: int,
    ) -> types.Part | None:
        """``load_artifact``, following an ``artifact://`` reference ``depth`` more times at
        most, each within the caller's scope (ADK's ``resolve_artifact_reference``)."""
        session = _session_of(filename, session_id)
        if version is not None and version < 0:
            return None
        try:
            stored = await self.client.get_artifact(
                app_name=app_name,
                user_id=user_id,
                filename=filename,
                session_id=session,
                version=version,
            )
        except NotFoundError:
            return None
        part = _part_of(stored["part"])
        if artifact_util.is_artifact_ref(part):
            target = artifact_util.resolve_artifact_reference(
                file_uri=part.file_data.file_uri,
                app_name=app_name,
                user_id=user_id,
                session_id=session_id,
                remaining_depth=depth,
            )
            return await self._load(
                app_name=target.app_name,
                user_id=target.user_id,
                filename=target.filename,
                session_id=target.session_id,
                version=target.version,
                depth=depth - 1,
            )
        return None if part == _REWIND_MARKER else part

    @override
    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        try:
            return await self.client.list_artifact_keys(
                app_name=app_name, user_id=user_id, session_id=session_id
            )
        except NotFoundError:
            return []

    @override
    async def delete_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
    ) -> None:
        session = _session_of(filename, session_id)
        try:
            await self.client.delete_artifact(
                app_name=app_name, user_id=user_id, filename=filename, session_id=session
            )
        except NotFoundError:
            return

    @override
    async def list_versions(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
    ) -> list[int]:
        versions = await self.list_artifact_versions(
            app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
        )
        return [each.version for each in versions]

    @override
    async def list_artifact_versions(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
    ) -> list[ArtifactVersion]:
        session = _session_of(filename, session_id)
        try:
            stored = await self.client.list_artifact_versions(
                app_name=app_name, user_id=user_id, filename=filename, session_id=session
            )
        except NotFoundError:
            return []
        return [_version_of(each) for each in stored]

    @override
    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> ArtifactVersion | None:
        versions = await self.list_artifact_versions(
            app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
        )
        if not versions:
            return None
        if version is None:
            return versions[-1]
        return next((each for each in versions if each.version == version), None)
