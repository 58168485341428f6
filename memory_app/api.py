"""The memory REST API: a signed-in user's own memories (list, search, read, correct, delete)
and their memory settings.

Every view reaches only the requesting user's memories: another user's memory, an unknown id
and a malformed one all answer the same 404. Bad input answers 400 and writes nothing.
"""

from __future__ import annotations

from django.core.paginator import Paginator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import (
    BAD_REQUEST,
    NOT_SIGNED_IN,
    TOO_LARGE,
    UNSUPPORTED,
    BadRequest,
    ErrorSerializer,
    JSONAPIView,
    bad_request,
    request_data_validated,
)
from memory_app import selectors, services
from memory_app.serializers import (
    SEARCH_LIMIT,
    AppQuerySerializer,
    MemoriesDeletedSerializer,
    MemoryCorrectSerializer,
    MemoryPageSerializer,
    MemoryQuerySerializer,
    MemorySerializer,
    MemorySettingsSerializer,
    PendingMemorySerializer,
)
from sessions_app import selectors as session_selectors

MEMORY_ID = OpenApiParameter(
    "memory_id",
    OpenApiTypes.UUID,
    OpenApiParameter.PATH,
    description="The memory's id. Another user's memory answers 404.",
)
MEMORY_NOT_FOUND = OpenApiResponse(
    ErrorSerializer, description="You have no memory with this id (also another user's)."
)


def _serialized(request: Request, memories, *, many: bool = False):
    return MemorySerializer(memories, many=many, context={"user_pk": request.user.pk}).data


class MemoryListView(JSONAPIView):
    @extend_schema(
        operation_id="memories_list",
        tags=["Memories"],
        description="Without `q`: your memories of the app grouped by topic, `page_size` at a time "
        "(`page`, and the answer's `next_page`), held and outdated ones included with their "
        "status. With `q`: the best matches of the search the assistant uses (words and "
        "meaning, recency, importance), active memories only, best first, one page.",
        summary="Your memories of an app by topic, or the best matches of a search",
        parameters=[MemoryQuerySerializer],
        responses={
            200: MemoryPageSerializer,
            400: BAD_REQUEST,
            403: NOT_SIGNED_IN,
            404: OpenApiResponse(
                ErrorSerializer,
                description="A `page` past the last page, which does not exist (the message "
                "says how many there are).",
            ),
        },
    )
    def get(self, request: Request) -> Response:
        query = request_data_validated(MemoryQuerySerializer, request.query_params)
        app_name, user_pk = query["app_name"], request.user.pk
        words = query.get("q", "").strip()
        if words:
            memories = selectors.user_memories_matching(
                app_name=app_name, user_pk=user_pk, query=words, limit=SEARCH_LIMIT
            )
            return Response(
                {"results": _serialized(request, memories, many=True), "next_page": None}
            )
        paginator = Paginator(
            selectors.user_memories(app_name=app_name, user_pk=user_pk), query["page_size"]
        )
        if query["page"] > max(paginator.num_pages, 1):
            raise NotFound(f"There are {paginator.num_pages} pages.")
        page = paginator.page(query["page"])
        return Response(
            {
                "results": _serialized(request, list(page.object_list), many=True),
                "next_page": page.next_page_number() if page.has_next() else None,
            }
        )

    @extend_schema(
        operation_id="memories_destroy_all",
        tags=["Memories"],
        summary="Delete all your memories of an app",
        description="Sources and history go with them; no reply uses them again.",
        parameters=[AppQuerySerializer],
        responses={200: MemoriesDeletedSerializer, 400: BAD_REQUEST, 403: NOT_SIGNED_IN},
    )
    def delete(self, request: Request) -> Response:
        query = request_data_validated(AppQuerySerializer, request.query_params)
        count = services.memories_delete_all(app_name=query["app_name"], user_pk=request.user.pk)
        return Response(MemoriesDeletedSerializer({"deleted": count}).data)


def _owned_memory(request: Request, memory_id: str, app_name: str):
    """The requesting user's memory with sources and history; 404 for any other id."""
    user_pk = request.user.pk
    if selectors.memory_get(app_name=app_name, user_pk=user_pk, memory_id=memory_id) is None:
        raise NotFound()
    found = selectors.user_memories(app_name=app_name, user_pk=user_pk, memory_ids=[memory_id])
    memory = found.first()
    if memory is None:
        raise NotFound()
    return memory


class MemoryDetailView(JSONAPIView):
    @extend_schema(
        operation_id="memories_retrieve",
        tags=["Memories"],
        description="Its text, topic, source type, confidence and status, the chat turns it came "
        "from (quoted, with a link to each turn) and its history: created, updated, "
        "invalidated, by which job or person and why.",
        summary="One of your memories with why it exists and its history",
        parameters=[MEMORY_ID, AppQuerySerializer],
        responses={
            200: MemorySerializer,
            400: BAD_REQUEST,
            403: NOT_SIGNED_IN,
            404: MEMORY_NOT_FOUND,
        },
    )
    def get(self, request: Request, memory_id: str) -> Response:
        query = request_data_validated(AppQuerySerializer, request.query_params)
        return Response(_serialized(request, _owned_memory(request, memory_id, query["app_name"])))

    @extend_schema(
        operation_id="memories_destroy",
        tags=["Memories"],
        description="No reply or search returns it again, from the next request on, and nothing of "
        "its text is kept, not even in its history. Open chat pages get a notice.",
        summary="Delete one of your memories, with its sources and history",
        parameters=[MEMORY_ID, AppQuerySerializer],
        responses={204: None, 400: BAD_REQUEST, 403: NOT_SIGNED_IN, 404: MEMORY_NOT_FOUND},
    )
    def delete(self, request: Request, memory_id: str) -> Response:
        query = request_data_validated(AppQuerySerializer, request.query_params)
        if not services.memory_delete(
            app_name=query["app_name"], user_pk=request.user.pk, memory_id=memory_id
        ):
            raise NotFound()
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemoryCorrectView(JSONAPIView):
    @extend_schema(
        operation_id="memories_correct_create",
        tags=["Memories"],
        summary="Correct one of your memories",
        description="The memory takes the new text as an explicit statement of yours, fully "
        "trusted; the old text is kept as a revision. Text that reads like an instruction "
        "to the assistant or holds a secret is refused.",
        parameters=[MEMORY_ID, AppQuerySerializer],
        request=MemoryCorrectSerializer,
        responses={
            200: MemorySerializer,
            400: bad_request(
                "an empty `text`",
                "text that reads like an instruction to the assistant or holds a secret",
            ),
            403: NOT_SIGNED_IN,
            404: MEMORY_NOT_FOUND,
            413: TOO_LARGE,
            415: UNSUPPORTED,
        },
    )
    def post(self, request: Request, memory_id: str) -> Response:
        query = request_data_validated(AppQuerySerializer, request.query_params)
        data = request_data_validated(MemoryCorrectSerializer, request.data)
        try:
            memory = services.memory_correct(
                app_name=query["app_name"],
                user_pk=request.user.pk,
                memory_id=memory_id,
                text=data["text"],
            )
        except services.MemoryCorrectionError as error:
            raise BadRequest(str(error)) from None
        if memory is None:
            raise NotFound()
        return Response(_serialized(request, _owned_memory(request, memory_id, query["app_name"])))


class PendingMemoryView(JSONAPIView):
    @extend_schema(
        operation_id="memory_pending_retrieve",
        tags=["Memories"],
        summary="What of a chat is waiting to be remembered",
        description="Your messages in the session not yet turned into memories, and the memory "
        "job that will, if one is queued or running. Another user's session answers 404. "
        "`app_name` names the session's app when you hold its id in several.",
        responses={
            200: PendingMemorySerializer,
            403: NOT_SIGNED_IN,
            404: OpenApiResponse(
                ErrorSerializer,
                description="You have no session with this id (also another user's).",
            ),
        },
    )
    def get(self, request: Request, session_id: str) -> Response:
        try:
            record = session_selectors.session_record_get(
                user_pk=request.user.pk,
                session_id=session_id,
                app_name=request.query_params.get("app_name"),
            )
        except session_selectors.AmbiguousSessionError as error:
            raise NotFound(str(error)) from None
        if record is None:
            raise NotFound("No such session.")
        pending = selectors.session_pending_memory(user_pk=request.user.pk, session_id=record.pk)
        if pending is None:
            raise NotFound("No such session.")
        return Response(PendingMemorySerializer(pending).data)


class MemorySettingsView(JSONAPIView):
    @extend_schema(
        operation_id="memory_settings_retrieve",
        tags=["Memory settings"],
        description="`create_enabled`: whether new memories are made from your chats; "
        "`use_enabled`: whether replies use what is remembered; `past_chats_enabled`: whether "
        "replies may search what you said in your other chats (only while `use_enabled`). All "
        "are on until turned off.",
        summary="Your memory settings",
        responses={200: MemorySettingsSerializer, 403: NOT_SIGNED_IN},
    )
    def get(self, request: Request) -> Response:
        row = selectors.memory_settings_get(user_pk=request.user.pk)
        return Response(MemorySettingsSerializer(row).data)

    @extend_schema(
        operation_id="memory_settings_partial_update",
        tags=["Memory settings"],
        summary="Turn creating or using memories, or referencing past chats, on or off",
        description="Effective at once: the next reply reads the choice, and a memory job "
        "already queued checks it again when it runs.",
        request=MemorySettingsSerializer,
        responses={
            200: MemorySettingsSerializer,
            400: BAD_REQUEST,
            403: NOT_SIGNED_IN,
            413: TOO_LARGE,
            415: UNSUPPORTED,
        },
    )
    def patch(self, request: Request) -> Response:
        data = request_data_validated(MemorySettingsSerializer, request.data)
        row = services.memory_settings_update(user_pk=request.user.pk, **data)
        return Response(MemorySettingsSerializer(row).data)
