"""REST API of the access layer: a signed-in user's grants and the audit log about them.

Owner-only: each view reads and writes only the requesting user's grants and
audit entries; another user's grant id answers 404 like an unknown one.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.exceptions import ValidationError as APIValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from access_app import selectors, services
from access_app.models import AccessGrant, AccessScope, AuditLogEntry
from core.api import (
    NOT_SIGNED_IN,
    TOO_LARGE,
    UNSUPPORTED,
    ErrorSerializer,
    JSONAPIView,
    StrictCharField,
    bad_request,
)


class GrantSerializer(serializers.ModelSerializer):
    grantee = serializers.CharField(source="grantee.get_username", read_only=True)
    revoked_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When the owner revoked it; null if never."
    )
    active = serializers.SerializerMethodField(help_text="Neither revoked nor expired now.")

    class Meta:
        model = AccessGrant
        fields = ["id", "grantee", "scope", "created_at", "expires_at", "revoked_at", "active"]
        read_only_fields = fields

    def get_active(self, grant: AccessGrant) -> bool:
        return grant.is_active()


class GrantCreateSerializer(serializers.Serializer):
    grantee = StrictCharField(
        max_length=150, help_text="Username of the staff account that may read your data."
    )
    scope = serializers.ChoiceField(choices=AccessScope.choices, default=AccessScope.MEMORIES)
    expires_at = serializers.DateTimeField(
        help_text=f"When the access ends: in the future, at most {services.GRANT_MAX_DAYS} "
        "days ahead; with a time zone offset (UTC if none is given)."
    )


class AuditEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_username", read_only=True)

    class Meta:
        model = AuditLogEntry
        fields = ["id", "actor", "action", "object_type", "object_id", "reason", "created_at"]
        read_only_fields = fields


class NewestFirstPagination(CursorPagination):
    """Newest first, by opaque cursor links; described in OpenAPI 3.1 terms (DRF's own
    description marks the links with 3.0's ``nullable``)."""

    ordering = ("-created_at", "-id")

    def paginate_queryset(self, queryset, request, view=None):
        self.model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request):
        """DRF's cursor, whose position must also be a value of the ordering field: a cursor
        is opaque but not signed, and a crafted position would fail in the database."""
        cursor = super().decode_cursor(request)
        if cursor is None or cursor.position is None:
            return cursor
        field = self.model._meta.get_field(self.ordering[0].lstrip("-"))
        try:
            if "\x00" in cursor.position:
                raise ValidationError("NUL")
            field.to_python(cursor.position)
        except ValidationError:
            raise NotFound(self.invalid_cursor_message) from None
        return cursor

    def get_paginated_response_schema(self, schema: dict) -> dict:
        link = {"type": ["string", "null"], "format": "uri"}
        return {
            "type": "object",
            "required": ["next", "previous", "results"],
            "properties": {
                "next": {**link, "description": "The next (older) page; null on the last."},
                "previous": {**link, "description": "The previous page; null on the first."},
                "results": schema,
            },
        }


BAD_CURSOR = OpenApiResponse(ErrorSerializer, description="The page cursor is invalid.")
GRANT_ID = OpenApiParameter(
    "grant_id", int, OpenApiParameter.PATH, description="Another user's grant answers 404."
)


class GrantListView(generics.ListAPIView, JSONAPIView):
    """Grants the user gave, newest first (active and ended); JSON bodies only, read as every
    API of the apps reads them (``JSONAPIView``)."""

    serializer_class = GrantSerializer
    pagination_class = NewestFirstPagination

    def get_queryset(self):
        return selectors.grants_of_owner(owner=self.request.user)

    @extend_schema(
        operation_id="access_grants_list",
        tags=["Access"],
        description="Every grant you gave, active or ended: who may read what (`memories` or "
        "`conversations`), until when, and when it was revoked. A page at a time by cursor "
        "(the answer's `next` and `previous` links).",
        summary="Your grants, newest first",
        responses={200: GrantSerializer(many=True), 404: BAD_CURSOR, 403: NOT_SIGNED_IN},
    )
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="access_grants_create",
        tags=["Access"],
        summary="Let a staff account read your data until a date",
        description="A still-active grant to the same account for the same scope is replaced.",
        request=GrantCreateSerializer,
        responses={
            201: GrantSerializer,
            400: bad_request(
                "your own user name as `grantee`",
                f"an `expires_at` not in the future or more than {services.GRANT_MAX_DAYS} "
                "days ahead",
            ),
            403: NOT_SIGNED_IN,
            404: OpenApiResponse(
                ErrorSerializer,
                description="No account has the `grantee`'s user name. A grant to an account "
                "that is not active staff is made alike (201) and reaches nothing until it is: "
                "the answer never tells who is staff.",
            ),
            413: TOO_LARGE,
            415: UNSUPPORTED,
        },
    )
    def post(self, request: Request) -> Response:
        serializer = GrantCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            grant = services.access_grant_create(
                owner=request.user,
                grantee_username=serializer.validated_data["grantee"],
                scope=serializer.validated_data["scope"],
                expires_at=serializer.validated_data["expires_at"],
            )
        except services.GranteeNotFoundError as error:
            raise NotFound(error.message_dict["grantee"][0]) from None
        except ValidationError as error:
            raise APIValidationError(error.message_dict) from None
        return Response(GrantSerializer(grant).data, status=status.HTTP_201_CREATED)


class GrantRevokeView(APIView):
    @extend_schema(
        operation_id="access_grants_revoke",
        tags=["Access"],
        summary="End one of your grants now",
        description="Revoking an ended grant changes nothing and answers the grant as it is.",
        request=None,
        parameters=[GRANT_ID],
        responses={
            200: GrantSerializer,
            403: NOT_SIGNED_IN,
            404: OpenApiResponse(ErrorSerializer, description="You have no grant with this id."),
        },
    )
    def post(self, request: Request, grant_id: int) -> Response:
        try:
            grant = services.access_grant_revoke(owner=request.user, grant_id=grant_id)
        except AccessGrant.DoesNotExist:
            raise NotFound() from None
        return Response(GrantSerializer(grant).data)


class AuditEntryListView(generics.ListAPIView):
    """What staff did with the user's data, newest first."""

    serializer_class = AuditEntrySerializer
    pagination_class = NewestFirstPagination

    def get_queryset(self):
        return selectors.audit_entries_for_subject(user=self.request.user)

    @extend_schema(
        operation_id="access_audit_list",
        tags=["Access"],
        description="Each time a staff member viewed or changed your data: who, what (the kind "
        "and id of the object, never its content), when and the reason they gave. A page at "
        "a time by cursor.",
        summary="The log of staff access to your data, newest first",
        responses={200: AuditEntrySerializer(many=True), 404: BAD_CURSOR, 403: NOT_SIGNED_IN},
    )
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)
