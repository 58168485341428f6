"""What an event must be to be stored: the checks of an append, its size within
``MAX_EVENT_BYTES`` (its large parts counted as bytes, ``sessions_app.event_blobs``), and
the stand-in for a tool result too large to keep."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from core.sizes import size_and_limit_words
from sessions_app.errors import InvalidEventError
from sessions_app.event_blobs import PendingBlob, content_blobs_split
from sessions_app.event_codec import event_to_record_fields
from sessions_app.events import TIMESTAMP_RANGE_MESSAGE, Event, timestamp_representable

MAX_NAME_LENGTH = 128
MAX_BRANCH_LENGTH = 512


def event_validate(event: Event, *, user_pk: int) -> tuple[dict[str, Any], list[PendingBlob]]:
    """The record fields of an event and the large parts to store beside it, or
    InvalidEventError; writes nothing. An event past ``MAX_EVENT_BYTES`` is refused, unless
    it answers tool calls: then the results are replaced by an error that says so
    (``_tool_results_replaced``) and the event is stored."""
    if not event.author or len(event.author) > MAX_NAME_LENGTH:
        raise InvalidEventError("An event needs an author of 1-128 characters.")
    if len(event.invocation_id) > MAX_NAME_LENGTH or len(event.id) > MAX_NAME_LENGTH:
        raise InvalidEventError("Event and invocation ids are at most 128 characters.")
    if len(event.branch or "") > MAX_BRANCH_LENGTH or len(event.error_code or "") > MAX_NAME_LENGTH:
        raise InvalidEventError("branch is at most 512 characters and error_code at most 128.")
    if not timestamp_representable(event.timestamp):
        raise InvalidEventError(TIMESTAMP_RANGE_MESSAGE)
    plain_texts = (
        event.id,
        event.invocation_id,
        event.author,
        event.branch,
        event.error_code,
        event.error_message,
    )
    if any("\x00" in text for text in plain_texts if text):
        raise InvalidEventError("Event fields cannot contain NUL characters.")
    fields, blobs, size = _event_fields_sized(event, user_pk=user_pk)
    if size > settings.MAX_EVENT_BYTES and event.get_function_responses():
        _tool_results_replaced(event, size=size)
        fields, blobs, size = _event_fields_sized(event, user_pk=user_pk)
    if size > settings.MAX_EVENT_BYTES:
        said, allowed = size_and_limit_words(size, settings.MAX_EVENT_BYTES)
        raise InvalidEventError(
            f"The event is {said}; the limit is {allowed} "
            "(MAX_EVENT_BYTES, a file's bytes counted as bytes)."
        )
    return fields, blobs


def _event_fields_sized(
    event: Event, *, user_pk: int
) -> tuple[dict[str, Any], list[PendingBlob], int]:
    """The record fields of ``event`` with its large parts taken out (``event_blobs``), the
    blobs taken, and the event's size: its stored JSON and the blobs' bytes."""
    fields = event_to_record_fields(event)
    try:
        fields["content"], blobs = content_blobs_split(
            stored=fields["content"], content=event.content, user_pk=user_pk
        )
        encoded = json.dumps(
            [fields["content"], fields["actions"], fields["custom_metadata"]], allow_nan=False
        )
    except (TypeError, ValueError) as error:
        raise InvalidEventError(f"The event is not JSON-serialisable: {error}.") from None
    if "\\u0000" in encoded:
        raise InvalidEventError("Event content cannot contain NUL characters.")
    return fields, blobs, len(encoded.encode()) + sum(len(blob.data) for blob in blobs)


def _tool_results_replaced(event: Event, *, size: int) -> None:
    """Replace, in place, the results of the tool calls ``event`` answers with an error
    saying the result was too large to keep: the call stays answered, so the turn is never
    left with a call and no response (a model given such a history fails), the model sees
    why, and the caller's ``Session`` holds what is stored."""
    said, allowed = size_and_limit_words(size, settings.MAX_EVENT_BYTES)
    message = (
        f"The tool's result was not kept: the event holding it was {said}, over the "
        f"server's limit of {allowed} (MAX_EVENT_BYTES)."
    )
    for response in event.get_function_responses():
        response.response = {"error": message}
