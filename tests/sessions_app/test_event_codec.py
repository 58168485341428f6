import pytest
from google.genai import types

from sessions_app.event_codec import content_from_stored, content_to_stored

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
    from sessions_app.selectors import _json_column, _json_value

    assert list(_json_column(column)) == [_json_value(value) for value in column]
