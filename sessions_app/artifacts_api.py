"""The attachments REST API: upload files to one of your sessions, list them, download one.

An upload is checked whole before anything is stored (type by content, size, count, name) and
stored all or nothing; a refusal is a 400 that says why. The owner reaches an artifact, and
staff holding the owner's grant (``selectors.artifact_staff_may_read``), each such read
written to the audit log the owner sees; for anyone else another user's session or artifact
id answers the same 404 as an unknown one.
"""

from __future__ import annotations

import html

from django.conf import settings
from django.http import FileResponse, HttpResponse
from django.http.multipartparser import MultiPartParser as DjangoMultiPartParser
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ParseError
from rest_framework.parsers import DataAndFiles, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from access_app.models import AuditAction
from access_app.services import audit_record
from core.api import BAD_REQUEST, NOT_SIGNED_IN, TOO_LARGE, ErrorSerializer, PayloadTooLarge
from core.sizes import size_words
from sessions_app import selectors, services
from sessions_app.api import NOT_FOUND, SESSION_ID, SessionStoreAPIView
from sessions_app.artifact_files import USER_PREFIX, artifact_storage
from sessions_app.models import ArtifactRecord
from sessions_app.thumbnails import thumbnail_png
from sessions_app.uploads import INLINE_IMAGE_TYPES, uploads_check

# Room for a multipart body's boundaries and headers besides the files themselves.
_MULTIPART_OVERHEAD = 64 * 1024


class _PathRefusingMultiPartParser(DjangoMultiPartParser):
    """Django's multipart parser, refusing a file name that is a path where Django would keep
    its last part: a client sending ``../../x.png`` is told so rather than stored as ``x.png``."""

    def sanitize_file_name(self, file_name):
        name = html.unescape(file_name)
        if "/" in name or "\\" in name or name.strip() in {".", ".."}:
            raise MultiPartParserError(
                f"{name[:80]!r} cannot name an attachment: a filename names a file, not a path."
            )
        return super().sanitize_file_name(file_name)


class AttachmentParser(MultiPartParser):
    """DRF's multipart parser over ``_PathRefusingMultiPartParser``."""

    def parse(self, stream, media_type=None, parser_context=None):
        request = parser_context["request"]
        meta = {**request.META, "CONTENT_TYPE": media_type}
        parser = _PathRefusingMultiPartParser(
            meta, stream, request.upload_handlers, parser_context.get("encoding") or "utf-8"
        )
        try:
            return DataAndFiles(*parser.parse())
        except MultiPartParserError as exc:
            raise ParseError(str(exc)) from exc


class ArtifactSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="The version's public id, which its download URL carries.")
    filename = serializers.CharField()
    version = serializers.IntegerField(help_text="0 for the first upload of a filename.")
    mime_type = serializers.CharField(help_text="The type its content showed.")
    size = serializers.IntegerField(help_text="In bytes.")
    create_time = serializers.FloatField(help_text="Seconds since the epoch.")
    session_id = serializers.CharField(allow_null=True)
    download_url = serializers.CharField()
    thumbnail_url = serializers.CharField(allow_null=True, help_text="Images only.")


def artifact_representation(record: ArtifactRecord) -> dict:
    return {
        "id": str(record.pk),
        "filename": record.filename,
        "version": record.version,
        "mime_type": record.mime_type,
        "size": record.size,
        "create_time": record.create_time,
        "session_id": record.session.session_id if record.session_id else None,
        "download_url": reverse("sessions_api:artifact-content", args=[record.pk]),
        "thumbnail_url": reverse("sessions_api:artifact-thumbnail", args=[record.pk])
        if record.mime_type in INLINE_IMAGE_TYPES and not record.is_file_data
        else None,
    }


def upload_body_limit() -> int:
    """The longest upload body read: the most files of the largest size, and the rest."""
    return settings.ATTACHMENT_MAX_COUNT * settings.ATTACHMENT_MAX_BYTES + _MULTIPART_OVERHEAD


class SessionArtifactsView(SessionStoreAPIView):
    parser_classes = [AttachmentParser]

    @extend_schema(
        operation_id="sessions_artifacts_list",
        tags=["Attachments"],
        summary="The files of a session, every version, oldest first",
        description="Each version of each file attached to the session, by filename then "
        "version, with the URL that downloads it.",
        parameters=[SESSION_ID],
        responses={200: ArtifactSerializer(many=True), 403: NOT_SIGNED_IN, 404: NOT_FOUND},
    )
    def get(self, request: Request, session_id: str) -> Response:
        record = self.owned_session(session_id)
        artifacts = (
            ArtifactRecord.objects.filter(session=record)
            .select_related("session")
            .order_by("filename", "version")
        )
        return Response([artifact_representation(each) for each in artifacts])

    @extend_schema(
        operation_id="sessions_artifacts_upload",
        tags=["Attachments"],
        summary="Attach files to a session (multipart, field `file`, repeated)",
        description="Images (PNG, JPEG, WebP, GIF), PDF, plain text and Markdown, told by "
        "their content; at most `ATTACHMENT_MAX_COUNT` files of `ATTACHMENT_MAX_BYTES` each. "
        "A file saved under a name the session already has becomes its next version. All "
        "files are stored or none: any refusal is a 400 naming the file and the reason. Send "
        "the returned ids as a chat message's `attachments` to give them to the model.",
        parameters=[SESSION_ID],
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {
                    "file": {
                        "type": "array",
                        "items": {"type": "string", "format": "binary"},
                        "minItems": 1,
                    }
                },
                "required": ["file"],
            }
        },
        responses={
            201: ArtifactSerializer(many=True),
            400: BAD_REQUEST,
            403: NOT_SIGNED_IN,
            404: NOT_FOUND,
            413: TOO_LARGE,
            415: OpenApiResponse(ErrorSerializer, description="The body is not multipart."),
        },
    )
    def post(self, request: Request, session_id: str) -> Response:
        record = self.owned_session(session_id)
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        if length > upload_body_limit():
            raise PayloadTooLarge(
                f"The upload is {size_words(length)}; at most {settings.ATTACHMENT_MAX_COUNT} "
                f"files of {size_words(settings.ATTACHMENT_MAX_BYTES)} each are accepted."
            )
        files = [(each.name, each.read()) for each in request.FILES.getlist("file")]
        stored = services.attachments_store(
            app_name=record.app_name,
            user_id=str(request.user.pk),
            session_id=record.session_id,
            uploads=uploads_check(files),
        )
        return Response(
            [artifact_representation(each) for each in stored], status=status.HTTP_201_CREATED
        )


ARTIFACT_ID = OpenApiParameter(
    "artifact_id",
    str,
    OpenApiParameter.PATH,
    description="An artifact version's id. Another user's answers 404 (unless you are staff "
    "holding their grant).",
)


class ArtifactReadView(SessionStoreAPIView):
    """Base of the views that send an artifact: its owner reads it, and staff holding the
    owner's grant (audited); anyone else gets the 404 of an unknown id."""

    def readable(self, artifact_id: str) -> ArtifactRecord:
        record = selectors.artifact_readable_get(reader=self.request.user, artifact_id=artifact_id)
        if record is None:
            raise NotFound()
        if record.user_id != self.request.user.pk:
            audit_record(
                actor=self.request.user,
                subject_user_pk=record.user_id,
                action=AuditAction.VIEW,
                object_type=ArtifactRecord._meta.label_lower,
                object_id=record.pk,
                path=self.request.get_full_path(),
            )
        return record


class ArtifactContentView(ArtifactReadView):
    @extend_schema(
        operation_id="artifacts_content",
        tags=["Attachments"],
        summary="Download one of your files",
        description="The bytes as stored, with their stored type, never sniffed. An image "
        "(PNG, JPEG, WebP, GIF) is shown in the browser unless `?download=1`; any other type "
        "(text, PDF, whatever an agent saved) is always sent as an attachment to save. Staff "
        "open another user's file only with that user's grant (conversations for a chat's "
        "attachment, memories for an image a memory keeps), and the user's audit log records "
        "it.",
        parameters=[ARTIFACT_ID],
        responses={
            (200, "application/octet-stream"): OpenApiResponse(description="The file."),
            403: NOT_SIGNED_IN,
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, artifact_id: str) -> FileResponse:
        record = self.readable(artifact_id)
        return artifact_file_response(record, download=request.query_params.get("download") == "1")


class ArtifactThumbnailView(ArtifactReadView):
    @extend_schema(
        operation_id="artifacts_thumbnail",
        tags=["Attachments"],
        summary="A small preview of one of your images",
        description="A PNG at most 320 pixels on its longer side, made from an attached image "
        "(the first frame of an animation). Files that are not PNG, JPEG, WebP or GIF images, "
        "or do not decode as one, answer 404.",
        parameters=[ARTIFACT_ID],
        responses={
            (200, "image/png"): OpenApiResponse(description="The preview."),
            403: NOT_SIGNED_IN,
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, artifact_id: str) -> HttpResponse:
        record = self.readable(artifact_id)
        preview = (
            thumbnail_png(selectors.artifact_bytes(record))
            if record.mime_type in INLINE_IMAGE_TYPES and not record.is_file_data
            else None
        )
        if preview is None:
            raise NotFound("Only images have a preview.")
        response = HttpResponse(preview, content_type="image/png")
        response["X-Content-Type-Options"] = "nosniff"
        response["Cache-Control"] = "private, max-age=3600"
        return response


def artifact_file_response(record: ArtifactRecord, *, download: bool) -> FileResponse:
    """The stored file as a response no browser runs as a page: an image a browser shows
    (PNG, JPEG, WebP, GIF) inline unless ``download``, any other type (text, PDF, HTML, SVG,
    a ``file_data`` part's JSON, whatever an agent saved) as an attachment to save; never
    sniffed, and private to whoever fetched it. The type is the one stored, so the bytes
    saved are the bytes downloaded."""
    inline = record.mime_type in INLINE_IMAGE_TYPES and not record.is_file_data and not download
    if record.is_file_data:
        content_type = "application/json"
    elif record.mime_type.startswith("text/") or record.is_text:
        content_type = f"{record.mime_type or 'text/plain'}; charset=utf-8"
    else:
        content_type = record.mime_type or "application/octet-stream"
    response = FileResponse(
        artifact_storage().open(record.storage_name, "rb"),
        content_type=content_type,
        as_attachment=not inline,
        filename=record.filename.removeprefix(USER_PREFIX).rsplit("/", 1)[-1],
    )
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, max-age=3600"
    return response
