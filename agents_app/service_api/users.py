"""The end users of an app, for its service accounts with ``users:admin``."""

from __future__ import annotations

import base64
import binascii

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from agents_app.models import Scope
from agents_app.selectors import end_users_of
from agents_app.service_api.base import APP_NAME, NO_KEY, NO_SCOPE, UNKNOWN, ServiceAPIView
from core.api import BAD_REQUEST, request_data_validated

MAX_PAGE_SIZE = 1000


class EndUserPageQuerySerializer(serializers.Serializer):
    page_size = serializers.IntegerField(min_value=1, max_value=MAX_PAGE_SIZE, default=100)
    page_token = serializers.CharField(required=False, allow_blank=True)


def _token_encode(external_id: str) -> str:
    return base64.urlsafe_b64encode(external_id.encode()).decode()


def _token_decode(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeError, ValueError):
        raise NotFound("The page_token is not one this API gave.") from None


class UsersAdminView(ServiceAPIView):
    """A view of the app's end users as a whole: ``users:admin`` to read and to write."""

    read_scope = Scope.USERS_ADMIN
    write_scope = Scope.USERS_ADMIN


class EndUserListView(UsersAdminView):
    @extend_schema(
        operation_id="v1_users_list",
        summary="The app's end users, by id",
        parameters=[APP_NAME, EndUserPageQuerySerializer],
        responses={
            200: OpenApiResponse(
                description='{"users": [{"user_id", "created_at"}], "next_page_token": str|null}'
            ),
            400: BAD_REQUEST,
            401: NO_KEY,
            403: NO_SCOPE,
            404: UNKNOWN,
        },
    )
    def get(self, request: Request, app_name: str) -> Response:
        query = request_data_validated(EndUserPageQuerySerializer, request.query_params)
        end_users = end_users_of(app=self.app)
        if query.get("page_token"):
            end_users = end_users.filter(external_id__gt=_token_decode(query["page_token"]))
        page = list(end_users[: query["page_size"] + 1])
        more = len(page) > query["page_size"]
        page = page[: query["page_size"]]
        rows = [
            {"user_id": end_user.external_id, "created_at": end_user.created_at.isoformat()}
            for end_user in page
        ]
        token = _token_encode(page[-1].external_id) if more else None
        return Response({"users": rows, "next_page_token": token})
