"""Request validation and response shapes of the sessions REST API.

``event_representation`` is the one JSON form of a stored event: the REST API
answers with it, and the WebSocket sends each stored event in the same form.
Events are described in the schema by the ``Event`` model's own JSON schema
(``sessions_app.openapi``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pydantic
from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from core.api import StrictBooleanField, StrictCharField, StrictRegexField
from sessions_app import selectors
from sessions_app.events import (
    TIMESTAMP_RANGE_MESSAGE,
    Event,
    timestamp_representable,
)
from sessions_app.markdown import markdown_render_safe
from sessions_app.models import EventRecord, SessionRecord
from sessions_app.services import IDENTIFIER_MAX_LENGTH, IDENTIFIER_PATTERN, IDENTIFIER_RULE
from sessions_app.state import APP_PREFIX, USER_PREFIX, ScopedState, state_merge

# What the store refuses of a state key, in the schema's terms (``state.state_key_validate``
# refuses more, such as a scope prefix alone, and the 400s say so).
STATE_KEY_SCHEMA = {"minLength": 1, "maxLength": settings.MAX_STATE_KEY_LENGTH}
DEFAULT_RECENT_EVENTS = 20
MAX_RECENT_EVENTS = 1000
DEFAULT_EVENTS_PAGE_SIZE = 100
MAX_EVENTS_PAGE_SIZE = 1000
MAX_SEQUENCE = 2**63 - 1


@extend_schema_field(
    {"type": "object", "propertyNames": STATE_KEY_SCHEMA, "additionalProperties": {}}
)
class StateField(serializers.DictField):
    """A state dict: its keys as the store takes them (non-empty, bounded)."""


IDENTIFIER_MESSAGE = f"Use {IDENTIFIER_RULE}."


def event_representation(*, event: Event, sequence: int, rewound: bool) -> dict[str, Any]:
    """A stored event as clients see it: ADK's Event JSON (no null fields), its place
    in the session (``sequence``), whether a rewind hid it from the history and, when
    it has text (a message or a reply), ``html``: that text's Markdown rendered safely,
    so no client has to render untrusted Markdown itself."""
    data = event.model_dump(mode="json", exclude_none=True)
    data["sequence"] = sequence
    data["rewound"] = rewound
    parts = event.content.parts if event.content else None
    text = "".join(part.text for part in parts or () if part.text and not part.thought)
    if text:
        data["html"] = markdown_render_safe(text)
    return data


def _default_app_name() -> str:
    return settings.DEFAULT_APP_NAME


def _identifier_whole(value: str) -> None:
    """The whole value must match: a regex ``$`` alone also lets a trailing newline through."""
    if not IDENTIFIER_PATTERN.fullmatch(value):
        raise serializers.ValidationError(IDENTIFIER_MESSAGE, code="invalid")


def identifier_field(**kwargs) -> serializers.RegexField:
    """An id as the schema states it: a string, no surrounding whitespace trimmed away,
    no trailing newline."""
    return StrictRegexField(
        IDENTIFIER_PATTERN,
        # The length the pattern already bounds, stated as the schema's maxLength too: a
        # client (or a fuzzer) that reads only the length limits sees it.
        max_length=IDENTIFIER_MAX_LENGTH,
        error_messages={"invalid": IDENTIFIER_MESSAGE, "max_length": IDENTIFIER_MESSAGE},
        trim_whitespace=False,
        validators=[_identifier_whole],
        **kwargs,
    )


# App names are what the console lets staff give an app (agents_app's App.name), narrower than
# the ids of sessions and users, which are ADK's.
APP_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}\Z")
APP_NAME_MESSAGE = "Use 1-128 letters, digits and . _ : @ -, starting with a letter or digit."


def app_name_field(**kwargs) -> serializers.RegexField:
    """An app's name as the schema states it, whole (no trailing newline)."""

    def whole(value: str) -> None:
        if not APP_NAME_PATTERN.fullmatch(value):
            raise serializers.ValidationError(APP_NAME_MESSAGE, code="invalid")

    return StrictRegexField(
        APP_NAME_PATTERN,
        error_messages={"invalid": APP_NAME_MESSAGE},
        trim_whitespace=False,
        validators=[whole],
        default=_default_app_name,
        help_text="Defaults to the site's default app.",
        **kwargs,
    )


def _pydantic_error_details(error: pydantic.ValidationError) -> dict[str, list[str]]:
    """Pydantic's messages keyed by the dotted path of the field they are about."""
    details: dict[str, list[str]] = {}
    for item in error.errors(include_url=False, include_input=False, include_context=False):
        field = ".".join(str(part) for part in item["loc"]) or api_settings.NON_FIELD_ERRORS_KEY
        details.setdefault(field, []).append(item["msg"])
    return details


class SessionListQuerySerializer(serializers.Serializer):
    app_name = app_name_field()
    page_size = serializers.IntegerField(
        min_value=1, max_value=selectors.MAX_PAGE_SIZE, default=selectors.DEFAULT_PAGE_SIZE
    )
    page_token = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="The `next_page_token` of the previous page; empty or left out for the first.",
    )


class SessionCreateSerializer(serializers.Serializer):
    app_name = app_name_field()
    session_id = identifier_field(
        required=False,
        help_text="A new id is made when left out, or when another user has this one "
        "(the response's `id` is the session's); one of your own sessions answers 409.",
    )
    state = StateField(
        required=False,
        help_text="Initial state; `user:` keys go to the user's shared scope, `temp:` keys "
        "are dropped, `app:` keys are refused.",
    )
    temporary = StrictBooleanField(
        default=False,
        help_text="A temporary chat: it neither reads nor writes long-term memory.",
    )


class SessionRenameSerializer(serializers.Serializer):
    title = StrictCharField(
        max_length=SessionRecord._meta.get_field("title").max_length,
        allow_blank=True,
        help_text="The new title; runs of spaces become one, and an empty title clears it.",
    )


class SessionDetailQuerySerializer(serializers.Serializer):
    num_recent_events = serializers.IntegerField(
        min_value=0,
        max_value=MAX_RECENT_EVENTS,
        default=DEFAULT_RECENT_EVENTS,
        help_text="How many of the latest events of the history to include.",
    )


class EventsQuerySerializer(serializers.Serializer):
    after_sequence = serializers.IntegerField(
        min_value=0,
        max_value=MAX_SEQUENCE,
        default=0,
        help_text="Only events after this sequence number: the `next_after_sequence` "
        "of the previous page.",
    )
    page_size = serializers.IntegerField(
        min_value=1, max_value=MAX_EVENTS_PAGE_SIZE, default=DEFAULT_EVENTS_PAGE_SIZE
    )
    include_rewound = serializers.BooleanField(
        default=False, help_text="Include the events a rewind took out of the history."
    )


class RewindSerializer(serializers.Serializer):
    invocation_id = StrictCharField(
        max_length=EventRecord._meta.get_field("invocation_id").max_length,
        trim_whitespace=False,
        help_text="Revert the session to just before this invocation.",
    )


class EventCreateSerializer(serializers.Serializer):
    """An event to append, as ADK's Event JSON; ``validated_data`` is the ``Event``.

    Refused: a value of another JSON type than its field's (a boolean where a number goes),
    partial events (streamed to clients, never stored), rewind markers (only a rewind writes
    them), timestamps outside years 1-9999, and text fields longer than storage holds.
    """

    # Fields of ADK's Event this server does not model: refused from signed-in users, kept
    # from service accounts (whose agents run a newer ADK).
    unmodelled_fields_allowed = False

    def to_internal_value(self, data: Any) -> Event:
        try:
            # As JSON, strictly: every value must have its field's JSON type (a boolean is no
            # number, ``"timestamp": true`` is not 1), at any depth of google-genai's types too.
            event = Event.model_validate_json(json.dumps(data), strict=True)
        except pydantic.ValidationError as error:
            raise serializers.ValidationError(_pydantic_error_details(error)) from None
        except (AttributeError, TypeError):
            # google-genai's enums fail this way, not as a ValidationError, on a non-string.
            raise serializers.ValidationError(
                {
                    api_settings.NON_FIELD_ERRORS_KEY: [
                        "A field that takes one of a fixed set of names got a value "
                        "that is not a string."
                    ]
                }
            ) from None
        problems: dict[str, list[str]] = {}
        if not self.unmodelled_fields_allowed:
            for name in event.model_extra or {}:
                problems[name] = ["Extra inputs are not permitted"]
            for name in event.actions.model_extra or {}:
                problems[f"actions.{name}"] = ["Extra inputs are not permitted"]
        if isinstance(data, dict) and data.get("id") == "":
            problems["id"] = ["An event id, when given, is 1-128 characters."]
        tool_ids = data.get("long_running_tool_ids") if isinstance(data, dict) else None
        if isinstance(tool_ids, list) and len(tool_ids) != len(set(map(str, tool_ids))):
            problems["long_running_tool_ids"] = ["Each tool call id may appear once."]
        if event.partial:
            problems["partial"] = [
                "Partial events are streamed to clients and never stored; "
                "append the complete event instead."
            ]
        if (
            event.actions.rewind_before_invocation_id is not None
            and not self.unmodelled_fields_allowed
        ):
            problems["actions.rewind_before_invocation_id"] = [
                "Rewinds are made with POST /api/sessions/<session_id>/rewind/."
            ]
        if not timestamp_representable(event.timestamp):
            problems["timestamp"] = [TIMESTAMP_RANGE_MESSAGE]
        for name in ("branch", "error_code"):
            limit = EventRecord._meta.get_field(name).max_length
            if len(getattr(event, name) or "") > limit:
                problems[name] = [f"At most {limit} characters."]
        if problems:
            raise serializers.ValidationError(problems)
        return event


class StoredEventSerializer(serializers.Serializer):
    """Renders a ``selectors.StoredEvent`` with ``event_representation``."""

    def to_representation(self, instance: selectors.StoredEvent) -> dict[str, Any]:
        return event_representation(
            event=instance.event, sequence=instance.sequence, rewound=instance.rewound
        )


class SessionSerializer(serializers.Serializer):
    id = serializers.CharField()
    title = serializers.CharField(
        default="", help_text="The title shown in the chat's session list; empty until named."
    )
    app_name = serializers.CharField()
    user_id = serializers.CharField(help_text="The owner's user id.")
    temporary = serializers.BooleanField(
        default=False, help_text="A temporary chat neither reads nor writes long-term memory."
    )
    state = serializers.DictField(
        help_text="Merged state: session keys, then `app:` and `user:` keys with their prefix."
    )
    last_update_time = serializers.FloatField(help_text="Seconds since the epoch.")


class SessionDetailSerializer(SessionSerializer):
    events = StoredEventSerializer(
        many=True, help_text="The latest events of the history, oldest first."
    )


class SessionPageSerializer(serializers.Serializer):
    results = SessionSerializer(many=True, source="sessions", help_text="Newest first.")
    next_page_token = serializers.CharField(
        allow_null=True, help_text="Pass as `page_token` for the next page; null on the last."
    )


class EventsPageSerializer(serializers.Serializer):
    results = StoredEventSerializer(many=True, source="events", help_text="In sequence order.")
    next_after_sequence = serializers.IntegerField(
        allow_null=True, help_text="Pass as `after_sequence` for the next page; null on the last."
    )


class SessionStateSerializer(serializers.Serializer):
    """A session's state: each stored scope, keys written with their prefix, and merged."""

    session = serializers.SerializerMethodField(help_text="Keys without a prefix.")
    user = serializers.SerializerMethodField(
        help_text="`user:` keys, shared by the user's sessions."
    )
    app = serializers.SerializerMethodField(help_text="`app:` keys, shared by the app's sessions.")
    merged = serializers.SerializerMethodField(help_text="The three scopes together.")

    def get_session(self, scoped: ScopedState) -> dict[str, Any]:
        return dict(scoped.session)

    def get_user(self, scoped: ScopedState) -> dict[str, Any]:
        return {USER_PREFIX + key: value for key, value in scoped.user.items()}

    def get_app(self, scoped: ScopedState) -> dict[str, Any]:
        return {APP_PREFIX + key: value for key, value in scoped.app.items()}

    def get_merged(self, scoped: ScopedState) -> dict[str, Any]:
        return state_merge(session=scoped.session, user=scoped.user, app=scoped.app)
