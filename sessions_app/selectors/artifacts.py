"""Reads of artifacts, with ADK's semantics: a ``user:`` filename is the user's (any of their
sessions sees it), any other belongs to one session; versions are numbered from 0 and the
newest is read when none is asked. Every read takes the owner: another user's artifact reads
as absent."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q, QuerySet
from google.genai import types

from access_app.models import AccessScope
from access_app.selectors import grant_active_exists
from sessions_app.app_policy import app_policy_get
from sessions_app.artifact_files import (
    artifact_filename_problem,
    artifact_is_user_scoped,
    artifact_storage,
    artifact_uri,
    artifact_uri_parse,
)
from sessions_app.errors import InvalidArtifactError
from sessions_app.models import ArtifactRecord
from sessions_app.selectors.sessions import user_pk_from_id
from sessions_app.types import ArtifactVersion
from sessions_app.uploads import MODEL_READABLE_TYPES, pdf_text


def artifact_scope_filter(
    *, app_name: str, user_id: str, filename: str, session_id: str | None
) -> dict[str, Any] | None:
    """The lookup of an artifact's versions, None when ``user_id`` names no user.

    The name is looked up as the app stores it (its PII redaction, ``filename_prepare``), so
    a file saved under a name with an e-mail in it is found again by that name, and every
    write of an artifact takes its name from here.

    Raises ``InvalidArtifactError`` for a malformed filename, or a session filename without
    a session (ADK refuses it the same way).
    """
    problem = artifact_filename_problem(filename)
    if problem:
        raise InvalidArtifactError(problem)
    filename = app_policy_get().filename_prepare(app_name=app_name, filename=filename)
    user_pk = user_pk_from_id(user_id)
    if user_pk is None:
        return None
    scope: dict[str, Any] = {"user_id": user_pk, "app_name": app_name, "filename": filename}
    if artifact_is_user_scoped(filename):
        scope["session__isnull"] = True
    elif session_id is None:
        raise InvalidArtifactError("Session ID must be provided for session-scoped artifacts.")
    else:
        scope["session__session_id"] = session_id
    return scope


def artifact_records_list(
    *, app_name: str, user_id: str, filename: str, session_id: str | None = None
) -> QuerySet[ArtifactRecord]:
    """The rows of every version of ``filename``, oldest first (none for an unknown user)."""
    scope = artifact_scope_filter(
        app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
    )
    if scope is None:
        return ArtifactRecord.objects.none()
    return ArtifactRecord.objects.filter(**scope).select_related("session").order_by("version")


def artifact_record_get(
    *,
    app_name: str,
    user_id: str,
    filename: str,
    session_id: str | None = None,
    version: int | None = None,
) -> ArtifactRecord | None:
    """The row of one version (the newest when ``version`` is None), or None."""
    versions = artifact_records_list(
        app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
    )
    if version is None:
        return versions.last()
    return versions.filter(version=version).first()


def artifact_bytes(record: ArtifactRecord) -> bytes:
    """The stored bytes of one version."""
    with artifact_storage().open(record.storage_name, "rb") as handle:
        return handle.read()


READABLE_TEXT_TYPES = ("text/plain", "text/markdown")


def artifact_text(record: ArtifactRecord) -> str:
    """What a model reads of one version as words: a text file's text, a PDF's text layer;
    "" for an image (nothing of it is text)."""
    if record.mime_type == "application/pdf":
        return pdf_text(artifact_bytes(record))
    if record.is_text or record.mime_type in READABLE_TEXT_TYPES:
        return artifact_bytes(record).decode("utf-8", errors="replace")
    return ""


def artifact_part(record: ArtifactRecord) -> types.Part:
    """One version as the ``types.Part`` it was saved as (text, ``file_data``, inline data)."""
    data = artifact_bytes(record)
    if record.is_text:
        return types.Part(text=data.decode("utf-8"))
    if record.is_file_data:
        return types.Part(file_data=types.FileData.model_validate_json(data))
    return types.Part(inline_data=types.Blob(data=data, mime_type=record.mime_type))


def artifact_model_readable(record: ArtifactRecord) -> bool:
    """Whether a model may be given this version's bytes: a file of a type models read (an
    attachment's types), not a ``file_data`` reference."""
    return not record.is_file_data and record.mime_type in MODEL_READABLE_TYPES


def artifact_load(
    *,
    app_name: str,
    user_id: str,
    filename: str,
    session_id: str | None = None,
    version: int | None = None,
) -> types.Part | None:
    """ADK's ``load_artifact``: one version as a part, None if there is none."""
    record = artifact_record_get(
        app_name=app_name,
        user_id=user_id,
        filename=filename,
        session_id=session_id,
        version=version,
    )
    return None if record is None else artifact_part(record)


def artifact_keys_list(*, app_name: str, user_id: str, session_id: str | None = None) -> list[str]:
    """ADK's ``list_artifact_keys``: the session's filenames and the user's (``user:``), sorted;
    only the user's without a session."""
    user_pk = user_pk_from_id(user_id)
    if user_pk is None:
        return []
    scope = Q(session__isnull=True)
    if session_id is not None:
        scope |= Q(session__session_id=session_id)
    names = ArtifactRecord.objects.filter(scope, user_id=user_pk, app_name=app_name)
    return sorted(set(names.values_list("filename", flat=True)))


def artifact_version_describe(record: ArtifactRecord) -> ArtifactVersion:
    """A stored version as ADK's ``ArtifactVersion``."""
    return ArtifactVersion(
        version=record.version,
        canonical_uri=artifact_uri(
            app_name=record.app_name,
            user_id=str(record.user_id),
            session_id=record.session.session_id if record.session_id else None,
            filename=record.filename,
            version=record.version,
        ),
        custom_metadata=record.custom_metadata,
        create_time=record.create_time,
        mime_type=record.mime_type or None,
    )


def artifact_versions_list(
    *, app_name: str, user_id: str, filename: str, session_id: str | None = None
) -> list[ArtifactVersion]:
    """ADK's ``list_artifact_versions``: every version, oldest first."""
    versions = artifact_records_list(
        app_name=app_name, user_id=user_id, filename=filename, session_id=session_id
    )
    return [artifact_version_describe(record) for record in versions]


def artifact_owned_get(*, user_pk: int, artifact_id: Any) -> ArtifactRecord | None:
    """The user's artifact version with this public id; None for any other id, malformed,
    unknown or another user's alike (a download link of someone else reads as absent)."""
    try:
        artifact_uuid = uuid.UUID(str(artifact_id))
    except ValueError:
        return None
    return ArtifactRecord.objects.filter(pk=artifact_uuid, user_id=user_pk).first()


def artifact_referenced_get(*, uri: str, app_name: str, user_id: str) -> ArtifactRecord | None:
    """The version an ``artifact://`` address names, if it is ``user_id``'s in ``app_name``;
    None for another user's or app's address, a malformed one, or a version since deleted."""
    parsed = artifact_uri_parse(uri)
    if parsed is None or parsed["app_name"] != app_name or parsed["user_id"] != user_id:
        return None
    try:
        return artifact_record_get(
            app_name=app_name,
            user_id=user_id,
            filename=parsed["filename"],
            session_id=parsed["session_id"],
            version=parsed["version"],
        )
    except InvalidArtifactError:
        return None


def artifact_staff_scope(record: ArtifactRecord) -> str:
    """The grant a staff account needs from the owner to open this file: a chat's attachment
    is part of the owner's conversations, a file of the user (``user:``, such as an image a
    memory keeps) part of their memories."""
    return AccessScope.CONVERSATIONS if record.session_id else AccessScope.MEMORIES


def staff_may_open_files(*, staff: Any, owner_pk: int, scope: str) -> bool:
    """Whether ``staff`` may open user ``owner_pk``'s files of ``scope``: an active staff
    account holding an active grant of that scope from the owner. A role's global permission
    is not enough: files are opened only with the owner's say-so."""
    if not (staff.is_authenticated and staff.is_active and staff.is_staff):
        return False
    return grant_active_exists(grantee_pk=staff.pk, owner_pk=owner_pk, scope=scope)


def artifact_staff_may_read(*, staff: Any, record: ArtifactRecord) -> bool:
    """Whether ``staff`` (not the owner) may open the file (:func:`staff_may_open_files` with
    the grant :func:`artifact_staff_scope` names)."""
    return staff_may_open_files(
        staff=staff, owner_pk=record.user_id, scope=artifact_staff_scope(record)
    )


def artifact_readable_get(*, reader: Any, artifact_id: Any) -> ArtifactRecord | None:
    """The artifact version with this public id if ``reader`` may open it: its owner always,
    staff with the owner's grant (:func:`artifact_staff_may_read`; the caller audits that
    read); None for anyone else and for malformed or unknown ids alike."""
    owned = artifact_owned_get(user_pk=reader.pk, artifact_id=artifact_id)
    if owned is not None or not getattr(reader, "is_staff", False):
        return owned
    try:
        record = ArtifactRecord.objects.filter(pk=uuid.UUID(str(artifact_id))).first()
    except ValueError:
        return None
    if record is not None and artifact_staff_may_read(staff=reader, record=record):
        return record
    return None


def artifacts_of_user(*, user_pk: int) -> QuerySet[ArtifactRecord]:
    """Every artifact version the user has, in a stable order (exports)."""
    return (
        ArtifactRecord.objects.filter(user_id=user_pk)
        .select_related("session")
        .order_by("app_name", "session_id", "filename", "version")
    )


def session_artifacts_get(
    *, user_pk: int, session_key: str, artifact_ids: list[str]
) -> list[ArtifactRecord] | None:
    """The versions with these ids, in the order given, if every one is a file of the
    session row ``session_key`` of the user; None when any is not (unknown, malformed,
    another session's or another user's alike)."""
    try:
        wanted = [uuid.UUID(str(each)) for each in artifact_ids]
    except ValueError:
        return None
    found = {
        record.pk: record
        for record in ArtifactRecord.objects.filter(
            pk__in=wanted, user_id=user_pk, session_id=session_key
        ).select_related("session")
    }
    if len(set(wanted)) != len(wanted) or set(found) != set(wanted):
        return None
    return [found[each] for each in wanted]
