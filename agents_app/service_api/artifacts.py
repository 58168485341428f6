"""Artifacts of an app's end users: ADK's ``BaseArtifactService`` over HTTP.

The files are the ones the chat shows: an end user's session files and their ``user:`` files,
each save a new version from 0. A save is any part ADK's services keep (inline data of any
type, text, ``file_data``), stored byte for byte and sent as multipart; the same routes exist
under a session (its files and the user's) and under the end user alone (``user:`` files only).
"""

from __future__ import annotations

import base64
import json
import re

from django.conf import settings
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_view,
)
from google.genai import types
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from agents_app.service_api.base import APP_NAME, NO_KEY, NO_SCOPE, UNKNOWN, USER_ID, ServiceAPIView
from core.api import BAD_REQUEST, TOO_LARGE, BadRequest, PayloadTooLarge, request_data_validated
from core.sizes import size_words
from sessions_app import selectors, services
from sessions_app.artifact_files import artifact_filename_problem, artifact_is_user_scoped
from sessions_app.artifacts_api import AttachmentParser
from sessions_app.models import ArtifactRecord
from sessions_app.selectors.artifacts import artifact_version_describe

_MULTIPART_OVERHEAD = 64 * 1024

SESSION_ID = OpenApiParameter(
    "session_id",
    str,
    OpenApiParameter.PATH,
    description="The session (on the routes under `sessions/<session_id>/`).",
)
FILENAME = OpenApiParameter(
    "filename",
    str,
    OpenApiParameter.PATH,
    description="Any name of 1-255 characters without control characters, `/` included "
    "(percent-encoded twice in the path: `reports%252Fq1.pdf`); `user:` before it makes it "
    "the end user's file (every session of theirs sees it) rather than the session's.",
)
NO_SESSION = OpenApiParameter("session_id", str, OpenApiParameter.PATH, exclude=True)
VERSION = OpenApiParameter(
    "version", str, OpenApiParameter.PATH, description="A version number, or `latest`."
)
READ_ERRORS = {401: NO_KEY, 403: NO_SCOPE, 404: UNKNOWN}


class ArtifactVersionSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="The version's public id (the chat's download links).")
    version = serializers.IntegerField(help_text="0 for the first save of a filename.")
    canonical_uri = serializers.CharField(help_text="ADK's `artifact://` address.")
    custom_metadata = serializers.DictField()
    create_time = serializers.FloatField(help_text="Seconds since the epoch.")
    mime_type = serializers.CharField()
    size = serializers.IntegerField(help_text="In bytes.")


class ArtifactVersionsSerializer(serializers.Serializer):
    versions = ArtifactVersionSerializer(many=True)


class ArtifactContentSerializer(ArtifactVersionSerializer):
    part = serializers.DictField(
        help_text='The saved part: `{"text": ...}`, `{"inline_data": {"mime_type": ..., '
        '"data": base64}}` or `{"file_data": {"file_uri": ..., "mime_type": ...}}`.'
    )


class ArtifactSaveSerializer(serializers.Serializer):
    filename = serializers.CharField(max_length=255, trim_whitespace=False)
    file = serializers.FileField(
        allow_empty_file=True,
        required=False,
        help_text="The bytes, with the part's MIME type as this field's Content-Type "
        "(without `file_data`).",
    )
    text = serializers.BooleanField(
        default=False, help_text="The part is text (UTF-8 bytes), not inline data."
    )
    mime_type = serializers.CharField(
        required=False,
        max_length=127,
        help_text="The part's MIME type exactly as given, parameters included (else the "
        "file's Content-Type, which multipart parsing strips of its parameters).",
    )
    file_data = serializers.CharField(
        required=False,
        help_text='A `file_data` part instead of `file`: its JSON, `{"file_uri": ..., '
        '"mime_type": ..., "display_name": ...}`.',
    )
    custom_metadata = serializers.CharField(
        required=False, default="{}", help_text="A JSON object kept with the version."
    )

    def validate_file_data(self, value: str) -> types.FileData:
        try:
            return types.FileData.model_validate_json(value)
        except ValueError:
            raise serializers.ValidationError(
                "A JSON object of file_data's fields (file_uri, mime_type, display_name)."
            ) from None

    def validate(self, attrs: dict) -> dict:
        if ("file" in attrs) == ("file_data" in attrs):
            raise serializers.ValidationError("Send either `file` or `file_data`.")
        return attrs

    def validate_custom_metadata(self, value: str) -> dict:
        try:
            parsed = json.loads(value)
        except ValueError:
            raise serializers.ValidationError("Not JSON.") from None
        if not isinstance(parsed, dict):
            raise serializers.ValidationError("A JSON object.")
        return parsed


def _version_json(record: ArtifactRecord) -> dict:
    described = artifact_version_describe(record).model_dump(mode="json")
    return {"id": str(record.pk), **described, "size": record.size}


def _part_json(record: ArtifactRecord) -> dict:
    data = selectors.artifact_bytes(record)
    if record.is_text:
        return {"text": data.decode("utf-8")}
    if record.is_file_data:
        return {"file_data": json.loads(data)}
    return {"inline_data": {"mime_type": record.mime_type, "data": base64.b64encode(data).decode()}}


def _part_sent(data: dict) -> types.Part:
    """The part a save sent: its ``file_data``, or its file as text or inline data."""
    if "file_data" in data:
        return types.Part(file_data=data["file_data"])
    upload = data["file"]
    content = upload.read()
    if data["text"]:
        try:
            return types.Part(text=content.decode("utf-8"))
        except UnicodeDecodeError:
            raise BadRequest("A text part is sent as UTF-8.") from None
    mime_type = data.get("mime_type") or upload.content_type
    return types.Part(inline_data=types.Blob(data=content, mime_type=mime_type))


class _EndUserArtifactsView(ServiceAPIView):
    """The end user's account id for a read (None for an unknown end user: nothing to read)
    and for a write (the end user created on first use, as a session write creates them)."""

    def owner_id(self, user_id: str, *, create: bool = False) -> str | None:
        end_user = self.end_user(user_id, create=create)
        return None if end_user is None else str(end_user.user_id)

    def file_named(self, filename: str, session_id: str | None) -> str:
        """``filename`` if a file of this route may have it; else 404, as for a file that does
        not exist (a name that is no filename, or a session's file named without a session)."""
        if artifact_filename_problem(filename) or (
            session_id is None and not artifact_is_user_scoped(filename)
        ):
            raise NotFound("No such file.")
        return filename


class ArtifactListView(_EndUserArtifactsView):
    parser_classes = [AttachmentParser]

    @extend_schema(
        operation_id="v1_artifacts_list",
        summary="The filenames of the session and of the end user (ADK's list_artifact_keys)",
        description="The names of the session's files and of the end user's `user:` files, "
        "sorted: what the agent may load in this session.",
        parameters=[APP_NAME, USER_ID, SESSION_ID],
        responses={
            200: OpenApiResponse(description='{"filenames": ["notes.md", "user:photo.png"]}'),
            **READ_ERRORS,
        },
    )
    def get(self, request: Request, app_name: str, user_id: str, session_id: str | None = None):
        owner = self.owner_id(user_id)
        filenames = (
            []
            if owner is None
            else selectors.artifact_keys_list(
                app_name=app_name, user_id=owner, session_id=session_id
            )
        )
        return Response({"filenames": filenames})

    @extend_schema(
        operation_id="v1_artifacts_create",
        summary="Save a new version of a file (ADK's save_artifact; multipart)",
        description="Any part ADK's services keep, stored byte for byte: `file` with its "
        "MIME type (any type; `text=true` for a text part), or `file_data` (a URI, kept as "
        "given), at most `ATTACHMENT_MAX_BYTES`. A refusal is a 400 that says why. A name "
        "without `user:` needs the session route. Downloaded from the chat, only images show "
        "in the browser; any other type is sent as an attachment, never run.",
        parameters=[APP_NAME, USER_ID, SESSION_ID],
        request={"multipart/form-data": ArtifactSaveSerializer},
        responses={201: ArtifactVersionSerializer, 400: BAD_REQUEST, **READ_ERRORS, 413: TOO_LARGE},
    )
    def post(self, request: Request, app_name: str, user_id: str, session_id: str | None = None):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > settings.ATTACHMENT_MAX_BYTES + _MULTIPART_OVERHEAD:
            raise PayloadTooLarge(
                f"The upload is {size_words(length)}; a file is at most "
                f"{size_words(settings.ATTACHMENT_MAX_BYTES)} (ATTACHMENT_MAX_BYTES)."
            )
        data = request_data_validated(ArtifactSaveSerializer, request.data)
        part = _part_sent(data)
        owner = self.owner_id(user_id, create=session_id is None)
        if owner is None:
            raise NotFound("No such session.")
        record = services.artifact_checked_save(
            app_name=app_name,
            user_id=owner,
            filename=data["filename"],
            part=part,
            session_id=session_id,
            custom_metadata=data["custom_metadata"],
        )
        return Response(_version_json(record), status=status.HTTP_201_CREATED)


class ArtifactDetailView(_EndUserArtifactsView):
    @extend_schema(
        operation_id="v1_artifacts_versions_list",
        summary="Every version of a file, oldest first (ADK's list_artifact_versions)",
        description="Each version of one of the session's files (or of a `user:` file) with "
        "its ADK metadata, size and the id the chat's download links carry; empty for a file "
        "that does not exist.",
        parameters=[APP_NAME, USER_ID, SESSION_ID, FILENAME],
        responses={200: ArtifactVersionsSerializer, **READ_ERRORS},
    )
    def get(
        self,
        request: Request,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
    ) -> Response:
        self.file_named(filename, session_id)
        owner = self.owner_id(user_id)
        if owner is None:
            return Response({"versions": []})
        records = selectors.artifact_records_list(
            app_name=app_name, user_id=owner, filename=filename, session_id=session_id
        )
        return Response({"versions": [_version_json(record) for record in records]})

    @extend_schema(
        operation_id="v1_artifacts_destroy",
        summary="Delete every version of a file (ADK's delete_artifact)",
        description="Its files go with it, from the chat too; deleting a file that does not "
        "exist does nothing.",
        parameters=[APP_NAME, USER_ID, SESSION_ID, FILENAME],
        responses={204: None, **READ_ERRORS},
    )
    def delete(
        self,
        request: Request,
        app_name: str,
        user_id: str,
        filename: str,
        session_id: str | None = None,
    ) -> Response:
        self.file_named(filename, session_id)
        owner = self.owner_id(user_id)
        if owner is not None:
            services.artifact_delete(
                app_name=app_name, user_id=owner, filename=filename, session_id=session_id
            )
        return Response(status=status.HTTP_204_NO_CONTENT)


class ArtifactVersionView(_EndUserArtifactsView):
    @extend_schema(
        operation_id="v1_artifacts_version_retrieve",
        summary="One version of a file with its content (ADK's load_artifact)",
        description="A version of one of the session's files (or of a `user:` file), or the "
        "newest with `latest`, with its content as the part it was saved as; 404 when there "
        "is none.",
        parameters=[APP_NAME, USER_ID, SESSION_ID, FILENAME, VERSION],
        responses={200: ArtifactContentSerializer, **READ_ERRORS},
    )
    def get(
        self,
        request: Request,
        app_name: str,
        user_id: str,
        filename: str,
        version: str,
        session_id: str | None = None,
    ) -> Response:
        if version != "latest" and not re.fullmatch(r"[0-9]{1,9}", version):
            raise NotFound("A version is a number or `latest`.")
        self.file_named(filename, session_id)
        owner = self.owner_id(user_id)
        record = (
            None
            if owner is None
            else selectors.artifact_record_get(
                app_name=app_name,
                user_id=owner,
                filename=filename,
                session_id=session_id,
                version=None if version == "latest" else int(version),
            )
        )
        if record is None:
            raise NotFound("No such file or version.")
        return Response({**_version_json(record), "part": _part_json(record)})


@extend_schema_view(
    get=extend_schema(
        operation_id="v1_user_artifacts_list",
        summary="The end user's own files (ADK's list_artifact_keys without a session)",
        description="The names of the end user's `user:` files in the app, sorted: the files "
        "every session of theirs sees.",
        parameters=[NO_SESSION],
    ),
    post=extend_schema(
        operation_id="v1_user_artifacts_create",
        summary="Save a new version of one of the end user's `user:` files (multipart)",
        description="As the session route's save, for a `user:` filename only (a file every "
        "session of the end user sees, kept when a session goes); an end user the app has not "
        "seen yet is created with it.",
        parameters=[NO_SESSION],
    ),
)
class UserArtifactListView(ArtifactListView):
    pass


@extend_schema_view(
    get=extend_schema(
        operation_id="v1_user_artifacts_versions_list",
        summary="Every version of one of the end user's `user:` files, oldest first",
        description="Each version of a `user:` file with its ADK metadata and size, as ADK's "
        "list_artifact_versions answers without a session; empty when there is none.",
        parameters=[NO_SESSION],
    ),
    delete=extend_schema(
        operation_id="v1_user_artifacts_destroy",
        summary="Delete every version of one of the end user's `user:` files",
        description="Removes a `user:` file of the end user with all its versions and their "
        "bytes (ADK's delete_artifact without a session); nothing happens if there is none.",
        parameters=[NO_SESSION],
    ),
)
class UserArtifactDetailView(ArtifactDetailView):
    pass


@extend_schema_view(
    get=extend_schema(
        operation_id="v1_user_artifacts_version_retrieve",
        summary="One version of one of the end user's `user:` files with its content",
        description="A version of a `user:` file, or its newest with `latest`, as ADK's "
        "load_artifact answers without a session; 404 when there is none.",
        parameters=[NO_SESSION],
    ),
)
class UserArtifactVersionView(ArtifactVersionView):
    pass
