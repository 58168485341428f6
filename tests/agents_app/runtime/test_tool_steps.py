"""Each tool call as a step a person reads in the conversation ("Saved your name"), while it
runs and once answered, for the chat and the staff console."""

import pytest
from google.genai import types

from agents_app.memory_provider import CREATE_MEMORY_TOOL, LOAD_MEMORY_TOOL
from agents_app.runtime.tool_calls import tool_steps
from agents_app.runtime.tools import BUILTIN_TOOLS, SET_STATE_TOOL, Tool

OK = {"status": "ok"}
FAILED = {"status": "error", "message": "memory is off for this chat"}


@pytest.mark.parametrize(
    ("key", "running", "done"),
    [
        ("user:name", "Saving your name", "Saved your name"),
        ("user:home_city", "Saving your home city", "Saved your home city for all your chats"),
        ("trip", "Saving trip", "Saved trip for this chat"),
        ("temp:mood", "Saving mood", "Noted mood for this reply"),
    ],
)
def test_saving_state_names_what_was_saved_and_where(key, running, done):
    args = {"key": key, "value": "x"}

    assert SET_STATE_TOOL.describe(args, None) == running
    assert SET_STATE_TOOL.describe(args, {**OK, "key": key}) == done
    assert SET_STATE_TOOL.describe(args, FAILED) == f"Couldn't save {running[len('Saving ') :]}"


def test_looking_up_memories_counts_what_it_found():
    def found(count: int) -> str:
        return LOAD_MEMORY_TOOL.describe({"query": "q"}, {**OK, "memories": [{}] * count})

    assert LOAD_MEMORY_TOOL.describe({"query": "q"}, None) == "Looking through your memories"
    assert found(2) == "Looked up 2 memories"
    assert found(1) == "Looked up 1 memory"
    assert found(0) == "Looked through your memories: nothing found"
    assert LOAD_MEMORY_TOOL.describe({}, FAILED) == "Couldn't look through your memories"


def test_saving_a_memory():
    assert CREATE_MEMORY_TOOL.describe({"text": "t"}, None) == "Saving a memory"
    assert CREATE_MEMORY_TOOL.describe({"text": "t"}, {**OK, "text": "t"}) == "Saved a memory"
    assert CREATE_MEMORY_TOOL.describe({"text": "t"}, FAILED) == "Couldn't save a memory"


def test_steps_go_by_call_id_and_tools_without_words_are_left_to_the_page():
    silent = Tool(
        declaration=types.FunctionDeclaration(name="silent"), function=lambda args, context: OK
    )
    tools = {**BUILTIN_TOOLS, "silent": silent}
    calls = [
        types.FunctionCall(id="a", name="set_state", args={"key": "user:name", "value": "Ada"}),
        types.FunctionCall(id="b", name="silent", args={}),
    ]

    assert tool_steps(calls=calls, tools=tools) == {"a": "Saving your name"}
    assert tool_steps(calls=calls, tools=tools, responses=[OK, OK]) == {"a": "Saved your name"}
