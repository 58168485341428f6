"""The sessions REST API: a signed-in user's sessions, their events, state and rewinds.

Every view reaches only the requesting user's sessions: another user's
session, an unknown one and a malformed id all answer the same 404, with
nothing of the session in it. Bad input answers 400 (409 for a session id in
use, 413 for a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``) and writes nothing.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import QueryDict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, NotFound, ParseError
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from sessions_app import selectors, services
from sessions_app.errors import (
    DuplicateEventError,
    SessionAlreadyExistsError,
    SessionNotFoundError,
    SessionStoreError,
)
from sessions_app.models import SessionRecord
from sessions_app.serializers import (
    ErrorSerializer,
    EventCreateSerializer,
    EventsPageSerializer,
    EventsQuerySerializer,
    RewindSerializer,
    SessionCreateSerializer,
    SessionDetailQuerySerializer,
    SessionDetailSerializer,
    SessionListQuerySerializer,
    SessionPageSerializer,
    SessionRenameSerializer,
    SessionSerializer,
    SessionStateSerializer,
    StoredEventSerializer,
)
from sessions_app.text import text_encodable
from sessions_app.types import GetSessionConfig, Session

MAX_JSON_DEPTH = 64


class BadRequest(APIException):
    status_code = status.HTTP_400_BAD_REQUEST
    default_detail = "The request is invalid."
    default_code = "invalid"


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The resource already exists."
    default_code = "conflict"


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is larger than this server accepts."
    default_code = "too_large"


def _json_problem(data: Any) -> str | None:
    """Why the store could not hold this parsed JSON, or None if it could."""
    pending = [(data, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "JSON strings must not contain NUL (\\u0000) characters."
            if not text_encodable(item):
                return "JSON strings must be valid Unicode: a lone surrogate escape was found."
        elif isinstance(item, dict | list):
            if depth > MAX_JSON_DEPTH:
                return f"JSON must not nest more than {MAX_JSON_DEPTH} levels deep."
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return None


class StoreJSONParser(JSONParser):
    """DRF's strict JSON parser (no NaN or Infinity) that also refuses what the store
    cannot hold: NUL characters, lone surrogates and nesting deeper than ``MAX_JSON_DEPTH``."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(
                f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep."
            ) from None
        problem = _json_problem(data)
        if problem:
            raise ParseError(f"JSON parse error - {problem}")
        return data


def _api_error(exc: Exception) -> Exception:
    """The API error a store or request error answers with; any other exception as it is."""
    if isinstance(exc, SessionNotFoundError):
        return NotFound()
    if isinstance(exc, SessionAlreadyExistsError | DuplicateEventError):
        return Conflict(str(exc))
    if isinstance(exc, SessionStoreError | selectors.InvalidPageTokenError):
        return BadRequest(str(exc))
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    return exc


def request_data_validated(serializer_class: type[serializers.Serializer], data: Any) -> Any:
    """``data`` validated, or a 400. Query parameters are validated as plain values: DRF
    would read an empty ``?page_size=`` as left out (HTML form semantics), which the
    schema does not allow."""
    if isinstance(data, QueryDict):
        data = data.dict()
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def _user_id(request: Request) -> str:
    return str(request.user.pk)


SESSION_ID = OpenApiParameter(
    "session_id",
    str,
    OpenApiParameter.PATH,
    pattern=services.IDENTIFIER_PATTERN.pattern,
    description="The session's id. Another user's session answers 404.",
)
BAD_REQUEST = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description='Invalid input, nothing written: `{"detail": message}` or `{field: [messages]}`.',
)
NOT_SIGNED_IN = OpenApiResponse(ErrorSerializer, description="Not signed in.")
NOT_FOUND = OpenApiResponse(
    ErrorSerializer, description="You have no session with this id (also another user's)."
)
TOO_LARGE = OpenApiResponse(ErrorSerializer, description="The body is over the upload limit.")
UNSUPPORTED = OpenApiResponse(ErrorSerializer, description="The body is not JSON.")


class SessionStoreAPIView(APIView):
    """Base of the sessions API views: JSON bodies, store errors mapped to HTTP."""

    parser_classes = [StoreJSONParser]

    def handle_exception(self, exc):
        return super().handle_exception(_api_error(exc))

    def owned_session(self, session_id: str) -> SessionRecord:
        """The requesting user's session with this id; 404 for any other id."""
        if not services.IDENTIFIER_PATTERN.fullmatch(session_id):
            raise NotFound()
        record = selectors.session_record_get(user_pk=self.request.user.pk, session_id=session_id)
        if record is None:
            raise NotFound()
        return record

    def session_load(self, record: SessionRecord) -> Session:
        """The session with its merged state (no events), or 404 if it was just deleted."""
        session = selectors.session_get(
            app_name=record.app_name,
            user_id=_user_id(self.request),
            session_id=record.pk,
            config=GetSessionConfig(num_recent_events=0),
        )
        if session is None:
            raise NotFound()
        return session


class SessionListView(SessionStoreAPIView):
    @extend_schema(
        operation_id="sessions_list",
        summary="List your sessions of an app, most recently updated first",
        parameters=[SessionListQuerySerializer],
        responses={200: SessionPageSerializer, 400: BAD_REQUEST, 403: NOT_SIGNED_IN},
    )
    def get(self, request: Request) -> Response:
        query = request_data_validated(SessionListQuerySerializer, request.query_params)
        page = selectors.session_list(
            app_name=query["app_name"],
            user_id=_user_id(request),
            page_size=query["page_size"],
            page_token=query.get("page_token"),
        )
        session_ids = [session.id for session in page.sessions]
        titles = selectors.session_titles(user_pk=request.user.pk, session_ids=session_ids)
        temporary = selectors.sessions_temporary(user_pk=request.user.pk, session_ids=session_ids)
        sessions = [
            {
                **session.model_dump(),
                "title": titles.get(session.id, ""),
                "temporary": session.id in temporary,
            }
            for session in page.sessions
        ]
        return Response(
            SessionPageSerializer(
                {"sessions": sessions, "next_page_token": page.next_page_token}
            ).data
        )

    @extend_schema(
        operation_id="sessions_create",
        summary="Create a session",
        request=SessionCreateSerializer,
        responses={
            201: SessionSerializer,
            400: BAD_REQUEST,
            403: NOT_SIGNED_IN,
            409: OpenApiResponse(ErrorSerializer, description="The session id is in use."),
            413: TOO_LARGE,
            415: UNSUPPORTED,
        },
    )
    def post(self, request: Request) -> Response:
        data = request_data_validated(SessionCreateSerializer, request.data)
        session = services.session_create(user_id=_user_id(request), **data)
        body = {**session.model_dump(exclude={"events"}), "temporary": data["temporary"]}
        return Response(SessionSerializer(body).data, status=status.HTTP_201_CREATED)


class SessionDetailView(SessionStoreAPIView):
    @extend_schema(
        operation_id="sessions_retrieve",
        summary="A session with its merged state and latest events",
        parameters=[SESSION_ID, SessionDetailQuerySerializer],
        responses={
            200: SessionDetailSerializer,
            400: BAD_REQUEST,
            403: NOT_SIGNED_IN,
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, session_id: str) -> Response:
        record = self.owned_session(session_id)
        query = request_data_validated(SessionDetailQuerySerializer, request.query_params)
        session = self.session_load(record)
        events = selectors.stored_events_recent(
            session_id=session.id, limit=query["num_recent_events"]
        )
        detail = {
            **session.model_dump(exclude={"events"}),
            "title": record.title,
            "temporary": record.temporary,
            "events": events,
        }
        return Response(SessionDetailSerializer(detail).data)

    @extend_schema(
        operation_id="sessions_partial_update",
        summary="Rename a session",
        description="Only the title changes: renaming is not activity, so the session keeps "
        "its place in the list.",
        parameters=[SESSION_ID],
        request=SessionRenameSerializer,
        responses={
            200: SessionSerializer,
            400: BAD_REQUEST,
            403: NOT_SIGNED_IN,
            404: NOT_FOUND,
            413: TOO_LARGE,
            415: UNSUPPORTED,
        },
    )
    def patch(self, request: Request, session_id: str) -> Response:
        record = self.owned_session(session_id)
        data = request_data_validated(SessionRenameSerializer, request.data)
        if not services.session_rename(
            user_pk=request.user.pk, session_id=session_id, title=data["title"]
        ):
            raise NotFound()
        record.refresh_from_db(fields=["title"])
        session = self.session_load(record)
        return Response(
            SessionSerializer(
                {
                    **session.model_dump(exclude={"events"}),
                    "title": record.title,
                    "temporary": record.temporary,
                }
            ).data
        )

    @extend_schema(
        operation_id="sessions_destroy",
        summary="Delete a session with its events and session state",
        parameters=[SESSION_ID],
        responses={204: None, 403: NOT_SIGNED_IN, 404: NOT_FOUND},
    )
    def delete(self, request: Request, session_id: str) -> Response:
        record = self.owned_session(session_id)
        if not services.session_delete(
            app_name=record.app_name, user_id=_user_id(request), session_id=session_id
        ):
            raise NotFound()
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionEventsView(SessionStoreAPIView):
    @extend_schema(
        operation_id="sessions_events_list",
        summary="A session's stored events in order, a page at a time",
        parameters=[SESSION_ID, EventsQuerySerializer],
        responses={200: EventsPageSerializer, 400: BAD_REQUEST, 403: NOT_SIGNED_IN, 404: NOT_FOUND},
    )
    def get(self, request: Request, session_id: str) -> Response:
        self.owned_session(session_id)
        query = request_data_validated(EventsQuerySerializer, request.query_params)
        page = selectors.stored_events_page(session_id=session_id, **query)
        return Response(EventsPageSerializer(page).data)

    @extend_schema(
        operation_id="sessions_events_create",
        summary="Append an event; its state_delta changes the state",
        parameters=[SESSION_ID],
        request=EventCreateSerializer,
        responses={
            201: StoredEventSerializer,
            400: BAD_REQUEST,
            403: NOT_SIGNED_IN,
            404: NOT_FOUND,
            409: OpenApiResponse(
                ErrorSerializer, description="An event with this id is already stored."
            ),
            413: TOO_LARGE,
            415: UNSUPPORTED,
        },
        examples=[
            OpenApiExample(
                "A user message that saves a preference",
                request_only=True,
                value={
                    "author": "user",
                    "invocation_id": "e-1",
                    "content": {"role": "user", "parts": [{"text": "Call me Ada."}]},
                    "actions": {"state_delta": {"user:name": "Ada"}},
                },
            )
        ],
    )
    def post(self, request: Request, session_id: str) -> Response:
        record = self.owned_session(session_id)
        event = request_data_validated(EventCreateSerializer, request.data)
        services.event_append(session=self.session_load(record), event=event)
        stored = selectors.stored_event_get(session_id=session_id, event_id=event.id)
        if stored is None:
            raise NotFound()
        return Response(StoredEventSerializer(stored).data, status=status.HTTP_201_CREATED)


class SessionStateView(SessionStoreAPIView):
    @extend_schema(
        operation_id="sessions_state_retrieve",
        summary="A session's state, by scope and merged",
        parameters=[SESSION_ID],
        responses={200: SessionStateSerializer, 403: NOT_SIGNED_IN, 404: NOT_FOUND},
    )
    def get(self, request: Request, session_id: str) -> Response:
        record = self.owned_session(session_id)
        scoped = selectors.session_scoped_state(
            app_name=record.app_name, user_pk=record.user_id, session_id=session_id
        )
        return Response(SessionStateSerializer(scoped).data)


class SessionRewindView(SessionStoreAPIView):
    @extend_schema(
        operation_id="sessions_rewind_create",
        summary="Revert a session to just before an invocation",
        description="Session-scope state returns to what it was before the invocation; its "
        "events and every later one stay stored but leave the history. Answers the rewind "
        "event, which records the restoring state changes (null for a key that did not exist).",
        parameters=[SESSION_ID],
        request=RewindSerializer,
        responses={
            201: StoredEventSerializer,
            400: BAD_REQUEST,
            403: NOT_SIGNED_IN,
            404: NOT_FOUND,
            413: TOO_LARGE,
            415: UNSUPPORTED,
        },
    )
    def post(self, request: Request, session_id: str) -> Response:
        record = self.owned_session(session_id)
        data = request_data_validated(RewindSerializer, request.data)
        event = services.session_rewind(
            app_name=record.app_name,
            user_id=_user_id(request),
            session_id=session_id,
            rewind_before_invocation_id=data["invocation_id"],
        )
        stored = selectors.stored_event_get(session_id=session_id, event_id=event.id)
        if stored is None:
            raise NotFound()
        return Response(StoredEventSerializer(stored).data, status=status.HTTP_201_CREATED)
