"""Files attached to chat messages, as a user message stores them and as the model reads them.

A user message holds each attached file as ADK's artifact reference (a ``file_data`` part
whose URI is the version's ``artifact://`` address), never its bytes: the event stays small
and the file stays where deletion and export find it. Before a model call the references are
read back, for the session's own user only, into inline data with a line naming the file;
the Gemini model sends large ones through the Files API (``core.gemini``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from asgiref.sync import sync_to_async
from google.genai import types

from core.llm import ATTACHMENT_LABEL_PREFIX, AttachmentInfo
from sessions_app import selectors
from sessions_app.artifact_files import artifact_uri, artifact_uri_parse
from sessions_app.models import ArtifactRecord


def attachment_parts(records: Sequence[ArtifactRecord], *, session_id: str) -> list[types.Part]:
    """The parts a user message of the session ``session_id`` keeps for its attached files
    (files of that session): references, not bytes."""
    return [
        types.Part(
            file_data=types.FileData(
                file_uri=artifact_uri(
                    app_name=record.app_name,
                    user_id=str(record.user_id),
                    session_id=session_id if record.session_id else None,
                    filename=record.filename,
                    version=record.version,
                ),
                mime_type=record.mime_type,
                display_name=record.filename,
            )
        )
        for record in records
    ]


def attachments_metadata(records: Sequence[ArtifactRecord]) -> list[dict[str, Any]]:
    """What the chat shows of each attached file (custom_metadata ``attachments``)."""
    return [
        {
            "id": str(record.pk),
            "filename": record.filename,
            "version": record.version,
            "mime_type": record.mime_type,
            "size": record.size,
        }
        for record in records
    ]


def _is_reference(part: types.Part) -> bool:
    return bool(part.file_data and (part.file_data.file_uri or "").startswith("artifact://"))


def _part_read(part: types.Part, *, app_name: str, user_id: str) -> tuple[list[types.Part], Any]:
    """The parts standing for one reference, and its ``AttachmentInfo`` (None if unreadable)."""
    parsed = artifact_uri_parse(part.file_data.file_uri)
    name = part.file_data.display_name or (parsed["filename"] if parsed else "a file")
    record = selectors.artifact_referenced_get(
        uri=part.file_data.file_uri, app_name=app_name, user_id=user_id
    )
    if record is None:
        return [types.Part(text=f"{ATTACHMENT_LABEL_PREFIX}{name}: no longer available]")], None
    label = f"{ATTACHMENT_LABEL_PREFIX}{record.filename}: {record.mime_type}, {record.size} bytes]"
    if not selectors.artifact_model_readable(record):
        return [types.Part(text=label)], None
    data = types.Part(
        inline_data=types.Blob(data=selectors.artifact_bytes(record), mime_type=record.mime_type)
    )
    return [types.Part(text=label), data], AttachmentInfo(
        filename=record.filename, mime_type=record.mime_type, size=record.size
    )


def _contents_read(
    contents: list[types.Content], *, app_name: str, user_id: str
) -> tuple[list[types.Content], list[AttachmentInfo]]:
    read: list[types.Content] = []
    latest: list[AttachmentInfo] = []
    for content in contents:
        if not any(_is_reference(part) for part in content.parts or ()):
            read.append(content)
            continue
        parts: list[types.Part] = []
        infos: list[AttachmentInfo] = []
        for part in content.parts or ():
            if not _is_reference(part):
                parts.append(part)
                continue
            standing, info = _part_read(part, app_name=app_name, user_id=user_id)
            parts.extend(standing)
            if info is not None:
                infos.append(info)
        read.append(types.Content(role=content.role, parts=parts))
        if content is contents[-1]:
            latest = infos
    return read, latest


async def contents_attachments_read(
    contents: list[types.Content], *, app_name: str, user_id: str
) -> tuple[list[types.Content], list[AttachmentInfo]]:
    """The contents with every attached file's reference replaced by its bytes, and the files
    of the newest content. A reference to another user's file, or to one since deleted, reads
    as a line saying it is not available. Contents without references cost nothing."""
    if not any(_is_reference(part) for content in contents for part in content.parts or ()):
        return contents, []
    return await sync_to_async(_contents_read)(contents, app_name=app_name, user_id=user_id)
