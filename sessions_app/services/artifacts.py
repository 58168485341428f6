"""Writes of artifacts with ADK's semantics: each save of a filename adds a version (from 0),
deleting a filename removes all its versions.

A save writes the file first and then its row: a file whose row could not be written is
removed at once, and a row never points at a missing file. Rows whose deletion commits have
their files removed right after (``sessions_app.artifact_files``).
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from typing import Any, NamedTuple

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.db.models import Max
from google.genai import types

from sessions_app.artifact_files import (
    MAX_FILENAME_CHARS,
    USER_PREFIX,
    artifact_file_delete,
    artifact_storage,
)
from sessions_app.errors import InvalidArtifactError, SessionNotFoundError
from sessions_app.event_blobs import BLOB_FOLDER, blob_files_orphaned
from sessions_app.models import ArtifactRecord, SessionRecord
from sessions_app.selectors.artifacts import artifact_part, artifact_scope_filter
from sessions_app.uploads import CheckedUpload

# Concurrent saves of one filename race for the next version number; the loser of a race
# takes the one after (the unique constraint decides), a few times at most.
_VERSION_ATTEMPTS = 5


class _Payload(NamedTuple):
    data: bytes
    mime_type: str
    is_text: bool
    is_file_data: bool


def _part_payload(artifact: types.Part | dict[str, Any]) -> _Payload:
    """What a part stores (a dict is read as ADK's ``ensure_part`` does): inline data's bytes,
    a text's UTF-8, or a ``file_data`` part's JSON (its URI, type and name, kept as given);
    any other part is refused, as ADK's services refuse it."""
    try:
        part = types.Part.model_validate(artifact) if isinstance(artifact, dict) else artifact
    except ValueError as exc:
        raise InvalidArtifactError(f"Not a part: {exc}") from exc
    if part.inline_data is not None:
        mime_type = part.inline_data.mime_type or "application/octet-stream"
        return _Payload(part.inline_data.data or b"", mime_type, False, False)
    if part.text is not None:
        return _Payload(part.text.encode("utf-8"), "text/plain", True, False)
    if part.file_data is not None:
        described = part.file_data.model_dump(mode="json", exclude_none=True)
        data = json.dumps(described, ensure_ascii=False).encode()
        return _Payload(data, part.file_data.mime_type or "", False, True)
    raise InvalidArtifactError("Not supported artifact type.")


def artifact_save(
    *,
    app_name: str,
    user_id: str,
    filename: str,
    artifact: types.Part | dict[str, Any],
    session_id: str | None = None,
    custom_metadata: dict[str, Any] | None = None,
) -> ArtifactRecord:
    """Store a new version of ``filename`` (version 0 for a new name) and return its row.

    Raises ``InvalidArtifactError`` for a bad name, scope or part, and
    ``SessionNotFoundError`` when the session is not the user's in this app.
    """
    scope = artifact_scope_filter(
        app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
    )
    if scope is None:
        raise SessionNotFoundError("No such user.")
    payload = _part_payload(artifact)
    if session_id is not None and "session__session_id" in scope:
        key = (
            SessionRecord.objects.filter(
                session_id=scope.pop("session__session_id"),
                user_id=scope["user_id"],
                app_name=app_name,
            )
            .values_list("key", flat=True)
            .first()
        )
        if key is None:
            raise SessionNotFoundError(f"Session {session_id!r} not found in app {app_name!r}.")
        scope["session_id"] = key
    storage_name = artifact_storage().save(
        f"{scope['user_id']}/{uuid.uuid4().hex}", ContentFile(payload.data)
    )
    try:
        return _record_insert(
            scope=scope,
            storage_name=storage_name,
            fields={
                "mime_type": payload.mime_type[:127],
                "size": len(payload.data),
                "sha256": hashlib.sha256(payload.data).hexdigest(),
                "is_text": payload.is_text,
                "is_file_data": payload.is_file_data,
                "custom_metadata": dict(custom_metadata or {}),
            },
        )
    except BaseException:
        artifact_file_delete(storage_name)
        raise


def _record_insert(
    *, scope: dict[str, Any], storage_name: str, fields: dict[str, Any]
) -> ArtifactRecord:
    lookup = {key: value for key, value in scope.items() if key != "session__isnull"}
    attempts = 0
    while True:
        latest = ArtifactRecord.objects.filter(**scope).aggregate(latest=Max("version"))["latest"]
        try:
            with transaction.atomic():
                return ArtifactRecord.objects.create(
                    id=uuid.uuid4(),
                    version=0 if latest is None else latest + 1,
                    storage_name=storage_name,
                    create_time=time.time(),
                    **lookup,
                    **fields,
                )
        except IntegrityError:
            attempts += 1
            if attempts == _VERSION_ATTEMPTS:
                raise


def artifact_delete(
    *, app_name: str, user_id: str, filename: str, session_id: str | None = None
) -> int:
    """ADK's ``delete_artifact``: every version of ``filename`` goes, with its files once the
    deletion commits. Returns how many versions went (0 when there were none)."""
    scope = artifact_scope_filter(
        app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
    )
    if scope is None:
        return 0
    deleted, _ = ArtifactRecord.objects.filter(**scope).delete()
    return deleted


def artifact_user_copy(*, record: ArtifactRecord) -> ArtifactRecord:
    """A new version of the user's own artifact ``user:<the file's name>`` holding the bytes
    of ``record``, a file of one of their sessions: a copy that outlives the session (the
    session's file goes with it). Its metadata names the version it was copied from."""
    filename = (USER_PREFIX + record.filename)[:MAX_FILENAME_CHARS]
    return artifact_save(
        app_name=record.app_name,
        user_id=str(record.user_id),
        filename=filename,
        artifact=artifact_part(record),
        custom_metadata={"copied_from": str(record.pk)},
    )


def artifact_checked_save(
    *,
    app_name: str,
    user_id: str,
    filename: str,
    part: types.Part,
    session_id: str | None = None,
    custom_metadata: dict[str, Any] | None = None,
) -> ArtifactRecord:
    """An artifact an app's agent saves through the service API, stored as ``artifact_save``
    stores it: any part ADK's services keep (inline data of any type, text, ``file_data``),
    byte for byte, up to ``ATTACHMENT_MAX_BYTES``. Its content is not judged: what reaches a
    browser is made safe where it is served (``artifacts_api.artifact_file_response``), and
    what reaches a model is limited to the types a model reads.

    Raises ``InvalidArtifactError`` saying why a part is refused, ``SessionNotFoundError`` as
    ``artifact_save`` does.
    """
    size = len(_part_payload(part).data)
    if size > settings.ATTACHMENT_MAX_BYTES:
        raise InvalidArtifactError(
            f"{filename} is {size} bytes; a file is at most {settings.ATTACHMENT_MAX_BYTES} "
            "bytes (ATTACHMENT_MAX_BYTES)."
        )
    return artifact_save(
        app_name=app_name,
        user_id=user_id,
        filename=filename,
        artifact=part,
        session_id=session_id,
        custom_metadata=custom_metadata,
    )


def attachments_store(
    *, app_name: str, user_id: str, session_id: str, uploads: list[CheckedUpload]
) -> list[ArtifactRecord]:
    """Store checked uploads as artifacts of the session, all of them or none: should one
    fail, the rows of the others roll back and their files are removed."""
    records: list[ArtifactRecord] = []
    try:
        with transaction.atomic():
            for upload in uploads:
                records.append(
                    artifact_save(
                        app_name=app_name,
                        user_id=user_id,
                        session_id=session_id,
                        filename=upload.filename,
                        artifact=types.Part(
                            inline_data=types.Blob(data=upload.data, mime_type=upload.mime_type)
                        ),
                    )
                )
    except BaseException:
        for record in records:
            artifact_file_delete(record.storage_name)
        raise
    return records


ORPHAN_FILE_MIN_AGE_SECONDS = 24 * 3600


def artifact_files_orphaned_delete(*, now: float | None = None) -> int:
    """Delete the stored files no artifact row names, nor event blob row (``event_blobs``),
    older than a day; returns how many.

    A file is written before its row, and a row can roll back with a transaction around it (a
    memory job's copy of a kept file, when the job's write fails) and take no file with it:
    such files are found here, by walking the storage one user's folder at a time. A file of
    a day or less may belong to a transaction still open, so it is left for a later run.
    Running it twice, or beside uploads, deletes nothing that is used.
    """
    storage = artifact_storage()
    cutoff = (time.time() if now is None else now) - ORPHAN_FILE_MIN_AGE_SECONDS
    deleted = 0
    try:
        folders, _ = storage.listdir("")
    except FileNotFoundError:  # a local storage nothing was ever written to
        return 0
    for folder in folders:
        if folder == BLOB_FOLDER:
            for user_folder in storage.listdir(BLOB_FOLDER)[0]:
                path = f"{BLOB_FOLDER}/{user_folder}"
                names = [f"{path}/{name}" for name in storage.listdir(path)[1]]
                deleted += _older_deleted(blob_files_orphaned(names=names), cutoff=cutoff)
            continue
        names = [f"{folder}/{name}" for name in storage.listdir(folder)[1]]
        used = set(
            ArtifactRecord.objects.filter(storage_name__in=names).values_list(
                "storage_name", flat=True
            )
        )
        deleted += _older_deleted(set(names) - used, cutoff=cutoff)
    return deleted


def _older_deleted(names: set[str], *, cutoff: float) -> int:
    """Delete the files named that were last written before ``cutoff``; how many went."""
    storage = artifact_storage()
    deleted = 0
    for name in sorted(names):
        if storage.get_modified_time(name).timestamp() < cutoff:
            artifact_file_delete(name)
            deleted += 1
    return deleted
