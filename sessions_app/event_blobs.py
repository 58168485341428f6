"""The large parts of events, kept in the ``artifacts`` storage beside the event's row.

ADK stores events of any size: a user's photo or PDF sent inline, a tool returning a long
document. Such a part (a file's bytes in ``inline_data``, a tool result's ``response`` in
``function_response``) larger than ``EVENT_PART_INLINE_MAX_BYTES`` is written to the storage
as a file of its own, an ``EventBlob`` row records it under the session, and the event's
stored content keeps the part without that field and with a reference in its place
(``BLOB_KEY``). Every read of the event puts the field back (``content_blobs_inlined``), so
no reader sees the difference.

``BLOB_KEY`` is not a field of genai's ``Part``, which refuses unknown fields: no event a
client sends can carry a reference of its own making to another file.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.files.base import ContentFile
from google.genai import types

from sessions_app.artifact_files import artifact_file_delete, artifact_storage
from sessions_app.errors import SessionNotFoundError
from sessions_app.models import EventBlob, SessionRecord

logger = logging.getLogger(__name__)

BLOB_KEY = "blob_ref"
BLOB_FOLDER = "event-blobs"
INLINE_DATA = "inline_data"
FUNCTION_RESPONSE = "function_response"


@dataclass(frozen=True)
class PendingBlob:
    """A part's large field, to be written as ``storage_name``."""

    id: uuid.UUID
    storage_name: str
    data: bytes


def _blob_new(*, user_pk: int, data: bytes) -> PendingBlob:
    blob_id = uuid.uuid4()
    return PendingBlob(id=blob_id, storage_name=f"{BLOB_FOLDER}/{user_pk}/{blob_id.hex}", data=data)


def _blob_reference(blob: PendingBlob, *, field: str) -> dict[str, Any]:
    """What the stored part holds in place of the field: the file's name in the storage
    (a read needs no query, which an event loop could not make), the field, the size."""
    return {"name": blob.storage_name, "field": field, "size": len(blob.data)}


def content_blobs_split(
    *, stored: dict[str, Any] | None, content: types.Content | None, user_pk: int
) -> tuple[dict[str, Any] | None, list[PendingBlob]]:
    """``stored`` (the JSON of ``content``) with each part's field past
    ``EVENT_PART_INLINE_MAX_BYTES`` taken out and named by a reference, and the blobs taken.

    A file's bytes are kept as they are (not base64), a tool result as its JSON; nothing is
    written here."""
    if stored is None or content is None or not content.parts:
        return stored, []
    limit = settings.EVENT_PART_INLINE_MAX_BYTES
    blobs: list[PendingBlob] = []
    parts = []
    for part, part_json in zip(content.parts, stored.get("parts") or [], strict=True):
        inline = part.inline_data
        response = part.function_response
        if inline is not None and inline.data is not None and len(inline.data) > limit:
            blob = _blob_new(user_pk=user_pk, data=inline.data)
            kept = {key: value for key, value in part_json[INLINE_DATA].items() if key != "data"}
            part_json = {**part_json, INLINE_DATA: kept}
            part_json[BLOB_KEY] = _blob_reference(blob, field=INLINE_DATA)
            blobs.append(blob)
        elif response is not None and response.response is not None:
            encoded = json.dumps(
                part_json[FUNCTION_RESPONSE]["response"], ensure_ascii=False, allow_nan=False
            ).encode()
            if len(encoded) > limit:
                blob = _blob_new(user_pk=user_pk, data=encoded)
                kept = {
                    key: value
                    for key, value in part_json[FUNCTION_RESPONSE].items()
                    if key != "response"
                }
                part_json = {**part_json, FUNCTION_RESPONSE: kept}
                part_json[BLOB_KEY] = _blob_reference(blob, field=FUNCTION_RESPONSE)
                blobs.append(blob)
        parts.append(part_json)
    if not blobs:
        return stored, []
    return {**stored, "parts": parts}, blobs


def event_blobs_store(
    *, session_id: str, app_name: str, user_pk: int, blobs: list[PendingBlob]
) -> list[uuid.UUID]:
    """Write ``blobs`` and their rows under the user's session, all or none; their ids.

    Written before the event's row, so an event never names a missing file; should the
    event then not be stored, the caller discards them (``event_blobs_discard``).
    Raises SessionNotFoundError when the user has no such session in the app."""
    session_key = (
        SessionRecord.objects.filter(session_id=session_id, app_name=app_name, user_id=user_pk)
        .values_list("key", flat=True)
        .first()
    )
    if session_key is None:
        raise SessionNotFoundError(f"Session {session_id!r} not found in app {app_name!r}.")
    storage = artifact_storage()
    written: list[str] = []
    try:
        rows = []
        for blob in blobs:
            name = storage.save(blob.storage_name, ContentFile(blob.data))
            written.append(name)
            if name != blob.storage_name:
                raise RuntimeError(f"the storage wrote {name!r}, not {blob.storage_name!r}")
            rows.append(
                EventBlob(
                    id=blob.id,
                    session_id=session_key,
                    storage_name=name,
                    size=len(blob.data),
                    sha256=hashlib.sha256(blob.data).hexdigest(),
                    create_time=time.time(),
                )
            )
        EventBlob.objects.bulk_create(rows)
    except BaseException:
        for name in written:
            artifact_file_delete(name)
        raise
    return [blob.id for blob in blobs]


def event_blobs_discard(blob_ids: list[uuid.UUID]) -> None:
    """Delete the blobs of an event that was not stored; their files go once that commits."""
    for blob in EventBlob.objects.filter(pk__in=blob_ids):
        blob.delete()


def _blob_bytes(name: str) -> bytes | None:
    """The bytes of a stored blob; None (logged) when its file is gone, so that one lost
    file leaves one part empty rather than the whole session unreadable."""
    try:
        with artifact_storage().open(name, "rb") as handle:
            return handle.read()
    except OSError:
        logger.exception("could not read event blob %s", name)
        return None


def content_has_blobs(stored: dict[str, Any] | None) -> bool:
    return bool(stored) and any(BLOB_KEY in part for part in stored.get("parts") or ())


def content_blobs_inlined(stored: dict[str, Any], *, as_json: bool = False) -> dict[str, Any]:
    """``stored`` with each reference replaced by the field it stands for, read back from
    the storage: the content as it was sent. A file's bytes come as ``bytes`` (for
    ``types.Content.model_validate``) or, with ``as_json``, base64 text as genai's JSON of a
    part holds it (URL-safe), the same as a small part's in the row."""
    parts = []
    for part_json in stored.get("parts") or ():
        reference = part_json.get(BLOB_KEY)
        if reference is None:
            parts.append(part_json)
            continue
        part_json = {key: value for key, value in part_json.items() if key != BLOB_KEY}
        data = _blob_bytes(reference["name"])
        field = reference.get("field")
        if field == INLINE_DATA:
            value: Any = data
            if as_json and data is not None:
                value = base64.urlsafe_b64encode(data).decode("ascii")
            part_json[INLINE_DATA] = {**part_json.get(INLINE_DATA, {}), "data": value}
        elif field == FUNCTION_RESPONSE:
            response = None if data is None else json.loads(data)
            part_json[FUNCTION_RESPONSE] = {
                **part_json.get(FUNCTION_RESPONSE, {}),
                "response": response,
            }
        parts.append(part_json)
    return {**stored, "parts": parts}


def blob_files_orphaned(*, names: list[str]) -> set[str]:
    """Of the storage names given (files of ``BLOB_FOLDER``), those no blob row names."""
    rows = EventBlob.objects.filter(storage_name__in=names)
    return set(names) - set(rows.values_list("storage_name", flat=True))
