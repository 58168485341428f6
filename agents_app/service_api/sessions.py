"""Sessions, events and state of an app's end users: ADK's ``BaseSessionService`` over HTTP.

The session store keys an end user's sessions on their account, as a browser user's; the
JSON names them by the app's own id. A service account writes for its app: any event author,
any state scope (``app:`` included).
"""

from __future__ import annotations

import asyncio

from asgiref.sync import sync_to_async
from django.db import IntegrityError
from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from agents_app.app_policy import app_settings_of
from agents_app.redaction import event_redact
from agents_app.runtime.memory_hooks import memory_provider_get
from agents_app.service_api.base import (
    APP_NAME,
    NO_KEY,
    NO_SCOPE,
    UNKNOWN,
    USER_ID,
    AsyncServiceAPIView,
    ServiceAPIView,
)
from agents_app.service_api.serializers import (
    ServiceAppendedSerializer,
    ServiceEventQuerySerializer,
    ServiceEventSerializer,
    ServiceRewindSerializer,
    ServiceSessionCreateSerializer,
    ServiceSessionDetailSerializer,
    ServiceSessionGetQuerySerializer,
    ServiceSessionListQuerySerializer,
    ServiceSessionPageSerializer,
    ServiceSessionSerializer,
    appended_response,
    session_json,
    session_response,
)
from core.api import (
    BAD_REQUEST,
    TOO_LARGE,
    UNSUPPORTED,
    Conflict,
    ErrorSerializer,
    request_data_validated,
)
from sessions_app import selectors, services
from sessions_app.api import EventJSONParser
from sessions_app.errors import SessionNotFoundError
from sessions_app.models import AppState, SessionRecord, UserState
from sessions_app.services import SessionService
from sessions_app.state import APP_PREFIX, USER_PREFIX
from sessions_app.types import GetSessionConfig, Session, SessionRevision

# The session store's async API, as the chat runtime reaches it: on PostgreSQL its reads and
# appends go from the event loop.
SESSIONS = SessionService()
SESSION_ID = OpenApiParameter("session_id", str, OpenApiParameter.PATH)
CONFLICT = OpenApiResponse(ErrorSerializer, description="The session id is in use.")
WRITE_ERRORS = {400: BAD_REQUEST, 401: NO_KEY, 403: NO_SCOPE, 404: UNKNOWN}
WRITE_BODY_ERRORS = {**WRITE_ERRORS, 413: TOO_LARGE, 415: UNSUPPORTED}
READ_ERRORS = {401: NO_KEY, 403: NO_SCOPE, 404: UNKNOWN}


def _turn_ends(event) -> bool:
    """Whether ``event`` ends a turn as the memory triggers count turns: the agent's final
    response (as after a turn of the built-in agent)."""
    return event.author != "user" and event.is_final_response()


def _prefixed(rows: QuerySet, prefix: str) -> dict:
    return {prefix + key: value for key, value in rows.values_list("key", "value")}


class SessionListView(ServiceAPIView):
    @extend_schema(
        operation_id="v1_sessions_list",
        summary="The end user's sessions in the app, most recently updated first",
        parameters=[APP_NAME, USER_ID, ServiceSessionListQuerySerializer],
        responses={200: ServiceSessionPageSerializer, 400: BAD_REQUEST, **READ_ERRORS},
    )
    def get(self, request: Request, app_name: str, user_id: str) -> Response:
        query = request_data_validated(ServiceSessionListQuerySerializer, request.query_params)
        end_user = self.end_user(user_id)
        if end_user is None:
            return Response({"sessions": [], "next_page_token": None})
        page = selectors.session_list(
            app_name=app_name,
            user_id=str(end_user.user_id),
            page_size=query["page_size"],
            page_token=query.get("page_token") or None,
        )
        sessions = [session_json(session, external_user_id=user_id) for session in page.sessions]
        return Response({"sessions": sessions, "next_page_token": page.next_page_token})

    @extend_schema(
        operation_id="v1_sessions_create",
        summary="Create a session for the end user (who springs into existence)",
        parameters=[APP_NAME, USER_ID],
        request=ServiceSessionCreateSerializer,
        responses={201: ServiceSessionDetailSerializer, 409: CONFLICT, **WRITE_BODY_ERRORS},
    )
    def post(self, request: Request, app_name: str, user_id: str) -> HttpResponse:
        data = request_data_validated(ServiceSessionCreateSerializer, request.data)
        end_user = self.end_user(user_id, create=True)
        session = services.session_create(
            app_name=app_name,
            user_id=str(end_user.user_id),
            state=data.get("state"),
            session_id=data.get("session_id"),
        )
        return session_response(session, external_user_id=user_id, status=status.HTTP_201_CREATED)


class SessionDetailView(AsyncServiceAPIView):
    @extend_schema(
        operation_id="v1_sessions_retrieve",
        summary="A session with its merged state and events (ADK's get_session)",
        description="Every stored event is answered, as ADK's own services answer them: those "
        "a rewind took out of the history too, followed by the rewind's own event "
        "(`actions.rewind_before_invocation_id`). ADK's runner leaves them out of the agent's "
        "context itself.",
        parameters=[APP_NAME, USER_ID, SESSION_ID, ServiceSessionGetQuerySerializer],
        responses={200: ServiceSessionDetailSerializer, 400: BAD_REQUEST, **READ_ERRORS},
    )
    async def get(
        self, request: Request, app_name: str, user_id: str, session_id: str
    ) -> HttpResponse:
        query = request_data_validated(ServiceSessionGetQuerySerializer, request.query_params)
        config = GetSessionConfig(
            num_recent_events=query.get("num_recent_events"),
            after_timestamp=query.get("after_timestamp"),
            include_rewound=True,
        )
        session = None
        for afresh in (False, True):
            user_pk = await self.end_user_pk_of(user_id, afresh=afresh)
            if user_pk is None:
                break
            session = await SESSIONS.get_session(
                app_name=app_name, user_id=str(user_pk), session_id=session_id, config=config
            )
            if session is not None:
                break
        if session is None:
            raise NotFound("No such session.")
        return session_response(session, external_user_id=user_id)

    @extend_schema(
        operation_id="v1_sessions_destroy",
        summary="Delete a session with its events and session state",
        parameters=[APP_NAME, USER_ID, SESSION_ID],
        responses={204: None, **READ_ERRORS},
    )
    async def delete(
        self, request: Request, app_name: str, user_id: str, session_id: str
    ) -> Response:
        deleted = False
        for afresh in (False, True):
            user_pk = await self.end_user_pk_of(user_id, afresh=afresh)
            if user_pk is None:
                break
            deleted = await sync_to_async(services.session_delete)(
                app_name=app_name, user_id=str(user_pk), session_id=session_id
            )
            if deleted:
                break
        if not deleted:
            raise NotFound("No such session.")
        return Response(status=status.HTTP_204_NO_CONTENT)


class SessionEventsView(AsyncServiceAPIView):
    parser_classes = [EventJSONParser]

    @extend_schema(
        operation_id="v1_sessions_events_create",
        summary="Append an event (ADK's append_event): any author, any state scope",
        description="The event is stored with its state_delta applied atomically; `temp:` keys "
        "are applied to nothing and not stored; partial events are refused. Fields of ADK's "
        "Event this server does not model are kept and given back. The app's PII redaction "
        "applies before it is stored, and memory generation triggers as after a turn of the "
        "built-in agent: a final response of the agent checks the app's turn triggers.",
        parameters=[APP_NAME, USER_ID, SESSION_ID, ServiceEventQuerySerializer],
        request=ServiceEventSerializer,
        responses={
            201: ServiceAppendedSerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description="The event id is stored, or (code `stale_session`) the stale "
                "check found the copy stale.",
            ),
            **WRITE_BODY_ERRORS,
        },
    )
    async def post(
        self, request: Request, app_name: str, user_id: str, session_id: str
    ) -> HttpResponse:
        event = request_data_validated(ServiceEventSerializer, request.data)
        query = request_data_validated(ServiceEventQuerySerializer, request.query_params)
        revision = None
        if "stale_check_last_update_time" in query:
            revision = SessionRevision(
                last_update_time=query["stale_check_last_update_time"],
                last_event_id=query.get("stale_check_last_event_id") or None,
            )
        if app_settings_of(self.app).pii_redaction:
            event_redact(event)
        appended = self._appended(event, app_name, user_id, session_id, revision)
        if event.actions.rewind_before_invocation_id is not None:
            return await appended  # the rewind's own answer
        if not _turn_ends(event):
            session = await appended
        else:
            # Which memory trigger the turn meets is read from its earlier events only: the
            # read goes beside this event's append rather than after it.
            session, trigger = await asyncio.gather(
                appended,
                self._trigger_check(app_name, user_id, session_id, event.invocation_id),
                return_exceptions=True,
            )
            for outcome in (session, trigger):
                if isinstance(outcome, BaseException):
                    raise outcome
            await memory_provider_get().turn_trigger_queue(session=session, trigger=trigger)
        return appended_response(event, last_update_time=session.last_update_time)

    async def _trigger_check(
        self, app_name: str, user_id: str, session_id: str, invocation_id: str
    ) -> object:
        """Which memory trigger the turn that ``invocation_id`` ends meets (None: none)."""
        user_pk = await self.end_user_pk_of(user_id, afresh=False)
        if user_pk is None:
            return None
        return await memory_provider_get().turn_trigger_check(
            app_name=app_name,
            user_id=str(user_pk),
            session_id=session_id,
            invocation_id=invocation_id,
        )

    async def _appended(
        self, event, app_name: str, user_id: str, session_id: str, revision=None
    ) -> Session | HttpResponse:
        """The session with ``event`` appended, or the answer to a rewind event. The end
        user is looked up afresh once if the session is not found under a kept one."""
        afresh = False
        while True:
            user_pk = await self.end_user_pk_of(user_id, afresh=afresh)
            if user_pk is None:
                raise NotFound("No such session.")
            session = Session(id=session_id, app_name=app_name, user_id=str(user_pk))
            if event.actions.rewind_before_invocation_id is not None:
                return await sync_to_async(self._rewind_appended)(session=session, event=event)
            try:
                await SESSIONS.append_event_stored(session, event, revision=revision)
            except SessionNotFoundError:
                if afresh:
                    raise
                afresh = True
                continue
            return session

    def _rewind_appended(self, *, session: Session, event) -> HttpResponse:
        """ADK's ``Runner.rewind_async`` appends its rewind as an event: done here as the
        rewind route does it (later events out of the history, session state replayed, in one
        transaction), the sent event stored with the state delta computed here."""
        try:
            stored = services.session_rewind(
                app_name=session.app_name,
                user_id=session.user_id,
                session_id=session.id,
                rewind_before_invocation_id=event.actions.rewind_before_invocation_id,
                sent=event,
            )
        except IntegrityError:
            raise Conflict(f"An event with id {event.id!r} is already stored.") from None
        record = SessionRecord.objects.filter(
            session_id=session.id, app_name=session.app_name, user_id=session.user_id
        ).values_list("last_update_time", flat=True)
        return appended_response(stored, last_update_time=record.first())


class SessionRewindView(ServiceAPIView):
    @extend_schema(
        operation_id="v1_sessions_rewind_create",
        summary="Revert a session to just before an invocation; answers the session",
        parameters=[APP_NAME, USER_ID, SESSION_ID],
        request=ServiceRewindSerializer,
        responses={200: ServiceSessionDetailSerializer, **WRITE_BODY_ERRORS},
    )
    def post(self, request: Request, app_name: str, user_id: str, session_id: str) -> HttpResponse:
        data = request_data_validated(ServiceRewindSerializer, request.data)
        end_user = self.end_user(user_id)
        if end_user is None:
            raise NotFound("No such session.")
        services.session_rewind(
            app_name=app_name,
            user_id=str(end_user.user_id),
            session_id=session_id,
            rewind_before_invocation_id=data["invocation_id"],
        )
        session = selectors.session_get(
            app_name=app_name,
            user_id=str(end_user.user_id),
            session_id=session_id,
            config=GetSessionConfig(include_rewound=True),
        )
        if session is None:
            raise NotFound("No such session.")
        return session_response(session, external_user_id=user_id)


class UserStateView(ServiceAPIView):
    @extend_schema(
        operation_id="v1_user_state_retrieve",
        summary="The end user's `user:` state in the app",
        parameters=[APP_NAME, USER_ID],
        responses={
            200: OpenApiResponse(description='{"user": {"user:key": value}}'),
            **READ_ERRORS,
        },
    )
    def get(self, request: Request, app_name: str, user_id: str) -> Response:
        end_user = self.end_user(user_id)
        if end_user is None:
            return Response({"user": {}})
        rows = UserState.objects.filter(app_name=app_name, user_id=end_user.user_id)
        return Response({"user": _prefixed(rows, USER_PREFIX)})


class AppStateView(ServiceAPIView):
    @extend_schema(
        operation_id="v1_app_state_retrieve",
        summary="The app's `app:` state",
        parameters=[APP_NAME],
        responses={200: OpenApiResponse(description='{"app": {"app:key": value}}'), **READ_ERRORS},
    )
    def get(self, request: Request, app_name: str) -> Response:
        return Response({"app": _prefixed(AppState.objects.filter(app_name=app_name), APP_PREFIX)})


__all__ = [
    "AppStateView",
    "ServiceSessionSerializer",
    "SessionDetailView",
    "SessionEventsView",
    "SessionListView",
    "SessionRewindView",
    "UserStateView",
]
