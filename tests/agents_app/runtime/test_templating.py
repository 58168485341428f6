import pytest

from agents_app.runtime.templating import (
    MissingStateKeyError,
    ReadonlyContext,
    instruction_inject_state,
    instruction_resolve,
)
from sessions_app.state import output_key_state_delta

STATE = {
    "topic": "birds",
    "user:name": "Ada",
    "app:tone": "friendly",
    "temp:step": 2,
    "count": 0,
}


def test_required_and_scoped_keys_are_inserted():
    text = instruction_inject_state(
        "Talk to {user:name} about {topic} in a {app:tone} tone (step {temp:step}, n={count}).",
        STATE,
    )
    assert text == "Talk to Ada about birds in a friendly tone (step 2, n=0)."


def test_optional_key_inserts_value_or_nothing():
    assert instruction_inject_state("[{topic?}][{mood?}]", STATE) == "[birds][]"


def test_missing_required_key_is_a_clear_error():
    with pytest.raises(MissingStateKeyError) as raised:
        instruction_inject_state("Hello {user:nickname}", STATE)
    assert raised.value.key == "user:nickname"
    assert "user:nickname" in str(raised.value)
    assert "{user:nickname?}" in str(raised.value)


def test_braces_that_are_not_state_names_are_left_alone():
    template = 'Answer as JSON like {"a": 1} or { not a key } or {{topic}}.'
    assert instruction_inject_state(template, STATE) == (
        'Answer as JSON like {"a": 1} or { not a key } or birds.'
    )


def test_unknown_prefix_is_not_a_state_name():
    assert instruction_inject_state("{session:topic}", STATE) == "{session:topic}"


async def test_string_instruction_is_templated_from_context_state():
    text = await instruction_resolve(
        instruction="Hi {user:name}", context=ReadonlyContext(state=STATE)
    )
    assert text == "Hi Ada"


async def test_callable_provider_bypasses_templating_and_reads_state():
    def provider(context: ReadonlyContext) -> str:
        return "Literal {topic} for " + context.state["user:name"]

    text = await instruction_resolve(instruction=provider, context=ReadonlyContext(state=STATE))
    assert text == "Literal {topic} for Ada"


async def test_async_provider_is_awaited_and_cannot_change_state():
    async def provider(context: ReadonlyContext) -> str:
        with pytest.raises(TypeError):
            context.state["topic"] = "cats"  # type: ignore[index]
        return f"{context.agent_name}: {context.state['topic']}"

    text = await instruction_resolve(
        instruction=provider, context=ReadonlyContext(state=dict(STATE), agent_name="helper")
    )
    assert text == "helper: birds"


def test_output_key_saves_final_text_in_its_scope():
    assert output_key_state_delta(output_key="user:last_answer", text="42") == {
        "user:last_answer": "42"
    }
    assert output_key_state_delta(output_key=None, text="42") == {}
