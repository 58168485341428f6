"""The sessions REST API: a signed-in user's sessions, their events, state and rewinds.

Every view reaches only the requesting user's sessions: another user's
session, an unknown one and a malformed id all answer the same 404, with
nothing of the session in it. Bad input answers 400 (409 for a session id in
use, 413 for a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``, an event's over
``EVENT_REQUEST_MAX_BYTES``) and writes nothing.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from core.api import (
    BAD_REQUEST,
    NOT_SIGNED_IN,
    TOO_LARGE,
    UNSUPPORTED,
    BadRequest,
    Conflict,
    ErrorSerializer,
    JSONAPIView,
    LargeJSONParser,
    bad_request,
    request_data_validated,
)
from sessions_app import end_user, selectors, services
from sessions_app.app_policy import app_policy_get
from sessions_app.errors import (
    AppForbiddenError,
    AppNotFoundError,
    DuplicateEventError,
    InvocationNotFoundError,
    SessionAlreadyExistsError,
    SessionNotFoundError,
    SessionStoreError,
    StaleSessionError,
)
from sessions_app.models import SessionRecord
from sessions_app.serializers import (
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
from sessions_app.types import GetSessionConfig, Session


def _api_error(exc: Exception) -> Exception:
    """The API error a store or request error answers with; any other exception as it is."""
    if isinstance(exc, SessionNotFoundError):
        return NotFound()
    if isinstance(exc, AppNotFoundError | InvocationNotFoundError):
        return NotFound(str(exc))
    if isinstance(exc, selectors.InvalidPageTokenError | selectors.AmbiguousSessionError):
        return NotFound(str(exc))
    if isinstance(exc, AppForbiddenError):
        return PermissionDenied(str(exc))
    if isinstance(exc, StaleSessionError):
        return Conflict({"detail": str(exc), "code": "stale_session"})
    if isinstance(exc, SessionAlreadyExistsError | DuplicateEventError):
        return Conflict(str(exc))
    if isinstance(exc, SessionStoreError):
        return BadRequest(str(exc))
    return exc


def _user_id(request: Request) -> str:
    return str(request.user.pk)


# An id in a path, as the schema states it: its pattern and, again, its length.
IDENTIFIER_SCHEMA = {
    "type": "string",
    "pattern": services.IDENTIFIER_PATTERN.pattern,
    "maxLength": services.IDENTIFIER_MAX_LENGTH,
}
SESSION_ID = OpenApiParameter(
    "session_id",
    IDENTIFIER_SCHEMA,
    OpenApiParameter.PATH,
    description="The session's id. Another user's session answers 404.",
)
APP_NAME = OpenApiParameter(
    "app_name",
    str,
    OpenApiParameter.QUERY,
    required=False,
    description="The app of the session: ids are unique within an app, as ADK's. Needed only "
    "when you hold sessions of this id in several apps (404 otherwise).",
)
NOT_FOUND = OpenApiResponse(
    ErrorSerializer, description="You have no session with this id (also another user's)."
)

PAGE_NOT_FOUND = OpenApiResponse(
    ErrorSerializer,
    description="A `page_token` this service did not issue: no such page (as a cursor this "
    "API did not give answers).",
)


class SessionStoreAPIView(JSONAPIView):
    """Base of the sessions API views: JSON bodies, store errors mapped to HTTP."""

    def handle_exception(self, exc):
        return super().handle_exception(_api_error(exc))

    def owned_session(self, session_id: str) -> SessionRecord:
        """The requesting user's session with this id, in the app the ``app_name`` query
        parameter names (if any); 404 for any other id. A request that writes to it (any
        method but a read or a deletion) is refused with 403 once its app is closed to the
        user, as a new session or a chat socket in it is; deleting stays open, since a person
        may always delete what they stored."""
        app_name = self.request.query_params.get("app_name")
        if not services.IDENTIFIER_PATTERN.fullmatch(session_id):
            raise NotFound()
        record = selectors.session_record_get(
            user_pk=self.request.user.pk, session_id=session_id, app_name=app_name
        )
        if record is None:
            raise NotFound()
        if self.request.method not in ("GET", "HEAD", "OPTIONS", "DELETE"):
            app_policy_get().app_use_check(app_name=record.app_name, user=self.request.user)
        return record

    def session_load(self, record: SessionRecord) -> Session:
        """The session with its merged state (no events), or 404 if it was just deleted."""
        session = selectors.session_get(
            app_name=record.app_name,
            user_id=_user_id(self.request),
            session_id=record.session_id,
            config=GetSessionConfig(num_recent_events=0),
        )
        if session is None:
            raise NotFound()
        return session


class SessionListView(SessionStoreAPIView):
    @extend_schema(
        operation_id="sessions_list",
        tags=["Sessions"],
        description="One page of your sessions of the app (`app_name`, the chat's app by default), "
        "each with its merged state, title and whether it is temporary, without events. Pass "
        "the answer's `next_page_token` as `page_token` for the next page.",
        summary="List your sessions of an app, most recently updated first",
        parameters=[SessionListQuerySerializer],
        responses={
            200: SessionPageSerializer,
            400: BAD_REQUEST,
            403: NOT_SIGNED_IN,
            404: PAGE_NOT_FOUND,
        },
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
        titles = selectors.session_titles(
            user_pk=request.user.pk, app_name=query["app_name"], session_ids=session_ids
        )
        temporary = selectors.sessions_temporary(
            user_pk=request.user.pk, app_name=query["app_name"], session_ids=session_ids
        )
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
        tags=["Sessions"],
        summary="Create a session",
        description="`app:` keys in `state` are refused (400 naming them): app state is "
        "shared by every user of the app and written only by its agent, service accounts "
        "and staff.",
        request=SessionCreateSerializer,
        responses={
            201: SessionSerializer,
            400: bad_request("`app:` keys in `state`, each named"),
            403: OpenApiResponse(
                ErrorSerializer, description="Not signed in, or you may not use this app."
            ),
            404: OpenApiResponse(ErrorSerializer, description="No app of this name exists."),
            409: OpenApiResponse(
                ErrorSerializer,
                description="You already have a session with this id in this app (ADK's "
                "AlreadyExistsError). Ids are unique within your sessions of an app: whoever "
                "else holds the same id, it is free for you.",
            ),
            413: TOO_LARGE,
            415: UNSUPPORTED,
        },
    )
    def post(self, request: Request) -> Response:
        data = request_data_validated(SessionCreateSerializer, request.data)
        refusal = end_user.app_keys_refusal(data.get("state"))
        if refusal:
            raise serializers.ValidationError({"state": [refusal]})
        app_policy_get().app_use_check(app_name=data["app_name"], user=request.user)
        session = services.session_create(user_id=_user_id(request), **data)
        body = {**session.model_dump(exclude={"events"}), "temporary": data["temporary"]}
        return Response(SessionSerializer(body).data, status=status.HTTP_201_CREATED)


class SessionDetailView(SessionStoreAPIView):
    @extend_schema(
        operation_id="sessions_retrieve",
        tags=["Sessions"],
        description="The session's merged state (session, `user:` and `app:` keys) and its latest "
        "`num_recent_events` stored events, oldest first, with each event's Markdown "
        "rendered as safe HTML.",
        summary="A session with its merged state and latest events",
        parameters=[SESSION_ID, APP_NAME, SessionDetailQuerySerializer],
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
            session_key=record.pk, limit=query["num_recent_events"]
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
        tags=["Sessions"],
        summary="Rename a session",
        description="Only the title changes: renaming is not activity, so the session keeps "
        "its place in the list.",
        parameters=[SESSION_ID, APP_NAME],
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
            user_pk=record.user_id,
            session_id=record.session_id,
            app_name=record.app_name,
            title=data["title"],
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
        tags=["Sessions"],
        description="Its events and session state go with it, and memories drawn only from it; "
        "`user:` and `app:` state stay. Deleting cannot be undone.",
        summary="Delete a session with its events and session state",
        parameters=[SESSION_ID, APP_NAME],
        responses={204: None, 403: NOT_SIGNED_IN, 404: NOT_FOUND},
    )
    def delete(self, request: Request, session_id: str) -> Response:
        record = self.owned_session(session_id)
        if not services.session_delete(
            app_name=record.app_name, user_id=_user_id(request), session_id=record.session_id
        ):
            raise NotFound()
        return Response(status=status.HTTP_204_NO_CONTENT)


class EventJSONParser(LargeJSONParser):
    """The body of an event append: up to ``EVENT_REQUEST_MAX_BYTES``, an event of
    ``MAX_EVENT_BYTES`` with its files in base64."""

    limit_setting = "EVENT_REQUEST_MAX_BYTES"


class SessionEventsView(SessionStoreAPIView):
    parser_classes = [EventJSONParser]

    @extend_schema(
        operation_id="sessions_events_list",
        tags=["Sessions"],
        description="Events in sequence order, `page_size` at a time; the answer's "
        "`next_after_sequence` is the `after_sequence` of the next page (null on the last). "
        "Events a rewind took out of the history are left out unless `include_rewound`.",
        summary="A session's stored events in order, a page at a time",
        parameters=[SESSION_ID, APP_NAME, EventsQuerySerializer],
        responses={200: EventsPageSerializer, 400: BAD_REQUEST, 403: NOT_SIGNED_IN, 404: NOT_FOUND},
    )
    def get(self, request: Request, session_id: str) -> Response:
        record = self.owned_session(session_id)
        query = request_data_validated(EventsQuerySerializer, request.query_params)
        page = selectors.stored_events_page(session_key=record.pk, **query)
        return Response(EventsPageSerializer(page).data)

    @extend_schema(
        operation_id="sessions_events_create",
        tags=["Sessions"],
        summary="Append an event; its state_delta changes the state",
        description="An event you append is what you said: authored `user`, in the `user` "
        "role, without function calls or responses, `app:` state keys, the actions only agents "
        "take (`compaction`, `transfer_to_agent`, `escalate`) or an id starting `msg-` or "
        "`edit-` (the server's, for chat turns); each is refused with a 400 naming it.",
        parameters=[SESSION_ID, APP_NAME],
        request=EventCreateSerializer,
        responses={
            201: StoredEventSerializer,
            400: bad_request(
                "an `author` other than `user` (an empty one too)",
                "a `content.role` other than `user`, and `function_call` or "
                "`function_response` parts",
                "`app:` keys in `actions.state_delta`",
                "the actions only agents take: `compaction`, `transfer_to_agent`, `escalate`",
                "`partial` events and `actions.rewind_before_invocation_id`",
                "an empty `id`, or one starting `msg-` or `edit-`",
                "a tool call id repeated in `long_running_tool_ids`",
                "a `timestamp` outside years 1-9999",
            ),
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
        refusals = end_user.event_refusals(event)
        if refusals:
            raise serializers.ValidationError(refusals)
        app_policy_get().event_prepare(app_name=record.app_name, event=event)
        services.event_append(session=self.session_load(record), event=event)
        stored = selectors.stored_event_get(session_key=record.pk, event_id=event.id)
        if stored is None:
            raise NotFound()
        return Response(StoredEventSerializer(stored).data, status=status.HTTP_201_CREATED)


class SessionStateView(SessionStoreAPIView):
    @extend_schema(
        operation_id="sessions_state_retrieve",
        tags=["Sessions"],
        description="The state as three scopes (`session`, `user`: shared by all your sessions of "
        "the app, `app`: shared by every user of the app) and `merged`, the view an agent gets "
        "(`user:` and `app:` keys with their prefix).",
        summary="A session's state, by scope and merged",
        parameters=[SESSION_ID, APP_NAME],
        responses={200: SessionStateSerializer, 403: NOT_SIGNED_IN, 404: NOT_FOUND},
    )
    def get(self, request: Request, session_id: str) -> Response:
        record = self.owned_session(session_id)
        scoped = selectors.session_scoped_state(
            app_name=record.app_name, user_pk=record.user_id, session_id=record.session_id
        )
        return Response(SessionStateSerializer(scoped).data)


class SessionRewindView(SessionStoreAPIView):
    @extend_schema(
        operation_id="sessions_rewind_create",
        tags=["Sessions"],
        summary="Revert a session to just before an invocation",
        description="Session-scope state returns to what it was before the invocation; its "
        "events and every later one stay stored but leave the history (marked `rewound`). "
        "As in ADK, the invocation may be one an earlier rewind took out: the history and the "
        "state of that point come back. Answers the rewind event, which records the restoring "
        "state changes (null for a key that did not exist).",
        parameters=[SESSION_ID, APP_NAME],
        request=RewindSerializer,
        responses={
            201: StoredEventSerializer,
            400: bad_request("an empty `invocation_id`"),
            403: NOT_SIGNED_IN,
            404: OpenApiResponse(
                ErrorSerializer,
                description="You have no session with this id (also another user's), or the "
                "session holds no event of the `invocation_id` (an unknown invocation is "
                "an unknown object, as an unknown session is).",
            ),
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
            session_id=record.session_id,
            rewind_before_invocation_id=data["invocation_id"],
        )
        stored = selectors.stored_event_get(session_key=record.pk, event_id=event.id)
        if stored is None:
            raise NotFound()
        return Response(StoredEventSerializer(stored).data, status=status.HTTP_201_CREATED)
