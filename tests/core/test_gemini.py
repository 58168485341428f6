"""The Gemini model through the real google-genai client, against a local fake Gemini server."""

from __future__ import annotations

import base64

import pytest
from google.genai import types

from agents_app.runtime.tools import SET_STATE_TOOL
from core.gemini import GeminiModel
from core.llm import (
    LlmChunk,
    LlmRequest,
    ModelError,
    RetryPolicy,
    generate_with_retries,
)
from tests.fake_gemini import (
    FailMidStream,
    HttpError,
    Reply,
    Stall,
    embedding_for,
    final_chunk,
    function_call_chunk,
    text_chunk,
)

MODEL = "gemini-2.5-flash"
FAST_RETRIES = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.001)


def user_says(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def chat_request(*contents: types.Content, tools=(SET_STATE_TOOL.declaration,)) -> LlmRequest:
    return LlmRequest(
        model=MODEL,
        system_instruction="You are a terse assistant.",
        contents=list(contents) or [user_says("Hello")],
        tools=list(tools),
    )


async def collect(stream) -> list[LlmChunk]:
    return [chunk async for chunk in stream]


async def test_streamed_text_arrives_in_order_without_thoughts(gemini, fake_gemini):
    fake_gemini.push(
        Reply(
            [
                text_chunk("Let me think about greetings.", thought=True),
                text_chunk("Hel"),
                text_chunk("lo, "),
                text_chunk("world."),
                final_chunk(prompt_tokens=12, output_tokens=4),
            ]
        )
    )

    chunks = await collect(gemini.generate_stream(chat_request()))

    assert [chunk.text for chunk in chunks[:-1]] == ["Hel", "lo, ", "world."]
    last = chunks[-1]
    assert last.text == ""
    assert last.finish_reason == "STOP"
    assert last.usage_metadata.prompt_token_count == 12
    assert last.usage_metadata.candidates_token_count == 4
    assert all(chunk.usage_metadata is None for chunk in chunks[:-1])
    assert (gemini.name, gemini.offline) == (MODEL, False)


async def test_function_calls_are_parsed(gemini, fake_gemini):
    fake_gemini.push(
        Reply(
            [
                function_call_chunk("set_state", {"key": "user:name", "value": "Ada"}),
                final_chunk(),
            ]
        )
    )

    chunks = await collect(gemini.generate_stream(chat_request(user_says("I'm Ada"))))

    calls = [call for chunk in chunks for call in chunk.function_calls]
    assert [(call.name, call.args) for call in calls] == [
        ("set_state", {"key": "user:name", "value": "Ada"})
    ]
    assert "".join(chunk.text for chunk in chunks) == ""


async def test_request_carries_system_instruction_tools_and_contents(gemini, fake_gemini):
    fake_gemini.push(Reply([text_chunk("Saved."), final_chunk()]))
    history = [
        user_says("Call me Ada"),
        types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(
                        id="call-1", name="set_state", args={"key": "user:name", "value": "Ada"}
                    )
                )
            ],
        ),
        types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call-1", name="set_state", response={"status": "ok"}
                    )
                )
            ],
        ),
    ]

    await collect(gemini.generate_stream(chat_request(*history)))

    [request] = fake_gemini.requests
    assert request.action == "streamGenerateContent"
    assert request.query["alt"] == ["sse"]
    assert request.model == MODEL
    assert request.headers["x-goog-api-key"] == "test-key"
    assert request.system_text() == "You are a terse assistant."
    assert request.function_names() == ["set_state"]
    contents = request.body["contents"]
    assert [content["role"] for content in contents] == ["user", "model", "user"]
    assert contents[0]["parts"] == [{"text": "Call me Ada"}]
    assert contents[1]["parts"][0]["functionCall"]["args"] == {"key": "user:name", "value": "Ada"}
    assert contents[2]["parts"][0]["functionResponse"]["response"] == {"status": "ok"}


async def test_request_without_tools_declares_none(gemini, fake_gemini):
    fake_gemini.push(Reply([text_chunk("Hi."), final_chunk()]))

    await collect(gemini.generate_stream(chat_request(tools=())))

    assert "tools" not in fake_gemini.requests[0].body


async def test_the_client_does_not_retry_by_itself(gemini, fake_gemini):
    fake_gemini.push(HttpError(429, "Quota exceeded."), Reply([text_chunk("late"), final_chunk()]))

    with pytest.raises(ModelError) as raised:
        await collect(gemini.generate_stream(chat_request()))

    assert raised.value.code == "rate_limited"
    assert raised.value.transient is True
    assert "Quota exceeded." in str(raised.value)
    assert len(fake_gemini.requests) == 1


async def test_rate_limit_then_success_is_retried(gemini, fake_gemini):
    fake_gemini.push(HttpError(429), Reply([text_chunk("Second time lucky."), final_chunk()]))

    chunks = await collect(generate_with_retries(gemini, chat_request(), FAST_RETRIES))

    assert "".join(chunk.text for chunk in chunks) == "Second time lucky."
    assert len(fake_gemini.requests) == 2


async def test_server_errors_on_every_attempt_end_in_a_transient_error(gemini, fake_gemini):
    fake_gemini.push(*[HttpError(500, "Internal error.")] * FAST_RETRIES.attempts)

    with pytest.raises(ModelError) as raised:
        await collect(generate_with_retries(gemini, chat_request(), FAST_RETRIES))

    assert raised.value.code == "model_unavailable"
    assert raised.value.transient is True
    assert len(fake_gemini.requests) == FAST_RETRIES.attempts


async def test_bad_request_is_not_retried(gemini, fake_gemini):
    fake_gemini.push(HttpError(400, "Invalid JSON payload."), Reply([text_chunk("unused")]))

    with pytest.raises(ModelError) as raised:
        await collect(generate_with_retries(gemini, chat_request(), FAST_RETRIES))

    assert raised.value.code == "model_rejected"
    assert raised.value.transient is False
    assert "Invalid JSON payload." in str(raised.value)
    assert len(fake_gemini.requests) == 1


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(FailMidStream([text_chunk("Half an ")]), id="connection-dropped"),
        pytest.param(FailMidStream([text_chunk("Half an ")], error_status=503), id="error-event"),
    ],
)
async def test_mid_stream_failure_raises_after_the_text_so_far(gemini, fake_gemini, failure):
    fake_gemini.push(failure, Reply([text_chunk("A retry would repeat text."), final_chunk()]))
    received: list[str] = []

    with pytest.raises(ModelError) as raised:
        async for chunk in generate_with_retries(gemini, chat_request(), FAST_RETRIES):
            received.append(chunk.text)

    assert received == ["Half an "]
    assert raised.value.code == "model_unavailable"
    assert raised.value.transient is True
    assert len(fake_gemini.requests) == 1


async def test_a_model_that_does_not_answer_in_time_is_a_transient_timeout(fake_gemini, settings):
    settings.LLM_TIMEOUT_SECONDS = 0.3
    fake_gemini.push(Stall(seconds=10))
    model = GeminiModel(MODEL)

    with pytest.raises(ModelError) as raised:
        await collect(model.generate_stream(chat_request()))
    await model.aclose()

    assert raised.value.code == "timeout"
    assert raised.value.transient is True


@pytest.mark.parametrize(
    ("finish_reason", "code", "transient"),
    [("SAFETY", "model_blocked", False), ("STOP", "model_empty_response", True)],
)
async def test_a_response_without_text_or_calls_is_an_error(
    gemini, fake_gemini, finish_reason, code, transient
):
    fake_gemini.push(Reply([final_chunk(finish_reason=finish_reason)]))

    with pytest.raises(ModelError) as raised:
        await collect(gemini.generate_stream(chat_request()))

    assert (raised.value.code, raised.value.transient) == (code, transient)


async def test_generate_json_asks_for_json_and_parses_the_answer(gemini, fake_gemini):
    schema = {
        "type": "object",
        "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
        "required": ["facts"],
    }
    fake_gemini.push(Reply([text_chunk('{"facts": ["likes green tea"]}'), final_chunk()]))

    answer = await gemini.generate_json(
        system_instruction="Extract facts about the user.",
        contents=[user_says("I drink green tea every morning.")],
        response_schema=schema,
    )

    assert answer == {"facts": ["likes green tea"]}
    [request] = fake_gemini.requests
    assert request.action == "generateContent"
    assert request.system_text() == "Extract facts about the user."
    assert request.body["generationConfig"]["responseMimeType"] == "application/json"
    assert request.body["generationConfig"]["responseJsonSchema"] == schema
    assert request.body["contents"][0]["parts"] == [{"text": "I drink green tea every morning."}]


@pytest.mark.parametrize(
    ("answer", "code", "transient"),
    [
        (Reply([text_chunk("Sure! Here are the facts.")]), "model_invalid_output", False),
        (Reply([text_chunk('["not", "an", "object"]')]), "model_invalid_output", False),
        (HttpError(503), "model_unavailable", True),
    ],
)
async def test_generate_json_failures_are_model_errors(
    gemini, fake_gemini, answer, code, transient
):
    fake_gemini.push(answer)

    with pytest.raises(ModelError) as raised:
        await gemini.generate_json(
            system_instruction="Extract facts.", contents="Hi", response_schema={"type": "object"}
        )

    assert (raised.value.code, raised.value.transient) == (code, transient)


async def test_embed_returns_one_vector_per_text_in_order(gemini, fake_gemini):
    vectors = await gemini.embed(["likes tea", "lives in Lyon"])

    assert vectors == [embedding_for("likes tea"), embedding_for("lives in Lyon")]
    [request] = fake_gemini.requests
    assert (request.action, request.model) == ("batchEmbedContents", "gemini-embedding-001")
    assert [item["content"]["parts"] for item in request.body["requests"]] == [
        [{"text": "likes tea"}],
        [{"text": "lives in Lyon"}],
    ]


async def test_embed_of_nothing_makes_no_request(gemini, fake_gemini):
    assert await gemini.embed([]) == []
    assert fake_gemini.requests == []


async def test_embed_rate_limit_is_a_transient_model_error(gemini, fake_gemini):
    fake_gemini.push_embedding(HttpError(429))

    with pytest.raises(ModelError) as raised:
        await gemini.embed(["likes tea"], model="text-embedding-004")

    assert (raised.value.code, raised.value.transient) == ("rate_limited", True)
    assert fake_gemini.requests[0].model == "text-embedding-004"


async def test_a_small_file_goes_inline_and_a_large_one_through_the_files_api_once(
    gemini, fake_gemini, settings
):
    settings.ATTACHMENT_INLINE_MAX_BYTES = 1000
    small = b"\x89PNG small image bytes"
    large = b"%PDF-" + b"x" * 5000
    message = types.Content(
        role="user",
        parts=[
            types.Part(text="What is in these?"),
            types.Part(inline_data=types.Blob(data=small, mime_type="image/png")),
            types.Part(inline_data=types.Blob(data=large, mime_type="application/pdf")),
        ],
    )
    fake_gemini.push(Reply([text_chunk("A logo."), final_chunk()]))
    fake_gemini.push(Reply([text_chunk("Still a logo."), final_chunk()]))

    await collect(gemini.generate_stream(chat_request(message)))
    await collect(gemini.generate_stream(chat_request(message)))

    [uploaded] = fake_gemini.files.values()
    assert (uploaded.data, uploaded.mime_type, uploaded.complete) == (
        large,
        "application/pdf",
        True,
    )
    for request in fake_gemini.requests:
        parts = request.body["contents"][0]["parts"]
        assert parts[0] == {"text": "What is in these?"}
        assert parts[1]["inlineData"]["mime_type"] == "image/png"
        assert base64.urlsafe_b64decode(parts[1]["inlineData"]["data"]) == small
        assert parts[2] == {"fileData": {"file_uri": uploaded.uri, "mime_type": "application/pdf"}}
