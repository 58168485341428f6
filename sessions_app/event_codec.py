"""Conversion between ``Event`` objects and stored event rows.

Reading is on the hot path of every turn (``get_session``), and validating a
``google.genai.types.Content`` runs a Python validator for every part, so text
parts (almost all of a chat's history) are rebuilt directly from the stored
JSON, which was validated when it was written. Every other part goes through
full validation. Events and their actions are rebuilt the same way when they
hold nothing but plain values (no usage metadata, no compaction).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from google.genai import types
from pydantic import BaseModel

from sessions_app.event_blobs import content_blobs_inlined, content_has_blobs
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
    "extra",
)


def _shared_keys(values: dict[str, Any]) -> dict[str, Any]:
    """A dict equal to ``values`` whose copies share one key table.

    An instance's attribute dict is such a dict, and so are its copies: each
    holds only its values, about half the memory of a plain dict of the same
    keys, and is quicker to make and to free. The ``__dict__`` of every model
    instance built below is a copy of one of these.
    """

    class Holder:
        pass

    holder = Holder()
    for name, value in values.items():
        setattr(holder, name, value)
    return holder.__dict__


_PART_DEFAULTS = _shared_keys(
    {
        name: field.get_default(call_default_factory=True)
        for name, field in types.Part.model_fields.items()
    }
)
_TEXT_KEYS = frozenset({"text"})
_CONTENT_DEFAULTS = _shared_keys(
    {
        name: field.get_default(call_default_factory=True)
        for name, field in types.Content.model_fields.items()
    }
)


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
_EVENT_SLOTS = _shared_keys(_field_slots(Event))
_ACTIONS_SLOTS = _shared_keys(_field_slots(EventActions))
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
# What the optional columns hold when none is set: the shape of most rows.
_NO_OPTIONAL_VALUES = (None, None, "", "", "", None, None, None, None)
_BOOLEAN_OPTIONAL_INDEXES = (
    _OPTIONAL_FIELDS.index("turn_complete"),
    _OPTIONAL_FIELDS.index("interrupted"),
)
# The Event fields every row sets.
_ALWAYS_SET = frozenset({"id", "invocation_id", "author", "content", "actions", "timestamp"})
_USAGE_INDEX = _OPTIONAL_FIELDS.index("usage_metadata")
_TOOL_IDS_INDEX = _OPTIONAL_FIELDS.index("long_running_tool_ids")
_EXTRA_INDEX = _OPTIONAL_FIELDS.index("extra")


# A pydantic model instance keeps its state in four slots of BaseModel; setting
# them through their descriptors skips a generic attribute lookup per slot.
_new_instance = object.__new__
_set_dict = object.__setattr__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _text_content(data: dict[str, Any]) -> types.Content | None:
    """Stored content whose parts are all text alone, built without validation; else None."""
    raw_parts = data.get("parts")
    if raw_parts is None:
        return None
    parts = []
    for part in raw_parts:
        if part.keys() != _TEXT_KEYS:
            return None
        part_values = _PART_DEFAULTS.copy()
        part_values["text"] = part["text"]
        instance = _new_instance(types.Part)
        _set_dict(instance, "__dict__", part_values)
        _set_fields_set(instance, {"text"})
        _set_extra(instance, None)
        _set_private(instance, None)
        parts.append(instance)
    values = _CONTENT_DEFAULTS.copy()
    values["parts"] = parts
    instance = _new_instance(types.Content)
    if "role" in data:
        values["role"] = data["role"]
        _set_fields_set(instance, {"parts", "role"})
    else:
        _set_fields_set(instance, {"parts"})
    _set_dict(instance, "__dict__", values)
    _set_extra(instance, None)
    _set_private(instance, None)
    return instance


def content_from_stored(data: dict[str, Any] | None) -> types.Content | None:
    """The content a row holds, its large parts read back whole (``event_blobs``)."""
    if data is None:
        return None
    content = _text_content(data)
    if content is not None:
        return content
    if content_has_blobs(data):
        data = content_blobs_inlined(data)
    return types.Content.model_validate(data)


def content_to_stored(content: types.Content | None) -> dict[str, Any] | None:
    if content is None:
        return None
    return content.model_dump(mode="json", exclude_none=True)


def _optional_values(values: Sequence[Any]) -> dict[str, Any]:
    """The optional fields a row sets; booleans may arrive as integers (SQLite)."""
    data = {}
    for index, (name, value) in enumerate(zip(_OPTIONAL_FIELDS, values, strict=True)):
        if value is None or value == "":
            continue
        if index in _BOOLEAN_OPTIONAL_INDEXES and value.__class__ is int:
            value = bool(value)
        elif index == _TOOL_IDS_INDEX:
            value = set(value)
        elif index == _EXTRA_INDEX:
            data.update(value)
            continue
        data[name] = value
    return data


def event_from_row(row: Sequence[Any]) -> Event:
    """An Event from a sequence of ``EVENT_COLUMNS`` values, JSON columns already decoded.

    The same Event, with the same fields set, as ``Event.model_validate``
    gives; rows with usage metadata or other than plain actions are validated.
    """
    event_id, invocation_id, author, timestamp, content, actions = row[:6]
    optional = tuple(row[6:])
    if (
        optional[_USAGE_INDEX] is None
        and optional[_EXTRA_INDEX] is None
        and "state_delta" in actions
        and actions.keys() <= _PLAIN_ACTIONS
    ):
        return _event_from_trusted(
            event_id, invocation_id, author, timestamp, content, actions, optional
        )
    data: dict[str, Any] = {
        "id": event_id,
        "invocation_id": invocation_id,
        "author": author,
        "timestamp": timestamp,
        "content": content_from_stored(content),
        "actions": actions,
        **_optional_values(optional),
    }
    return Event.model_validate(data)


def _event_from_trusted(
    event_id: str,
    invocation_id: str,
    author: str,
    timestamp: float,
    content: dict[str, Any] | None,
    actions: dict[str, Any],
    optional: Sequence[Any],
) -> Event:
    """``event_from_row`` of a row without usage metadata and with plain actions."""
    action_values = _ACTIONS_SLOTS.copy()
    action_values.update(actions)
    action_instance = _new_instance(EventActions)
    _set_dict(action_instance, "__dict__", action_values)
    _set_fields_set(action_instance, set(actions))
    _set_extra(action_instance, {})
    _set_private(action_instance, None)

    values = _EVENT_SLOTS.copy()
    values["id"] = event_id
    values["invocation_id"] = invocation_id
    values["author"] = author
    values["content"] = content_from_stored(content)
    values["actions"] = action_instance
    values["timestamp"] = timestamp
    instance = _new_instance(Event)
    if optional == _NO_OPTIONAL_VALUES:
        _set_fields_set(instance, set(_ALWAYS_SET))
    else:
        extra = _optional_values(optional)
        values.update(extra)
        _set_fields_set(instance, {*_ALWAYS_SET, *extra})
    _set_dict(instance, "__dict__", values)
    _set_extra(instance, {})
    _set_private(instance, None)
    return instance


def events_from_rows(rows: Iterable[Sequence[Any]]) -> list[Event]:
    """``event_from_row`` of each row, in order, for reading a whole history.

    A chat's history is mostly rows with an id, an invocation, an author, a
    timestamp, text-only content (or none), a bare ``state_delta`` and no
    optional column set; those are built here in one pass, without the
    intermediate dicts and calls of ``event_from_row``; the rest go through it.
    """
    events = []
    append = events.append
    new_instance, set_dict, set_fields_set = _new_instance, _set_dict, _set_fields_set
    set_extra, set_private, text_content = _set_extra, _set_private, _text_content
    event_slots, actions_slots = _EVENT_SLOTS, _ACTIONS_SLOTS
    no_optional_values = _NO_OPTIONAL_VALUES
    for row in rows:
        content, actions = row[4], row[5]
        if row[6:] != no_optional_values or len(actions) != 1 or "state_delta" not in actions:
            append(event_from_row(row))
            continue
        if content is not None:
            content = text_content(content)
            if content is None:
                append(event_from_row(row))
                continue
        action_values = actions_slots.copy()
        action_values["state_delta"] = actions["state_delta"]
        action_instance = new_instance(EventActions)
        set_dict(action_instance, "__dict__", action_values)
        set_fields_set(action_instance, {"state_delta"})
        set_extra(action_instance, {})
        set_private(action_instance, None)
        values = event_slots.copy()
        values["id"] = row[0]
        values["invocation_id"] = row[1]
        values["author"] = row[2]
        values["content"] = content
        values["actions"] = action_instance
        values["timestamp"] = row[3]
        instance = new_instance(Event)
        set_dict(instance, "__dict__", values)
        set_fields_set(
            instance, {"id", "invocation_id", "author", "content", "actions", "timestamp"}
        )
        set_extra(instance, {})
        set_private(instance, None)
        append(instance)
    return events


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
        if event.long_running_tool_ids is not None
        else None,
        "extra": _extra_json(event),
    }


def _extra_json(event: Event) -> dict[str, Any] | None:
    """The fields of ADK's Event this server does not model (a newer ADK's), as JSON, and
    ``partial`` when it is False: a stored event is never partial, but ADK's runner marks the
    events it yields ``partial=False`` and a client gets back the event it sent."""
    extra = (
        {
            name: value
            for name, value in event.model_dump(mode="json", include=set(event.model_extra)).items()
            if value is not None
        }
        if event.model_extra
        else {}
    )
    if event.partial is False:
        extra["partial"] = False
    return extra or None
