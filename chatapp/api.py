"""The data-rights REST API: a signed-in user's export of everything kept about them."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.views import APIView

from chatapp.views import export_response
from sessions_app.api import NOT_SIGNED_IN


class ExportView(APIView):
    @extend_schema(
        operation_id="export_retrieve",
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
