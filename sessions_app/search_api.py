"""Search across the signed-in user's chats (``GET /api/search/``): the chat sidebar's search.

Only the requesting user's sessions of the app are searched (sessions_app.selectors.search);
another user's titles and messages never appear, whatever the query.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import BAD_REQUEST, NOT_SIGNED_IN, JSONAPIView, request_data_validated
from sessions_app.selectors.search import MAX_QUERY_CHARS, chats_search
from sessions_app.serializers import app_name_field


class SearchQuerySerializer(serializers.Serializer):
    q = serializers.CharField(
        max_length=MAX_QUERY_CHARS,
        trim_whitespace=True,
        help_text="Words to find, in any of their forms (by their English stem); all must "
        "be there.",
    )
    app_name = app_name_field()


class SearchHitSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    title = serializers.CharField(allow_blank=True)
    event_id = serializers.CharField(
        allow_null=True, help_text="The message found; null when the chat's title matched."
    )
    author = serializers.CharField(allow_blank=True, help_text="user, or the agent's name.")
    snippet = serializers.CharField(
        allow_blank=True, help_text="The text around the first word found, as plain text."
    )
    timestamp = serializers.FloatField(help_text="When the message was stored (Unix time).")
    title_marks = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        help_text="[start, end) character ranges of the matching words in the title.",
    )
    snippet_marks = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField(), min_length=2, max_length=2),
        help_text="[start, end) character ranges of the matching words in the snippet.",
    )


class SearchResultsSerializer(serializers.Serializer):
    results = SearchHitSerializer(many=True)


class ChatSearchView(JSONAPIView):
    @extend_schema(
        operation_id="chats_search",
        tags=["Sessions"],
        summary="Search your chats' titles and messages",
        description="Your chats of the app whose title or messages hold every word of `q`, "
        "one result per chat: title matches first, then chats by their newest matching "
        "message (of the 20 newest), with the ranges of the matching words to highlight. "
        "Messages an edit or a rewind took out of the history are not searched.",
        parameters=[SearchQuerySerializer],
        responses={200: SearchResultsSerializer, 400: BAD_REQUEST, 403: NOT_SIGNED_IN},
    )
    def get(self, request: Request) -> Response:
        query = request_data_validated(SearchQuerySerializer, request.query_params)
        hits = chats_search(user_pk=request.user.pk, app_name=query["app_name"], query=query["q"])
        return Response(SearchResultsSerializer({"results": hits}).data)
