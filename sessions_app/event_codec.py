"""Conversion between ``Event`` objects and stored event rows.

Reading is on the hot path of every turn (``get_session``), and validating a
``google.genai.types.Content`` runs a Python validator for every part, so text
parts (almost all of a chat's history) are rebuilt directly from the stored
JSON, which was validated when it was written. Every other part goes through
full validation. Events and their actions are rebuilt the same way when they
hold nothing but plain values (no usage metadata, no compaction).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.genai import types
from pydantic import BaseModel

from sessions_app.events import Event, EventActions

# The columns of EventRecord an Event is read from, in this order.
EVENT_COLUMNS = (
    "event_id",
    "invocation_id",
    "author",
    "timestamp",
    "content",
    "actions",
    "turn_complete",
    "interrupted",
    "branch",
    "error_code",
    "error_message",
    "custom_metadata",
    "usage_metadata",
    "long_running_tool_ids",
)

_PART_DEFAULTS = {
    name: field.get_default(call_default_factory=True)
    for name, field in types.Part.model_fields.items()
}
_TEXT_KEYS = frozenset({"text"})
_CONTENT_DEFAULTS = {
    name: field.get_default(call_default_factory=True)
    for name, field in types.Content.model_fields.items()
}


def _field_slots(model_class: type) -> dict[str, Any]:
    """Every field of a model, in definition order, with its default.

    Fields that are required or have a default factory get None: whoever
    builds an instance from these slots must give them a value.
    """
    return {
        name: None if field.default_factory is not None or field.is_required() else field.default
        for name, field in model_class.model_fields.items()
    }


# A stored row always gives an event's id, author, timestamp and actions, and
# the actions' state_delta (model_dump keeps an empty one).
_EVENT_SLOTS = _field_slots(Event)
_ACTIONS_SLOTS = _field_slots(EventActions)
_PLAIN_ACTIONS = frozenset(
    {
        "state_delta",
        "skip_summarization",
        "transfer_to_agent",
        "escalate",
        "rewind_before_invocation_id",
    }
)
# The EVENT_COLUMNS after the first six, which are Event fields of the same
# names, set only when the column holds a value.
_OPTIONAL_FIELDS = EVENT_COLUMNS[6:]


# A pydantic model instance keeps its state in four slots of BaseModel; setting
# them through their descriptors skips a generic attribute lookup per slot.
_new_instance = object.__new__
_set_dict = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _model_from_trusted(model_class: type, defaults: dict[str, Any], values: dict[str, Any]):
    """Build a pydantic model instance from values already known to be valid.

    Does what ``model_construct`` does, minus its per-field default lookups.
    """
    instance = _new_instance(model_class)
    _set_dict(instance, "__dict__", {**defaults, **values})
    _set_fields_set(instance, set(values))
    _set_extra(instance, None)
    _set_private(instance, None)
    return instance


def _text_part(values: dict[str, Any]) -> types.Part:
    """``_model_from_trusted(types.Part, _PART_DEFAULTS, values)``, inlined: most parts are text."""
    instance = _new_instance(types.Part)
    _set_dict(instance, "__dict__", {**_PART_DEFAULTS, **values})
    _set_fields_set(instance, set(values))
    _set_extra(instance, None)
    _set_private(instance, None)
    return instance


def content_from_stored(data: dict[str, Any] | None) -> types.Content | None:
    if data is None:
        return None
    raw_parts = data.get("parts")
    if raw_parts is None:
        return types.Content.model_validate(data)
    parts = []
    for part in raw_parts:
        if part.keys() != _TEXT_KEYS:
            return types.Content.model_validate(data)
        parts.append(_text_part(part))
    values: dict[str, Any] = {"parts": parts}
    if "role" in data:
        values["role"] = data["role"]
    return _model_from_trusted(types.Content, _CONTENT_DEFAULTS, values)


def content_to_stored(content: types.Content | None) -> dict[str, Any] | None:
    if content is None:
        return None
    return content.model_dump(mode="json", exclude_none=True)


def event_from_row(row: Sequence[Any]) -> Event:
    """An Event from a sequence of ``EVENT_COLUMNS`` values, JSON columns already decoded.

    The same Event, with the same fields set, as ``Event.model_validate``
    gives; rows with usage metadata or other than plain actions are validated.
    """
    event_id, invocation_id, author, timestamp, content, actions, *optional = row
    data: dict[str, Any] = {
        "id": event_id,
        "invocation_id": invocation_id,
        "author": author,
        "timestamp": timestamp,
        "content": content_from_stored(content),
        "actions": actions,
    }
    for name, value in zip(_OPTIONAL_FIELDS, optional, strict=True):
        if value is not None and value != "":
            data[name] = value
    if (
        "usage_metadata" not in data
        and "state_delta" in actions
        and actions.keys() <= _PLAIN_ACTIONS
    ):
        data["actions"] = _model_from_trusted(EventActions, _ACTIONS_SLOTS, actions)
        if "long_running_tool_ids" in data:
            data["long_running_tool_ids"] = set(data["long_running_tool_ids"])
        instance = _new_instance(Event)
        _set_dict(instance, "__dict__", {**_EVENT_SLOTS, **data})
        _set_fields_set(instance, set(data))
        _set_extra(instance, None)
        _set_private(instance, None)
        return instance
    return Event.model_validate(data)


def event_to_record_fields(event: Event) -> dict[str, Any]:
    """The EventRecord field values of an event (its state_delta already stripped of temp:)."""
    usage = (
        event.usage_metadata.model_dump(mode="json", exclude_none=True)
        if event.usage_metadata
        else None
    )
    return {
        "event_id": event.id,
        "invocation_id": event.invocation_id,
        "author": event.author,
        "timestamp": event.timestamp,
        "content": content_to_stored(event.content),
        "actions": event.actions.model_dump(mode="json", exclude_none=True),
        "turn_complete": event.turn_complete,
        "interrupted": event.interrupted,
        "branch": event.branch or "",
        "error_code": event.error_code or "",
        "error_message": event.error_message or "",
        "custom_metadata": event.custom_metadata,
        "usage_metadata": usage,
        "long_running_tool_ids": sorted(event.long_running_tool_ids)
        if event.long_running_tool_ids
        else None,
    }
