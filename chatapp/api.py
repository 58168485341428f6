"""The data-rights REST API: a signed-in user's export of everything kept about them."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents_app.service_api.base import APP_NAME, NO_KEY, NO_SCOPE, UNKNOWN, USER_ID
from agents_app.service_api.users import UsersAdminView
from chatapp.services import user_data_delete
from chatapp.views import export_response
from core.api import NOT_SIGNED_IN


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
        return export_response(request._request, user=end_user.user)


class EndUserDeleteView(UsersAdminView):
    @extend_schema(
        operation_id="v1_users_destroy",
        summary="Delete all of an end user's data and their account",
        description="The same completeness as 'delete all my data': sessions, events, state, "
        "memories with sources and revisions, jobs, settings, audit entries and the requests "
        "made for them; the end user is then unknown to the app.",
        parameters=[APP_NAME, USER_ID],
        responses={204: None, 401: NO_KEY, 403: NO_SCOPE, 404: UNKNOWN},
    )
    def delete(self, request: Request, app_name: str, user_id: str) -> Response:
        end_user = self.end_user_required(user_id)
        self.end_user_pk = None
        user_data_delete(user=end_user.user, delete_account=True)
        return Response(status=status.HTTP_204_NO_CONTENT)
