import pytest
from google.genai import types

from sessions_app.event_codec import content_from_stored, content_to_stored
from sessions_app.events import Event

CONTENTS = [
    {"role": "user", "parts": [{"text": "hello"}]},
    {"role": "model", "parts": [{"text": "a"}, {"text": "b"}]},
    {"parts": [{"text": "no role"}]},
    {"role": "model", "parts": [{"text": "x", "thought": True}]},
    {"role": "model", "parts": [{"function_call": {"name": "f", "args": {"a": 1}}}]},
    {"role": "user", "parts": [{"function_response": {"name": "f", "response": {"ok": True}}}]},
    {"role": "model", "parts": []},
    {"role": "model"},
]


@pytest.mark.parametrize("stored", CONTENTS)
def test_fast_path_builds_the_same_content_as_full_validation(stored):
    fast = content_from_stored(stored)
    assert fast == types.Content.model_validate(stored)
    assert content_to_stored(fast) == content_to_stored(types.Content.model_validate(stored))
    assert fast.model_fields_set == types.Content.model_validate(stored).model_fields_set


def test_fast_path_content_behaves_like_a_validated_one():
    content = content_from_stored({"role": "user", "parts": [{"text": "hi"}]})
    copy = content.model_copy(deep=True)
    copy.parts[0].text = "changed"
    assert content.parts[0].text == "hi"
    assert content.parts[0].function_call is None
    assert types.Content.model_validate(content.model_dump()) == content


@pytest.mark.parametrize(
    "column",
    [
        ('{"a": 1}', None, "[1, 2]", '"text"', "null", " {} "),
        (None, None),
        ({"already": "decoded"}, '{"b": 2}', None),
    ],
)
def test_a_json_column_decodes_as_its_values_one_by_one(column):
    from sessions_app.selectors.rows import json_column, json_value

    assert list(json_column(column)) == [json_value(value) for value in column]


def _row(**columns):
    """A row of EVENT_COLUMNS as a raw read gives it (JSON columns decoded)."""
    from sessions_app.event_codec import EVENT_COLUMNS

    defaults = {
        "event_id": "event-1",
        "invocation_id": "e-1",
        "author": "user",
        "timestamp": 1000.5,
        "content": {"role": "user", "parts": [{"text": "hello"}]},
        "actions": {"state_delta": {"a": 1}},
        "turn_complete": None,
        "interrupted": None,
        "branch": "",
        "error_code": "",
        "error_message": "",
        "custom_metadata": None,
        "usage_metadata": None,
        "long_running_tool_ids": None,
        "extra": None,
    }
    defaults.update(columns)
    return tuple(defaults[name] for name in EVENT_COLUMNS)


def _validated(row):
    """The Event full validation gives for a row, the reference the fast paths must match:
    content always given (None included), other columns when they hold a value."""
    from sessions_app.event_codec import EVENT_COLUMNS
    from sessions_app.events import Event

    values = dict(zip(EVENT_COLUMNS, row, strict=True))
    data = {"id": values.pop("event_id"), "content": values.pop("content")}
    for name, value in values.items():
        if value is not None and value != "":
            data[name] = value
    return Event.model_validate(data)


ROWS = [
    _row(),
    _row(content=None),
    _row(content={"parts": [{"text": "no role"}]}),
    _row(content={"role": "model", "parts": [{"text": "a"}, {"text": "b"}]}),
    _row(content={"role": "model", "parts": [{"function_call": {"name": "f", "args": {}}}]}),
    _row(content={"role": "model", "parts": [{"text": "x", "thought": True}]}),
    _row(actions={"state_delta": {}}),
    _row(actions={"state_delta": {"k": [1, {"n": None}]}, "escalate": True}),
    _row(actions={"state_delta": {}, "transfer_to_agent": "helper"}),
    _row(
        actions={
            "state_delta": {},
            "compaction": {
                "start_timestamp": 1.0,
                "end_timestamp": 2.0,
                "compacted_content": {"role": "model", "parts": [{"text": "summary"}]},
            },
        }
    ),
    _row(turn_complete=True, custom_metadata={"context": {"events": 3}}),
    _row(turn_complete=1, interrupted=0),  # SQLite's booleans
    _row(branch="root.helper", error_code="E", error_message="went wrong"),
    _row(usage_metadata={"prompt_token_count": 3, "total_token_count": 5}),
    _row(long_running_tool_ids=["call-2", "call-1"]),
    _row(custom_metadata={}),
]


@pytest.mark.parametrize("row", ROWS)
def test_events_from_rows_builds_what_full_validation_builds(row):
    from sessions_app.event_codec import event_from_row, events_from_rows

    expected = _validated(row)
    for event in (event_from_row(row), *events_from_rows([row])):
        assert event == expected
        assert event.model_fields_set == expected.model_fields_set
        assert event.actions.model_fields_set == expected.actions.model_fields_set
        assert event.model_dump() == expected.model_dump()
        assert repr(event) == repr(expected)
        assert type(event.turn_complete) is type(expected.turn_complete)


def test_events_from_rows_keeps_order_across_fast_and_validated_rows():
    from sessions_app.event_codec import events_from_rows

    rows = [_row(event_id=f"event-{index}") for index in range(3)]
    rows.insert(1, _row(event_id="usage", usage_metadata={"total_token_count": 1}))
    assert [event.id for event in events_from_rows(rows)] == [
        "event-0",
        "usage",
        "event-1",
        "event-2",
    ]


def test_events_built_from_rows_are_independent_and_mutable():
    from sessions_app.event_codec import events_from_rows

    first, second = events_from_rows([_row(), _row()])
    first.branch = "changed"
    first.actions.state_delta["b"] = 2
    first.content.parts[0].text = "changed"
    assert second.branch is None and "branch" not in second.model_fields_set
    assert "branch" in first.model_fields_set
    assert second.actions.state_delta == {"a": 1}
    assert second.content.parts[0].text == "hello"


def test_fields_of_adk_events_not_modelled_here_come_back_as_they_came():
    from sessions_app.event_codec import event_from_row, event_to_record_fields, events_from_rows

    event = Event.model_validate(
        {
            "author": "agent",
            "model_version": "gemini-2.5-flash-001",
            "finish_reason": "STOP",
            "actions": {"state_delta": {"a": 1}, "artifact_delta": {"f.txt": 2}},
        }
    )
    fields = event_to_record_fields(event)
    assert fields["extra"] == {"model_version": "gemini-2.5-flash-001", "finish_reason": "STOP"}
    row = _row(
        event_id=event.id,
        actions=fields["actions"],
        extra=fields["extra"],
        content=None,
    )

    for read in (event_from_row(row), events_from_rows([row])[0]):
        data = read.model_dump(mode="json", exclude_none=True)
        assert data["model_version"] == "gemini-2.5-flash-001"
        assert data["finish_reason"] == "STOP"
        assert data["actions"]["artifact_delta"] == {"f.txt": 2}
