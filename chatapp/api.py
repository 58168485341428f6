"""The data-rights REST API: a signed-in user's export of everything kept about them."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from access_app.models import AuditAction
from agents_app.service_api.base import APP_NAME, NO_KEY, NO_SCOPE, UNKNOWN, USER_ID
from agents_app.service_api.users import UsersAdminView
from agents_app.services import end_user_access_record, end_user_app_made
from chatapp.services import user_data_delete
from chatapp.views import export_response
from core.api import NOT_SIGNED_IN, ErrorSerializer


class ExportView(APIView):
    @extend_schema(
        operation_id="export_retrieve",
        tags=["Export"],
        summary="Download all your data as one JSON document",
        description="Sessions with their state and events, `user:` state, memories with "
        "their sources and revisions, memory jobs and settings. Streamed as it is read, as "
        "an attachment.",
        responses={
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.OBJECT, description="The export document."
            ),
            403: NOT_SIGNED_IN,
        },
    )
    def get(self, request: Request):
        return export_response(request._request)


class EndUserExportView(UsersAdminView):
    @extend_schema(
        operation_id="v1_users_export",
        summary="All of an end user's data, the same document as 'export my data'",
        parameters=[APP_NAME, USER_ID],
        responses={
            (200, "application/json"): OpenApiResponse(
                OpenApiTypes.OBJECT, description="The export document."
            ),
            401: NO_KEY,
            403: NO_SCOPE,
            404: UNKNOWN,
        },
    )
    def get(self, request: Request, app_name: str, user_id: str):
        end_user = self.end_user_required(user_id)
        end_user_access_record(
            end_user=end_user, key=request.user.key, action=AuditAction.EXPORT, path=request.path
        )
        self.person_access_recorded = True
        return export_response(request._request, user=end_user.user)


class EndUserDeleteView(UsersAdminView):
    @extend_schema(
        operation_id="v1_users_destroy",
        summary="Delete all of an end user's data and their account",
        description="The same completeness as 'delete all my data': sessions, events, state, "
        "memories with sources and revisions, jobs, settings, audit entries and the requests "
        "made for them; the end user is then unknown to the app.",
        parameters=[APP_NAME, USER_ID],
        responses={
            204: None,
            401: NO_KEY,
            403: OpenApiResponse(
                ErrorSerializer,
                description="The key lacks the scope, or the end user is a person's own account "
                "that staff linked to the app: a key deletes only end users its app made.",
            ),
            404: UNKNOWN,
        },
    )
    def delete(self, request: Request, app_name: str, user_id: str) -> Response:
        end_user = self.end_user_required(user_id)
        if not end_user_app_made(end_user=end_user):
            raise PermissionDenied(
                "This end user is a person's own account, linked to the app: the app may "
                "delete only the end users it made."
            )
        self.end_user_pk = None
        user_data_delete(user=end_user.user, delete_account=True)
        return Response(status=status.HTTP_204_NO_CONTENT)
