"""``ArtifactService``: ADK's ``BaseArtifactService`` API over the artifact store."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from google.genai import types

from sessions_app.selectors import artifacts as artifact_selectors
from sessions_app.services.artifacts import artifact_delete, artifact_save
from sessions_app.types import ArtifactVersion


class ArtifactService:
    """ADK's ``BaseArtifactService`` over the Django store: same names, same arguments, same
    answers (versions from 0; ``None`` or an empty list for what is absent, another user's
    included). Errors are ``SessionStoreError`` subclasses (``ValueError``s)."""

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
        record = await sync_to_async(artifact_save)(
            app_name=app_name,
            user_id=user_id,
            filename=filename,
            artifact=artifact,
            session_id=session_id,
            custom_metadata=custom_metadata,
        )
        return record.version

    async def load_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> types.Part | None:
        return await sync_to_async(artifact_selectors.artifact_load)(
            app_name=app_name,
            user_id=user_id,
            filename=filename,
            session_id=session_id,
            version=version,
        )

    async def list_artifact_keys(
        self, *, app_name: str, user_id: str, session_id: str | None = None
    ) -> list[str]:
        return await sync_to_async(artifact_selectors.artifact_keys_list)(
            app_name=app_name, user_id=user_id, session_id=session_id
        )

    async def delete_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> None:
        await sync_to_async(artifact_delete)(
            app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
        )

    async def list_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[int]:
        versions = await self.list_artifact_versions(
            app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
        )
        return [each.version for each in versions]

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        return await sync_to_async(artifact_selectors.artifact_versions_list)(
            app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
        )

    async def get_artifact_version(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
        version: int | None = None,
    ) -> ArtifactVersion | None:
        record = await sync_to_async(artifact_selectors.artifact_record_get)(
            app_name=app_name,
            user_id=user_id,
            filename=filename,
            session_id=session_id,
            version=version,
        )
        return None if record is None else artifact_selectors.artifact_version_describe(record)
