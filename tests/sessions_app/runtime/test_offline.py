import pytest
from google.genai import types

from sessions_app.runtime.context import SUMMARY_PREFIX
from sessions_app.runtime.llm import LlmChunk, LlmRequest, MemorySnippet
from sessions_app.runtime.offline import OfflineModel
from sessions_app.runtime.tools import SET_STATE_TOOL

MODEL = OfflineModel(chunk_delay=0)
CREATE = types.FunctionDeclaration(name="create_memory")
LOAD = types.FunctionDeclaration(name="load_memory")
ALL_TOOLS = [CREATE, LOAD, SET_STATE_TOOL.declaration]


def user(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def request(text: str, tools=(), **kwargs) -> LlmRequest:
    return LlmRequest(
        model="offline", system_instruction="", contents=[user(text)], tools=list(tools), **kwargs
    )


def call_of(decision):
    assert isinstance(decision, LlmChunk), decision
    [call] = decision.function_calls
    return call.name, call.args


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "Remember that I am allergic to peanuts.",
            ("create_memory", {"text": "I am allergic to peanuts"}),
        ),
        (
            "please remember my flight is on Friday",
            ("create_memory", {"text": "my flight is on Friday"}),
        ),
        ("What do you know about my diet?", ("load_memory", {"query": "my diet"})),
        ("what do you remember", ("load_memory", {"query": "what do you remember"})),
        ("Hi, my name is Ada and I code", ("set_state", {"key": "user:name", "value": "Ada"})),
        ("set mood to happy", ("set_state", {"key": "mood", "value": "happy"})),
        ("Set user:city = Paris.", ("set_state", {"key": "user:city", "value": "Paris"})),
    ],
)
def test_rules_call_the_offered_tool(text, expected):
    assert call_of(MODEL.respond(request(text, ALL_TOOLS))) == expected


def test_without_the_tool_on_offer_it_just_replies():
    assert MODEL.respond(request("remember that I like tea")) == (
        "You said: \u201cremember that I like tea\u201d."
    )


def test_reply_is_grounded_in_state_and_the_best_memory():
    memories = [
        MemorySnippet(id="1", text="you live in Lyon", score=0.0),
        MemorySnippet(id="2", text="you like tea", score=0.8),
    ]
    decision = MODEL.respond(request("hello", state={"user:name": "Ada"}, memories=memories))
    assert decision == "Hi Ada! You said: \u201chello\u201d. I remember that you like tea."


def test_after_tool_responses_it_reports_the_result():
    responses = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    name="create_memory", response={"text": "you like tea"}
                )
            ),
            types.Part(
                function_response=types.FunctionResponse(
                    name="load_memory",
                    response={"memories": [{"text": "you like tea", "confidence": 0.9}]},
                )
            ),
            types.Part(
                function_response=types.FunctionResponse(
                    name="set_state", response={"status": "error", "message": "bad key"}
                )
            ),
        ],
    )
    decision = MODEL.respond(
        LlmRequest(model="offline", system_instruction="", contents=[responses])
    )
    assert decision == (
        "Got it, I'll remember that you like tea. Here is what I remember:\n"
        "- you like tea (confidence 0.90) I couldn't do that: bad key."
    )


def test_empty_recall_says_so():
    response = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    name="load_memory", response={"memories": []}
                )
            )
        ],
    )
    decision = MODEL.respond(
        LlmRequest(model="offline", system_instruction="", contents=[response])
    )
    assert decision == "I don't have anything remembered about that yet."


def test_summary_keeps_earlier_summary_lines_and_adds_one_per_turn():
    contents = [
        user(SUMMARY_PREFIX + "- User: first\n- Assistant: reply"),
        user("second   question"),
        types.Content(role="model", parts=[types.Part(text="second answer")]),
    ]
    decision = MODEL.respond(
        LlmRequest(model="offline", system_instruction="", contents=contents, purpose="summarize")
    )
    assert decision.splitlines() == [
        "- User: first",
        "- Assistant: reply",
        "- User: second question",
        "- Assistant: second answer",
    ]


async def test_stream_is_chunked_and_concatenates_to_the_reply():
    chunks = [
        chunk async for chunk in MODEL.generate_stream(request("one two three four five six seven"))
    ]
    texts = [chunk.text for chunk in chunks if chunk.text]
    assert len(texts) > 1
    assert "".join(texts) == "You said: \u201cone two three four five six seven\u201d."
    assert chunks[-1].usage_metadata.candidates_token_count > 0


async def test_tool_call_is_one_chunk_with_usage():
    chunks = [chunk async for chunk in MODEL.generate_stream(request("set a to b", ALL_TOOLS))]
    assert len(chunks) == 1 and chunks[0].function_calls[0].name == "set_state"
