"""Long-term memory of an app's end users: ADK's ``BaseMemoryService`` over HTTP.

Generation runs in the background (a job the caller can poll); search, add and delete act at
once. An end user's memories are isolated as a browser user's are: they key on the account.
"""

from __future__ import annotations

import uuid

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from agents_app.app_policy import app_settings_of
from agents_app.models import EndUser, Scope
from agents_app.redaction import event_redact
from agents_app.service_api.base import APP_NAME, NO_KEY, NO_SCOPE, UNKNOWN, USER_ID
from agents_app.service_api.base import ServiceAPIView as _ServiceAPIView
from agents_app.service_api.serializers import (
    AppMemoryUpdateSerializer,
    JobSerializer,
    MemoryCreateSerializer,
    MemoryEventsJobSerializer,
    MemoryEventsSerializer,
    MemoryGenerateSerializer,
    MemoryLifetimeSerializer,
    MemorySearchQuerySerializer,
    ServiceEventSerializer,
)
from agents_app.services import app_memory_lifetime_set
from core.api import BAD_REQUEST, TOO_LARGE, UNSUPPORTED, request_data_validated
from memory_app import selectors as memory_selectors
from memory_app import services as memory_services
from memory_app.extraction import ExtractedFact
from memory_app.models import GenerationJob, Memory, MemoryScope, SourceType
from memory_app.services.app_memories import (
    AppMemoryError,
    app_memories,
    app_memory_create,
    app_memory_delete,
    app_memory_update,
)
from sessions_app import selectors as session_selectors
from sessions_app import services as session_services
from sessions_app.api import EventJSONParser

JOB_STATUS = {
    GenerationJob.Status.QUEUED: "queued",
    GenerationJob.Status.RUNNING: "running",
    GenerationJob.Status.SUCCEEDED: "done",
    GenerationJob.Status.SKIPPED: "done",
    GenerationJob.Status.FAILED: "failed",
    GenerationJob.Status.DEAD: "dead",
}
ERRORS = {401: NO_KEY, 403: NO_SCOPE, 404: UNKNOWN}
BODY_ERRORS = {400: BAD_REQUEST, **ERRORS, 413: TOO_LARGE, 415: UNSUPPORTED}
MEMORY_ID = OpenApiParameter("memory_id", str, OpenApiParameter.PATH)
MAX_APP_MEMORIES = 500


def job_json(job: GenerationJob | None) -> dict:
    if job is None:
        return {"job_id": None, "status": "done", "error": None}
    failed = job.status in (GenerationJob.Status.FAILED, GenerationJob.Status.DEAD)
    return {
        "job_id": str(job.id),
        "status": JOB_STATUS[job.status],
        "error": (job.error or "failed") if failed else None,
    }


def memory_json(result: memory_selectors.ScoredMemory) -> dict:
    return {
        "id": result.id,
        "text": result.text,
        "score": result.score,
        "topic": result.topic,
        "timestamp": result.updated_at.isoformat(),
        "author": "app" if result.scope == "app" else "user",
        "sources": [{"session_id": s.session_id, "event_id": s.event_id} for s in result.sources],
    }


def stored_memory_json(memory: Memory) -> dict:
    return {
        "id": str(memory.id),
        "text": memory.text,
        "scope": memory.scope,
        "session_id": memory.session.session_id if memory.session_id else None,
        "topic": memory.topic,
        "timestamp": memory.updated_at.isoformat(),
        "author": "app" if memory.user_id is None else "user",
        "source_type": memory.source_type,
        "sources": [],
    }


class ServiceAPIView(_ServiceAPIView):
    read_scope = Scope.MEMORY_READ
    write_scope = Scope.MEMORY_WRITE

    def owned_session_of(self, end_user: EndUser | None, session_id: str) -> str:
        """The key of this end user's session ``session_id`` in this app; 404 for any other."""
        key = (
            session_selectors.session_key_get(
                app_name=self.app.name, user_pk=end_user.user_id, session_id=session_id
            )
            if end_user is not None
            else None
        )
        if key is None:
            raise NotFound("No such session.")
        return key


class MemoryGenerateView(ServiceAPIView):
    @extend_schema(
        operation_id="v1_memory_generate",
        summary="Turn a session's new events into memories, in the background",
        description="ADK's add_session_to_memory. Answers the job; `job_id` is null when the "
        "end user's memory creation is off (nothing to do).",
        parameters=[APP_NAME, USER_ID],
        request=MemoryGenerateSerializer,
        responses={202: JobSerializer, **BODY_ERRORS},
    )
    def post(self, request: Request, app_name: str, user_id: str) -> Response:
        data = request_data_validated(MemoryGenerateSerializer, request.data)
        end_user = self.end_user(user_id)
        session_key = self.owned_session_of(end_user, data["session_id"])
        job = memory_services.memory_job_request(
            app_name=app_name,
            user_pk=end_user.user_id,
            session_id=session_key,
            trigger=GenerationJob.Trigger.SESSION_END,
        )
        return Response(job_json(job), status=status.HTTP_202_ACCEPTED)


class MemoryEventsView(ServiceAPIView):
    parser_classes = [EventJSONParser]

    @extend_schema(
        operation_id="v1_memory_events",
        summary="Turn the given events into memories, in the background",
        description="ADK's add_events_to_memory: the events feed memory generation only. "
        "Those the named session already stores are read from it; the others are kept in a "
        "session of their own that no conversation, session list or search shows (their state "
        "deltas not applied), so each memory still links to the event it came from. Answers "
        "the last job queued and, in `job_ids`, every one.",
        parameters=[APP_NAME, USER_ID],
        request=MemoryEventsSerializer,
        responses={202: MemoryEventsJobSerializer, **BODY_ERRORS},
    )
    def post(self, request: Request, app_name: str, user_id: str) -> Response:
        data = request_data_validated(MemoryEventsSerializer, request.data)
        events = []
        for index, raw in enumerate(data["events"]):
            serializer = ServiceEventSerializer(data=raw)
            if not serializer.is_valid():
                raise ValidationError({f"events.{index}": serializer.errors})
            events.append(serializer.validated_data)
        end_user = self.end_user(user_id, create=True)
        named_key = None
        if data.get("session_id"):
            named_key = session_selectors.session_key_get(
                app_name=app_name, user_pk=end_user.user_id, session_id=data["session_id"]
            )
        stored_ids = set()
        if named_key is not None:
            stored_ids = session_selectors.event_ids_stored(
                session_key=named_key, event_ids=[event.id for event in events]
            )
        given = [event for event in events if event.id not in stored_ids]
        if app_settings_of(self.app).pii_redaction:
            for event in given:
                event_redact(event)
        session_keys = [named_key] if stored_ids else []
        if given:
            session_keys.append(
                session_services.memory_events_store(
                    app_name=app_name, user_id=str(end_user.user_id), events=given
                )
            )
        jobs = [
            memory_services.memory_job_request(
                app_name=app_name,
                user_pk=end_user.user_id,
                session_id=key,
                trigger=GenerationJob.Trigger.SESSION_END,
            )
            for key in session_keys
        ]
        answer = job_json(jobs[-1])
        answer["job_ids"] = [str(job.id) for job in jobs if job is not None]
        return Response(answer, status=status.HTTP_202_ACCEPTED)


class MemoryListView(ServiceAPIView):
    @extend_schema(
        operation_id="v1_memories_create",
        summary="Add a memory the end user stated (ADK's add_memory)",
        description="Goes through consolidation and its safety checks like any fact; answers "
        "the memory kept (a new one, or the existing one it matched). With `scope` `session`, "
        "it holds for that session only (recalled there alone, deleted with it).",
        parameters=[APP_NAME, USER_ID],
        request=MemoryCreateSerializer,
        responses={201: OpenApiResponse(description="The memory."), **BODY_ERRORS},
    )
    def post(self, request: Request, app_name: str, user_id: str) -> Response:
        data = request_data_validated(MemoryCreateSerializer, request.data)
        session_id = data.get("session_id") if data["scope"] == MemoryScope.SESSION else None
        end_user = self.end_user(user_id, create=session_id is None)
        session_key = None
        if session_id is not None:
            session_key = self.owned_session_of(end_user, session_id)
        fact = ExtractedFact(
            text=data["text"],
            topic=data["topic"],
            source_type=SourceType.EXPLICIT,
            confidence=0.9,
            importance=0.5,
            scope=MemoryScope(data["scope"]),
        )
        key = request.user.key
        report = memory_services.memory_facts_store(
            app_name=app_name,
            user_pk=end_user.user_id,
            session_id=session_key,
            facts=[fact],
            added_by=f"added through the API by the service account "
            f"\u201c{key.service_account.name}\u201d (key {key.prefix})",
        )
        kept = report.created + report.updated + report.unchanged
        if not kept:
            held = report.quarantined[0].review_reason if report.quarantined else ""
            raise ValidationError(
                {"text": [f"Not saved as a memory: {held or 'it failed the safety check'}."]}
            )
        return Response(stored_memory_json(kept[0]), status=status.HTTP_201_CREATED)


class MemorySearchView(ServiceAPIView):
    @extend_schema(
        operation_id="v1_memories_search",
        summary="The end user's memories (and the app's) most relevant to a query",
        parameters=[APP_NAME, USER_ID, MemorySearchQuerySerializer],
        responses={
            200: OpenApiResponse(description='{"memories": [...]}'),
            400: BAD_REQUEST,
            **ERRORS,
        },
    )
    def get(self, request: Request, app_name: str, user_id: str) -> Response:
        query = request_data_validated(MemorySearchQuerySerializer, request.query_params)
        end_user = self.end_user(user_id)
        if end_user is None:
            return Response({"memories": []})
        results = memory_selectors.memory_search(
            app_name=app_name, user_pk=end_user.user_id, query=query["query"], limit=query["limit"]
        )
        return Response({"memories": [memory_json(result) for result in results]})


class MemoryDetailView(ServiceAPIView):
    @extend_schema(
        operation_id="v1_memories_destroy",
        summary="Delete one of the end user's memories (ADK's delete_memory)",
        parameters=[APP_NAME, USER_ID, MEMORY_ID],
        responses={204: None, **ERRORS},
    )
    def delete(self, request: Request, app_name: str, user_id: str, memory_id: str) -> Response:
        end_user = self.end_user(user_id)
        deleted = end_user is not None and memory_services.memory_delete(
            app_name=app_name, user_pk=end_user.user_id, memory_id=memory_id
        )
        if not deleted:
            raise NotFound("No such memory.")
        return Response(status=status.HTTP_204_NO_CONTENT)


class JobDetailView(ServiceAPIView):
    @extend_schema(
        operation_id="v1_jobs_retrieve",
        summary="A memory generation job's status",
        parameters=[APP_NAME, OpenApiParameter("job_id", str, OpenApiParameter.PATH)],
        responses={200: JobSerializer, **ERRORS},
    )
    def get(self, request: Request, app_name: str, job_id: str) -> Response:
        job = None
        if _is_uuid(job_id):
            job = GenerationJob.objects.filter(
                pk=job_id, app_name=app_name, user__end_user__app=self.app
            ).first()
        if job is None:
            raise NotFound("No such job.")
        return Response(job_json(job))


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


class AppMemoryLifetimeView(ServiceAPIView):
    """Whether the app's memories follow their sources or outlive their sessions."""

    read_scope = Scope.MEMORY_READ
    write_scope = Scope.MEMORY_WRITE

    @extend_schema(
        operation_id="v1_memory_lifetime_retrieve",
        summary="Whether the app's memories outlive their sessions",
        parameters=[APP_NAME],
        responses={200: MemoryLifetimeSerializer, **ERRORS},
    )
    def get(self, request: Request, app_name: str) -> Response:
        return Response({"memory_lifetime": self.app.memory_lifetime})

    @extend_schema(
        operation_id="v1_memory_lifetime_update",
        summary="Choose whether the app's memories outlive their sessions",
        description="Applies to sessions deleted from then on.",
        parameters=[APP_NAME],
        request=MemoryLifetimeSerializer,
        responses={200: MemoryLifetimeSerializer, **BODY_ERRORS},
    )
    def put(self, request: Request, app_name: str) -> Response:
        data = request_data_validated(MemoryLifetimeSerializer, request.data)
        app = app_memory_lifetime_set(app=self.app, lifetime=data["memory_lifetime"])
        return Response({"memory_lifetime": app.memory_lifetime})


class AppMemoryListView(ServiceAPIView):
    @extend_schema(
        operation_id="v1_app_memories_list",
        summary="The app's shared memories (every user's agent knows them), newest first",
        parameters=[APP_NAME],
        responses={200: OpenApiResponse(description='{"memories": [Memory]}'), **ERRORS},
    )
    def get(self, request: Request, app_name: str) -> Response:
        rows = app_memories(app_name=app_name)[:MAX_APP_MEMORIES]
        return Response({"memories": [stored_memory_json(memory) for memory in rows]})

    @extend_schema(
        operation_id="v1_app_memories_create",
        summary="Add a shared memory of the app (bootstrapped: the highest trust)",
        description="Shared knowledge, or procedural memory: how the app's agent handles a "
        "recurring task. Recorded with a revision naming the service account.",
        parameters=[APP_NAME],
        request=MemoryCreateSerializer,
        responses={201: OpenApiResponse(description="The memory."), **BODY_ERRORS},
    )
    def post(self, request: Request, app_name: str) -> Response:
        data = request_data_validated(MemoryCreateSerializer, request.data)
        account = request.user.key.service_account
        try:
            memory = app_memory_create(
                app_name=app_name,
                text=data["text"],
                topic=data["topic"],
                reason=f"added by the service account {account.name!r}",
            )
        except AppMemoryError as error:
            raise ValidationError({"text": [str(error)]}) from None
        return Response(stored_memory_json(memory), status=status.HTTP_201_CREATED)


class AppMemoryDetailView(ServiceAPIView):
    @extend_schema(
        operation_id="v1_app_memories_partial_update",
        summary="Correct one of the app's shared memories (its text, its topic)",
        description="Recorded as an `updated` revision with the old text, naming the service "
        "account; the memory stays bootstrapped.",
        parameters=[APP_NAME, MEMORY_ID],
        request=AppMemoryUpdateSerializer,
        responses={200: OpenApiResponse(description="The memory."), **BODY_ERRORS},
    )
    def patch(self, request: Request, app_name: str, memory_id: str) -> Response:
        data = request_data_validated(AppMemoryUpdateSerializer, request.data)
        if not _is_uuid(memory_id):
            raise NotFound("No such app memory.")
        account = request.user.key.service_account
        try:
            memory = app_memory_update(
                app_name=app_name,
                memory_id=memory_id,
                text=data.get("text"),
                topic=data.get("topic"),
                reason=f"corrected by the service account {account.name!r}",
            )
        except AppMemoryError as error:
            raise ValidationError({"text": [str(error)]}) from None
        if memory is None:
            raise NotFound("No such app memory.")
        return Response(stored_memory_json(memory))

    @extend_schema(
        operation_id="v1_app_memories_destroy",
        summary="Delete one of the app's shared memories",
        parameters=[APP_NAME, MEMORY_ID],
        responses={204: None, **ERRORS},
    )
    def delete(self, request: Request, app_name: str, memory_id: str) -> Response:
        if not _is_uuid(memory_id) or not app_memory_delete(app_name=app_name, memory_id=memory_id):
            raise NotFound("No such app memory.")
        return Response(status=status.HTTP_204_NO_CONTENT)
