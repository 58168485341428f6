"""Request and response shapes of the service-account API (ADK's session and memory JSON)."""

from __future__ import annotations

from typing import Any

import pydantic_core
from django.http import HttpResponse
from drf_spectacular.extensions import OpenApiSerializerExtension
from rest_framework import serializers

from agents_app.models import MemoryLifetime
from core.api import StrictCharField
from sessions_app.events import TIMESTAMP_MAX, TIMESTAMP_MIN, TIMESTAMP_RANGE_MESSAGE, Event
from sessions_app.openapi import event_schema
from sessions_app.selectors import MAX_PAGE_SIZE
from sessions_app.serializers import (
    MAX_RECENT_EVENTS,
    EventCreateSerializer,
    StateField,
    identifier_field,
)
from sessions_app.types import Session

MAX_SEARCH_LIMIT = 50
MAX_MEMORY_CHARS = 2000


def session_json(session: Session, *, external_user_id: str) -> dict[str, Any]:
    """A session as ADK's Session JSON without its events, named by the end user's own id."""
    return {
        "id": session.id,
        "app_name": session.app_name,
        "user_id": external_user_id,
        "state": session.state,
        "last_update_time": session.last_update_time,
    }


def session_response(session: Session, *, external_user_id: str, status: int = 200) -> HttpResponse:
    """``session_json`` with its events, as a response: the JSON of ADK's ``get_session``,
    which an agent calls at every step. Made in one pass of pydantic's encoder rather than as
    dicts encoded again by DRF, which took twice as long for the last 20 events of a chat."""
    data = session_json(session, external_user_id=external_user_id)
    data["events"] = session.events
    return _json_response(data, status=status)


def appended_response(event: Event, *, last_update_time: float) -> HttpResponse:
    """The 201 of an appended event (``ServiceAppendedSerializer``), made as
    ``session_response``."""
    return _json_response({"event": event, "last_update_time": last_update_time}, status=201)


def _json_response(data: dict[str, Any], *, status: int) -> HttpResponse:
    """``data``, holding plain JSON values and events, as JSON: each event as ADK's Event JSON
    without its null fields, the fields ADK added kept; every other value as it is."""
    body = pydantic_core.to_json(data, by_alias=False, exclude_none=True)
    return HttpResponse(body, status=status, content_type="application/json")


class ServiceSessionCreateSerializer(serializers.Serializer):
    session_id = identifier_field(required=False, help_text="A new id is made when left out.")
    state = StateField(
        required=False,
        help_text="Initial state of any scope: `app:` and `user:` keys go to the shared scopes, "
        "`temp:` keys are dropped.",
    )


class ServiceSessionListQuerySerializer(serializers.Serializer):
    page_size = serializers.IntegerField(min_value=1, max_value=MAX_PAGE_SIZE, default=20)
    page_token = serializers.CharField(required=False, allow_blank=True)


class ServiceSessionGetQuerySerializer(serializers.Serializer):
    num_recent_events = serializers.IntegerField(
        min_value=0, max_value=MAX_RECENT_EVENTS, required=False
    )
    after_timestamp = serializers.FloatField(required=False)


class ServiceEventQuerySerializer(serializers.Serializer):
    """ADK's stale-session check, asked for by giving what the writer's copy of the session
    holds; without ``stale_check_last_update_time`` there is none."""

    stale_check_last_update_time = serializers.FloatField(
        required=False,
        help_text="The copy's last_update_time: the append is refused (409, code "
        "`stale_session`) if the session was updated since and its newest event is not the "
        "copy's, as ADK's DatabaseSessionService refuses a stale session.",
    )
    stale_check_last_event_id = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="The id of the copy's newest event; empty or left out: it holds none.",
    )


class ServiceEventSerializer(EventCreateSerializer):
    """ADK's Event JSON, any author and any state_delta scope: a service account writes for
    its app. Fields this server does not model are kept and given back."""

    unmodelled_fields_allowed = True


class ServiceRewindSerializer(serializers.Serializer):
    invocation_id = StrictCharField(max_length=128, trim_whitespace=False)


class ServiceSessionSerializer(serializers.Serializer):
    id = serializers.CharField()
    app_name = serializers.CharField()
    user_id = serializers.CharField(help_text="The end user's id in the app.")
    state = serializers.DictField(help_text="Merged: session keys, then `app:` and `user:` keys.")
    last_update_time = serializers.FloatField()


class ServiceSessionDetailSerializer(ServiceSessionSerializer):
    events = serializers.ListField(
        child=serializers.DictField(), help_text="ADK Event JSON, oldest first."
    )


class ServiceSessionPageSerializer(serializers.Serializer):
    sessions = ServiceSessionSerializer(many=True)
    next_page_token = serializers.CharField(allow_null=True)


class ServiceAppendedSerializer(serializers.Serializer):
    event = serializers.DictField(help_text="The stored event, ADK Event JSON.")
    last_update_time = serializers.FloatField()


class MemoryGenerateSerializer(serializers.Serializer):
    session_id = identifier_field()


class MemoryEventsSerializer(serializers.Serializer):
    session_id = identifier_field(
        required=False,
        help_text="The session the events come from, if any: those it stores already are "
        "read from it; it need not exist.",
    )
    events = serializers.ListField(child=serializers.DictField(), allow_empty=False, min_length=1)
    custom_metadata = serializers.DictField(required=False)


class MemoryLifetimeSerializer(serializers.Serializer):
    memory_lifetime = serializers.ChoiceField(
        choices=MemoryLifetime.values,
        help_text="`follow_sources` (the default): a deleted session takes the memories drawn "
        "only from it, and the others are derived again from what remains; "
        "`outlive_sessions`: memories stay when their session is deleted, their history "
        "saying so (as an ADK app that cleans up sessions after adding them to memory "
        "expects).",
    )


class MemoryCreateSerializer(serializers.Serializer):
    text = StrictCharField(max_length=MAX_MEMORY_CHARS)
    topic = StrictCharField(max_length=64, required=False, default="", allow_blank=True)
    metadata = serializers.DictField(required=False)
    scope = serializers.ChoiceField(
        choices=["user", "session"],
        default="user",
        help_text="`session`: it holds for the conversation `session_id` only, is recalled "
        "there alone and is deleted with it.",
    )
    session_id = identifier_field(required=False)

    def validate(self, attrs: dict) -> dict:
        if attrs["scope"] == "session" and not attrs.get("session_id"):
            raise serializers.ValidationError({"session_id": ["A session memory needs it."]})
        return attrs


class AppMemoryUpdateSerializer(serializers.Serializer):
    text = StrictCharField(max_length=MAX_MEMORY_CHARS, required=False)
    topic = StrictCharField(max_length=64, required=False, allow_blank=True)

    def validate(self, attrs: dict) -> dict:
        if not attrs:
            raise serializers.ValidationError("Send the new text, the new topic, or both.")
        return attrs


class MemorySearchQuerySerializer(serializers.Serializer):
    query = serializers.CharField(max_length=MAX_MEMORY_CHARS)
    limit = serializers.IntegerField(min_value=1, max_value=MAX_SEARCH_LIMIT, default=10)


class JobSerializer(serializers.Serializer):
    job_id = serializers.CharField()
    status = serializers.CharField(help_text="queued, running, done, failed or dead.")
    error = serializers.CharField(allow_null=True)


class MemoryEventsJobSerializer(JobSerializer):
    job_ids = serializers.ListField(
        child=serializers.CharField(),
        help_text="Every job the call queued (the given session's and the events' own).",
    )


class AppMemoryUpdateSerializerSchema(OpenApiSerializerExtension):
    """The correction of an app memory as the API takes it: at least one of its fields."""

    target_class = AppMemoryUpdateSerializer

    def map_serializer(self, auto_schema, direction) -> dict[str, Any]:
        schema = auto_schema._map_basic_serializer(self.target, direction)
        schema["minProperties"] = 1
        return schema


class ServiceEventSerializerSchema(OpenApiSerializerExtension):
    """ADK's Event as the service API takes it: the Event schema, other fields allowed."""

    target_class = ServiceEventSerializer

    def get_name(self, auto_schema, direction) -> str:
        return "AdkEvent"

    def map_serializer(self, auto_schema, direction) -> dict[str, Any]:
        schema = event_schema(auto_schema)
        schema["additionalProperties"] = True
        schema["properties"]["timestamp"].update(
            minimum=TIMESTAMP_MIN, maximum=TIMESTAMP_MAX, description=TIMESTAMP_RANGE_MESSAGE
        )
        schema["description"] = (
            "An event to append (ADK's Event JSON). Fields this server does not model are "
            "kept and given back; `partial` events are refused; an "
            "`actions.rewind_before_invocation_id` rewinds the session as the rewind route does."
        )
        return schema
