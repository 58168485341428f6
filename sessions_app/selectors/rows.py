"""Rows of the session store's hot reads, decoded: JSON columns, events, scoped states."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import models

from sessions_app.event_codec import EVENT_COLUMNS, events_from_rows
from sessions_app.events import Event
from sessions_app.models import EventRecord

# JSON columns of a raw row of EVENT_COLUMNS arrive as text (booleans as
# integers on SQLite, which event_from_row accepts).
_EVENT_FIELDS = [EventRecord._meta.get_field(name) for name in EVENT_COLUMNS]
_EVENT_JSON_INDEXES = [i for i, f in enumerate(_EVENT_FIELDS) if isinstance(f, models.JSONField)]


_raw_decode = json.JSONDecoder().raw_decode


def json_value(value: Any) -> Any:
    """A JSON column's value as the ORM would give it (SQL NULL is None).

    ``raw_decode`` skips ``json.loads``'s whitespace handling, which costs more
    than decoding a small document; text it does not consume whole (stored
    with surrounding whitespace) goes through ``json.loads``.
    """
    if not isinstance(value, str):
        return value
    try:
        decoded, end = _raw_decode(value)
    except json.JSONDecodeError:
        return json.loads(value)
    return decoded if end == len(value) else json.loads(value)


def json_column(values: tuple) -> Sequence[Any]:
    """A JSON column's values, from many rows, as ``json_value`` gives each.

    The stored texts are joined into one JSON array and decoded in a single
    call: the decoder's per-call cost, not the parsing, is what a column of
    small documents spends its time on.
    """
    if values.count(None) == len(values):
        return values
    try:
        text = ",".join([value if value is not None else "null" for value in values])
    except TypeError:  # the driver already decoded some
        return [json_value(value) for value in values]
    try:
        decoded = json.loads(f"[{text}]")
    except json.JSONDecodeError:
        decoded = None
    if decoded is None or len(decoded) != len(values):
        return [json_value(value) for value in values]
    return decoded


def events_from_raw_rows(rows: list[tuple]) -> list[Event]:
    """Events from raw rows of ``EVENT_COLUMNS``, JSON decoded column by column."""
    if not rows:
        return []
    columns: list[Sequence[Any]] = list(zip(*rows, strict=True))
    for index in _EVENT_JSON_INDEXES:
        columns[index] = json_column(columns[index])
    return events_from_rows(zip(*columns, strict=True))


def scoped_states_fold(
    rows: Iterable[tuple],
) -> tuple[dict[str, dict[str, Any]], dict[str, Any], dict[str, Any], list[tuple[str, float]]]:
    """Session states by session id, the user's state, the app's, and the (id,
    last_update_time) of the session rows ('r'), in the order they came."""
    by_session: dict[str, dict[str, Any]] = {}
    user_state: dict[str, Any] = {}
    app_state: dict[str, Any] = {}
    records = []
    rows = list(rows)
    values = json_column(tuple(row[3] for row in rows))
    for (scope, session_id, key, _, last_update_time), value in zip(rows, values, strict=True):
        if scope == "s":
            by_session.setdefault(session_id, {})[key] = value
        elif scope == "u":
            user_state[key] = value
        elif scope == "a":
            app_state[key] = value
        else:
            records.append((session_id, last_update_time))
    return by_session, user_state, app_state, records
