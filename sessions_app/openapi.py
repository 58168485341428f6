"""The OpenAPI schema of events: the ``Event`` model's own JSON schema as components, narrowed
for the events an end user appends, and the schema extensions of the serializers that carry
events (registered by ``SessionsAppConfig.ready``)."""

from __future__ import annotations

import copy
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.plumbing import ResolvedComponent
from pydantic.json_schema import model_json_schema

from sessions_app.end_user import AGENT_ONLY_ACTIONS, END_USER_ROLE, TOOL_PARTS
from sessions_app.events import (
    SERVER_EVENT_ID_PREFIXES,
    TIMESTAMP_MAX,
    TIMESTAMP_MIN,
    TIMESTAMP_RANGE_MESSAGE,
    Event,
)
from sessions_app.serializers import (
    STATE_KEY_SCHEMA,
    EventCreateSerializer,
    StoredEventSerializer,
)
from sessions_app.state import APP_PREFIX


def event_schema(auto_schema) -> dict[str, Any]:
    """The ``Event`` model's JSON schema (field names as sent, not the camelCase aliases),
    with the models it refers to registered as components."""
    schema = model_json_schema(
        Event, by_alias=False, ref_template="#/components/schemas/{model}", mode="validation"
    )
    for name, sub_schema in schema.pop("$defs", {}).items():
        if name == "EventActions":
            sub_schema["properties"]["state_delta"]["propertyNames"] = STATE_KEY_SCHEMA
        _component_register(auto_schema, name, sub_schema)
    return schema


def _component_register(auto_schema, name: str, schema: dict[str, Any]) -> None:
    auto_schema.registry.register_on_missing(
        ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=schema)
    )


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


NOT_FROM_AN_END_USER = {"type": "null", "description": "Only an agent's events carry it."}


def end_user_event_components(auto_schema) -> None:
    """``UserContent``, ``UserPart`` and ``UserEventActions``: ADK's ``Content``, ``Part`` and
    ``EventActions`` narrowed to what an end user may append (``sessions_app.end_user``), so
    that the schema of the events a person sends refuses what the API refuses."""
    defs = model_json_schema(
        Event, by_alias=False, ref_template="#/components/schemas/{model}", mode="validation"
    )["$defs"]
    part = copy.deepcopy(defs["Part"])
    part["title"] = "UserPart"
    for kind, refusal in TOOL_PARTS.items():
        part["properties"][kind] = {"type": "null", "description": refusal}
    content = copy.deepcopy(defs["Content"])
    content["title"] = "UserContent"
    content["properties"]["parts"]["anyOf"][0]["items"] = _ref("UserPart")
    content["properties"]["role"] = {
        "anyOf": [{"type": "string", "enum": [END_USER_ROLE]}, {"type": "null"}],
        "default": None,
        "description": f"Events you append are in the {END_USER_ROLE!r} role.",
    }
    actions = copy.deepcopy(defs["EventActions"])
    actions["title"] = "UserEventActions"
    actions["properties"]["state_delta"]["propertyNames"] = {
        **STATE_KEY_SCHEMA,
        "not": {"pattern": f"^{APP_PREFIX}"},
        "description": "`app:` keys are written only by the app's agent, its service "
        "accounts and staff.",
    }
    for name in AGENT_ONLY_ACTIONS:
        actions["properties"][name] = NOT_FROM_AN_END_USER
    actions["properties"]["rewind_before_invocation_id"] = {
        "type": "null",
        "description": "Rewinds are made with POST /api/sessions/<session_id>/rewind/.",
    }
    actions["additionalProperties"] = False
    components = {"UserPart": part, "UserContent": content, "UserEventActions": actions}
    for name, schema in components.items():
        _component_register(auto_schema, name, schema)


class EventCreateSerializerSchema(OpenApiSerializerExtension):
    target_class = EventCreateSerializer

    def get_name(self, auto_schema, direction) -> str:
        return "Event"

    def map_serializer(self, auto_schema, direction) -> dict[str, Any]:
        schema = event_schema(auto_schema)
        schema["additionalProperties"] = False
        schema["properties"]["id"]["minLength"] = 1
        schema["properties"]["id"]["not"] = {
            "pattern": "^(" + "|".join(SERVER_EVENT_ID_PREFIXES) + ")"
        }
        # What the API refuses of an end user's event, said in the schema's own terms.
        schema["properties"]["author"] = {
            "title": "Author",
            "type": "string",
            "enum": ["user"],
            "description": "Events you append are authored `user`.",
        }
        schema["properties"]["partial"] = {
            "title": "Partial",
            "anyOf": [{"type": "boolean", "enum": [False]}, {"type": "null"}],
            "default": None,
            "description": "Partial (streaming) events are refused.",
        }
        end_user_event_components(auto_schema)
        schema["properties"]["content"] = {
            "anyOf": [_ref("UserContent"), {"type": "null"}],
            "default": None,
        }
        schema["properties"]["actions"] = _ref("UserEventActions")
        schema["properties"]["timestamp"].update(
            minimum=TIMESTAMP_MIN, maximum=TIMESTAMP_MAX, description=TIMESTAMP_RANGE_MESSAGE
        )
        schema["description"] = (
            "An event to append (ADK's Event). `partial` events and "
            "`actions.rewind_before_invocation_id` are refused."
        )
        return schema


class StoredEventSerializerSchema(OpenApiSerializerExtension):
    target_class = StoredEventSerializer

    def get_name(self, auto_schema, direction) -> str:
        return "StoredEvent"

    def map_serializer(self, auto_schema, direction) -> dict[str, Any]:
        schema = event_schema(auto_schema)
        schema["title"] = "StoredEvent"
        schema["description"] = "A stored event: ADK's Event JSON without its null fields."
        schema["properties"]["sequence"] = {
            "type": "integer",
            "minimum": 1,
            "description": "Position in the session, from 1, without gaps.",
        }
        del schema["properties"]["partial"]
        schema["properties"]["rewound"] = {
            "type": "boolean",
            "description": "True when a rewind took the event out of the history.",
        }
        schema["properties"]["html"] = {
            "type": "string",
            "description": "The event's text rendered from Markdown to safe HTML; "
            "only on events with text.",
        }
        schema["required"] = [
            "id",
            "invocation_id",
            "author",
            "actions",
            "timestamp",
            "sequence",
            "rewound",
        ]
        return schema
