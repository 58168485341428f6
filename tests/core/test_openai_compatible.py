"""An OpenAI-compatible model (Ollama, vLLM, LM Studio...) through the real ``openai`` client,
against a local fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from google.genai import types

from core.chat_completions import IMAGE_LEFT_OUT
from core.llm import (
    ModelError,
    generate_with_retries,
    provider_model,
    structured_answer,
)
from core.openai_compatible import OpenAICompatibleModel
from core.request_slots import request_slot
from tests.core.test_gemini import FAST_RETRIES, chat_request, collect, user_says
from tests.fake_openai import (
    FailMidStream,
    FakeOpenAI,
    HttpError,
    Reply,
    Stall,
    embedding_for,
    final_chunk,
    json_reply,
    reasoning_delta,
    text_delta,
    text_reply,
    tool_answer_reply,
    tool_call_deltas,
)

MODEL = "llama3.2"


def test_the_provider_setting_chooses_the_openai_client(fake_openai):
    assert isinstance(provider_model(model=MODEL), OpenAICompatibleModel)


async def test_streamed_text_arrives_in_order_without_reasoning(openai_model, fake_openai):
    fake_openai.push(
        Reply(
            [
                reasoning_delta("Let me think."),
                text_delta("Hel"),
                text_delta("lo, "),
                text_delta("world."),
                *final_chunk(prompt_tokens=12, output_tokens=4),
            ]
        )
    )

    chunks = await collect(openai_model.generate_stream(chat_request()))

    assert [chunk.text for chunk in chunks] == ["Hel", "lo, ", "world.", ""]
    assert chunks[-1].finish_reason == "stop"
    assert chunks[-1].usage_metadata.prompt_token_count == 12
    assert chunks[-1].usage_metadata.candidates_token_count == 4
    sent = fake_openai.requests[0]
    assert sent.body["model"] == MODEL
    assert sent.body["stream"] is True
    assert sent.system_text() == "You are a terse assistant."
    assert sent.user_text() == "Hello"
    assert sent.tool_names() == ["set_state"]
    assert sent.body["tools"][0]["function"]["parameters"]["type"] == "object"


async def test_tools_go_with_tool_choice_auto_which_some_servers_need_to_use_them(
    openai_model, fake_openai
):
    fake_openai.push(text_reply("Hi."))

    await collect(openai_model.generate_stream(chat_request()))

    assert fake_openai.requests[0].body["tool_choice"] == "auto"


async def test_a_server_that_cannot_stream_a_tool_decision_is_asked_without_a_stream(
    openai_model, fake_openai
):
    fake_openai.streams_tool_choice = False
    call = Reply([*tool_call_deltas("set_state", {"key": "tea", "value": "green"}), *final_chunk()])
    fake_openai.push(call, call)

    chunks = await collect(openai_model.generate_stream(chat_request()))

    [called] = [c for chunk in chunks for c in chunk.function_calls]
    assert (called.name, called.args) == ("set_state", {"key": "tea", "value": "green"})
    streamed, unstreamed = fake_openai.requests
    assert streamed.body["stream"] is True
    assert "stream" not in unstreamed.body
    assert unstreamed.body["tool_choice"] == "auto"

    fake_openai.push(text_reply("Tea it is."))
    chunks = await collect(openai_model.generate_stream(chat_request()))

    assert "".join(chunk.text for chunk in chunks) == "Tea it is."
    assert "stream" not in fake_openai.requests[-1].body, "learnt: no stream for tool turns"


async def test_a_refusal_to_stream_a_tool_decision_keeps_the_tools_and_drops_the_stream(
    openai_model, fake_openai
):
    """A server that refuses the streamed tool decision outright (llama-cpp-python's
    ValueError as a 500) still calls tools: asked without a stream, not without tools."""
    call = Reply([*tool_call_deltas("set_state", {"key": "tea", "value": "green"}), *final_chunk()])
    fake_openai.push(HttpError(500, "Automatic streaming tool choice is not supported"), call)

    chunks = await collect(openai_model.generate_stream(chat_request()))

    [called] = [c for chunk in chunks for c in chunk.function_calls]
    assert called.name == "set_state"
    assert openai_model.calls_tools is True
    assert openai_model.traits.streams_tool_choice is False
    streamed, unstreamed = fake_openai.requests
    assert streamed.body["stream"] is True
    assert "stream" not in unstreamed.body and unstreamed.tool_names() == ["set_state"]


async def test_a_server_that_refuses_tools_is_asked_without_them_and_it_is_remembered(
    openai_model, fake_openai
):
    fake_openai.push(
        HttpError(400, "registry.ollama.ai/library/gemma does not support tools"),
        text_reply("Hello."),
        text_reply("Hello again."),
    )

    chunks = await collect(openai_model.generate_stream(chat_request()))

    assert "".join(chunk.text for chunk in chunks) == "Hello."
    assert openai_model.calls_tools is False
    await collect(openai_model.generate_stream(chat_request()))
    offered, resent, later = fake_openai.requests
    assert offered.tool_names() == ["set_state"]
    assert "tools" not in resent.body and "tool_choice" not in resent.body
    assert "tools" not in later.body


async def test_a_tool_call_streamed_in_pieces_and_its_result_go_back_as_messages(
    openai_model, fake_openai
):
    fake_openai.push(
        Reply(
            [
                *tool_call_deltas("set_state", {"key": "city", "value": "Porto"}, call_id="c7"),
                *final_chunk(finish_reason="tool_calls"),
            ]
        )
    )

    chunks = await collect(openai_model.generate_stream(chat_request()))

    [call] = chunks[0].function_calls
    assert (call.id, call.name, call.args) == ("c7", "set_state", {"key": "city", "value": "Porto"})
    assert chunks[0].function_call_parts[0].function_call is call

    fake_openai.push(text_reply("Saved."))
    answered = types.Content(
        role="user",
        parts=[
            types.Part(
                function_response=types.FunctionResponse(
                    id="c7", name="set_state", response={"ok": True}
                )
            )
        ],
    )
    called = types.Content(role="model", parts=chunks[0].function_call_parts)
    chunks = await collect(
        openai_model.generate_stream(chat_request(user_says("I live in Porto"), called, answered))
    )

    assert "".join(chunk.text for chunk in chunks) == "Saved."
    messages = fake_openai.requests[1].messages
    assert messages[2]["role"] == "assistant"
    assert messages[2]["tool_calls"][0]["id"] == "c7"
    assert json.loads(messages[2]["tool_calls"][0]["function"]["arguments"]) == call.args
    assert messages[3] == {"role": "tool", "tool_call_id": "c7", "content": '{"ok": true}'}


async def test_an_image_goes_as_a_data_url_and_a_text_file_as_text(openai_model, fake_openai):
    fake_openai.push(text_reply("A red dot."))
    content = types.Content(
        role="user",
        parts=[
            types.Part(text="What is this?"),
            types.Part(inline_data=types.Blob(data=b"\x89PNG", mime_type="image/png")),
            types.Part(inline_data=types.Blob(data=b"a,b\n1,2", mime_type="text/csv")),
        ],
    )

    await collect(openai_model.generate_stream(chat_request(content)))

    sent = fake_openai.requests[0].messages[-1]["content"]
    assert sent[0] == {"type": "text", "text": "What is this?"}
    assert sent[1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}
    assert sent[2] == {"type": "text", "text": "a,b\n1,2"}


async def test_text_goes_as_one_string_as_every_server_takes_it(openai_model, fake_openai):
    fake_openai.push(text_reply("Noted."))
    content = types.Content(
        role="user",
        parts=[
            types.Part(text="Here is my list."),
            types.Part(inline_data=types.Blob(data=b"a,b\n1,2", mime_type="text/csv")),
        ],
    )

    await collect(openai_model.generate_stream(chat_request(content)))

    system, user = fake_openai.requests[0].messages
    assert system == {"role": "system", "content": "You are a terse assistant."}
    assert user == {"role": "user", "content": "Here is my list.\n\na,b\n1,2"}


async def test_the_fake_refuses_text_as_parts_as_llama_cpp_templates_do(fake_openai):
    import openai

    client = openai.AsyncOpenAI(base_url=fake_openai.url, api_key="none", max_retries=0)
    parts = [{"type": "text", "text": "Hello"}]
    with pytest.raises(openai.InternalServerError) as raised:
        await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": parts}]
        )
    await client.close()

    assert "can only concatenate str" in str(raised.value)


def _with_picture(text: str) -> types.Content:
    return types.Content(
        role="user",
        parts=[
            types.Part(text=text),
            types.Part(inline_data=types.Blob(data=b"\x89PNG", mime_type="image/png")),
            types.Part(inline_data=types.Blob(data=b"a,b\n1,2", mime_type="text/csv")),
        ],
    )


async def test_a_model_without_vision_is_asked_again_with_the_images_left_out(
    openai_model, fake_openai
):
    fake_openai.push(
        HttpError(400, "this model does not support image input"),
        text_reply("I cannot see pictures."),
    )

    chunks = await collect(openai_model.generate_stream(chat_request(_with_picture("And this?"))))

    assert "".join(chunk.text for chunk in chunks) == "I cannot see pictures."
    refused, answered = fake_openai.requests
    assert refused.messages[-1]["content"][1]["type"] == "image_url"
    assert answered.messages[-1]["content"] == f"And this?\n\n{IMAGE_LEFT_OUT}\n\na,b\n1,2"
    assert answered.body["stream"] is True
    assert answered.tool_names() == ["set_state"]


async def test_a_refusal_that_is_not_about_images_is_not_sent_again_without_them(
    openai_model, fake_openai
):
    fake_openai.push(HttpError(400, "no images please"), HttpError(400, "unknown parameter: seed"))

    with pytest.raises(ModelError) as raised:
        await collect(openai_model.generate_stream(chat_request(_with_picture("And this?"))))

    assert "unknown parameter: seed" in str(raised.value)
    assert len(fake_openai.requests) == 2


async def test_a_rate_limit_then_success_is_retried(openai_model, fake_openai):
    fake_openai.push(HttpError(429, "slow down"), HttpError(503), text_reply("Hi."))

    chunks = await collect(generate_with_retries(openai_model, chat_request(), FAST_RETRIES))

    assert "".join(chunk.text for chunk in chunks) == "Hi."
    assert len(fake_openai.requests) == 3


async def test_a_rejected_request_is_not_retried(openai_model, fake_openai):
    fake_openai.push(HttpError(400, "model 'llama3.2' not found, try pulling it first"))

    with pytest.raises(ModelError) as raised:
        await collect(generate_with_retries(openai_model, chat_request(), FAST_RETRIES))

    assert raised.value.code == "model_rejected"
    assert "not found" in str(raised.value)
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize("error_event", [False, True])
async def test_a_stream_cut_in_the_middle_is_an_error_after_the_text_already_given(
    openai_model, fake_openai, error_event
):
    fake_openai.push(FailMidStream([text_delta("Half an ")], error=error_event))
    received = []

    with pytest.raises(ModelError) as raised:
        async for chunk in generate_with_retries(openai_model, chat_request(), FAST_RETRIES):
            received.append(chunk.text)

    assert received == ["Half an "]
    assert raised.value.code == ("model_error" if error_event else "model_unavailable")
    assert len(fake_openai.requests) == 1


async def test_a_server_that_is_down_is_a_transient_unavailable_model(settings):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.OPENAI_BASE_URL = f"http://127.0.0.1:{port}/v1"
    model = OpenAICompatibleModel(MODEL)

    with pytest.raises(ModelError) as raised:
        await collect(model.generate_stream(chat_request()))
    await model.aclose()

    assert raised.value.code == "model_unavailable"
    assert raised.value.transient is True
    assert f"127.0.0.1:{port}" in str(raised.value)


async def test_a_model_that_does_not_answer_in_time_is_a_transient_timeout(fake_openai, settings):
    settings.LLM_TIMEOUT_SECONDS = 0.3
    fake_openai.push(Stall(seconds=10))
    model = OpenAICompatibleModel(MODEL)

    with pytest.raises(ModelError) as raised:
        await collect(model.generate_stream(chat_request()))
    await model.aclose()

    assert (raised.value.code, raised.value.transient) == ("timeout", True)


@pytest.mark.parametrize(
    ("finish_reason", "code"),
    [("content_filter", "model_blocked"), ("stop", "model_empty_response")],
)
async def test_a_response_without_text_or_calls_is_an_error(
    openai_model, fake_openai, finish_reason, code
):
    fake_openai.push(Reply(final_chunk(finish_reason=finish_reason)))

    with pytest.raises(ModelError) as raised:
        await collect(openai_model.generate_stream(chat_request()))

    assert raised.value.code == code


SCHEMA = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
    "required": ["facts"],
}


async def test_generate_json_asks_for_the_json_schema_and_parses_the_answer(
    openai_model, fake_openai
):
    fake_openai.push(json_reply({"facts": ["likes tea"]}))

    answer = await openai_model.generate_json(
        system_instruction="Extract.", contents="I like tea.", response_schema=SCHEMA
    )

    assert answer == {"facts": ["likes tea"]}
    sent = fake_openai.requests[0].body
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["schema"] == SCHEMA
    assert "stream" not in sent


async def test_a_server_that_refuses_json_schema_with_a_500_is_asked_its_own_way_and_it_is_kept(
    openai_model, fake_openai
):
    fake_openai.json_schema_refused = True
    fake_openai.push(json_reply({"facts": ["likes tea"]}), json_reply({"facts": ["lives in Lyon"]}))

    first = await openai_model.generate_json(
        system_instruction="Extract.", contents="I like tea.", response_schema=SCHEMA
    )
    second = await openai_model.generate_json(
        system_instruction="Extract.", contents="I live in Lyon.", response_schema=SCHEMA
    )

    assert (first, second) == ({"facts": ["likes tea"]}, {"facts": ["lives in Lyon"]})
    formats = [request.body["response_format"] for request in fake_openai.requests]
    assert [f["type"] for f in formats] == ["json_schema", "json_object", "json_object"]
    assert formats[1]["schema"] == SCHEMA


async def test_structured_output_goes_down_every_road_to_json_asked_in_words(
    openai_model, fake_openai
):
    fake_openai.push(
        HttpError(400, "response_format json_schema is not supported"),
        HttpError(500, "1 validation error: Input should be 'text'"),
        json_reply("Sure! Tea."),
        json_reply('Here it is:\n```json\n{"facts": ["likes tea"]}\n```\nAnything else?'),
    )

    answer = await openai_model.generate_json(
        system_instruction="Extract.", contents="I like tea.", response_schema=SCHEMA
    )

    assert answer == {"facts": ["likes tea"]}
    schema_road, object_road, tool_road, prompt_road = (r.body for r in fake_openai.requests)
    assert schema_road["response_format"]["type"] == "json_schema"
    assert object_road["response_format"] == {"type": "json_object", "schema": SCHEMA}
    assert tool_road["tool_choice"] == {"type": "function", "function": {"name": "answer"}}
    assert tool_road["tools"][0]["function"]["parameters"] == SCHEMA
    assert "response_format" not in prompt_road and "tools" not in prompt_road
    assert json.dumps(SCHEMA) in prompt_road["messages"][0]["content"]
    assert prompt_road["messages"][0]["content"].startswith("Extract.")


async def test_a_forced_tool_call_answers_where_the_response_formats_are_ignored(
    openai_model, fake_openai
):
    fake_openai.push(
        json_reply("Sure! Tea."),
        json_reply("Tea, I think."),
        tool_answer_reply("answer", {"facts": ["likes tea"]}),
    )

    answer = await openai_model.generate_json(
        system_instruction="Extract.", contents="I like tea.", response_schema=SCHEMA
    )

    assert answer == {"facts": ["likes tea"]}
    assert "response_format" not in fake_openai.requests[2].body


async def test_an_outage_is_not_a_refusal_and_takes_no_other_road(openai_model, fake_openai):
    fake_openai.push(HttpError(503, "Service Unavailable"))

    with pytest.raises(ModelError) as raised:
        await openai_model.generate_json(
            system_instruction="Extract.", contents="I like tea.", response_schema=SCHEMA
        )

    assert (raised.value.code, raised.value.transient) == ("model_unavailable", True)
    assert len(fake_openai.requests) == 1


@pytest.mark.parametrize(
    "text",
    [
        '{"facts": []}',
        '```json\n{"facts": []}\n```',
        'The answer is {"facts": []} as asked.',
        '{"facts": []}\n\nI hope this helps {with braces}.',
    ],
)
def test_the_structured_answer_is_read_from_prose_fences_and_trailing_text(text):
    assert structured_answer(text, provider="A server") == {"facts": []}


@pytest.mark.parametrize(
    ("cut", "kept"),
    [
        (
            '{"facts": [{"text": "tea", "ids": ["e1"]}, {"text": "Lyo',
            {"facts": [{"text": "tea", "ids": ["e1"]}]},
        ),
        (
            '{"facts": [{"text": "a \\"]}\\" b"}, {"text": "c"}, {',
            {"facts": [{"text": 'a "]}" b'}, {"text": "c"}]},
        ),
        (
            '{"operations": [{"fact": 1, "ids": ["a"]}, {"fact": 2, "ids": ["b"',
            {"operations": [{"fact": 1, "ids": ["a"]}]},
        ),
    ],
)
def test_an_answer_cut_at_its_token_limit_keeps_its_complete_items(cut, kept):
    """Issue 42: a small model's structured answer that runs into ``max_tokens`` keeps what
    it answered in full; an item cut inside (it would lack fields) is left out."""
    assert structured_answer(cut, provider="A server", cut=True) == kept


@pytest.mark.parametrize("cut", ['{"facts": [{"text": "Lyo', '{"facts": ', "no json at all"])
def test_an_answer_cut_before_its_first_complete_item_is_invalid_output(cut):
    with pytest.raises(ModelError) as raised:
        structured_answer(cut, provider="A server", cut=True)

    assert raised.value.code == "model_invalid_output"


async def test_generate_json_cut_at_max_tokens_keeps_the_complete_facts(openai_model, fake_openai):
    cut = '{"facts": ["likes tea", "lives in Lyon", "has a ca'
    fake_openai.push(Reply([text_delta(cut), *final_chunk(finish_reason="length")]))

    answer = await openai_model.generate_json(
        system_instruction="Extract.", contents="I like tea.", response_schema=SCHEMA
    )

    assert answer == {"facts": ["likes tea", "lives in Lyon"]}
    assert len(fake_openai.requests) == 1


def test_a_structured_answer_without_an_object_is_invalid_output():
    with pytest.raises(ModelError) as raised:
        structured_answer("[1, 2] and {not json}", provider="A server")

    assert raised.value.code == "model_invalid_output"


async def test_generate_json_from_a_model_without_vision_leaves_the_images_out(
    openai_model, fake_openai
):
    fake_openai.push(
        HttpError(400, "Model does not support images. Please use a model that does."),
        json_reply({"facts": ["likes tea"]}),
    )

    answer = await openai_model.generate_json(
        system_instruction="Extract.",
        contents=[_with_picture("I like tea.")],
        response_schema=SCHEMA,
    )

    assert answer == {"facts": ["likes tea"]}
    resent = fake_openai.requests[1].body
    assert resent["response_format"]["json_schema"]["schema"] == SCHEMA
    assert resent["messages"][-1]["content"].startswith("I like tea.\n\n(An image was here")


async def test_generate_json_that_is_never_json_is_invalid_output(openai_model, fake_openai):
    fake_openai.push(*(json_reply(text) for text in ("{not", "still not", "no", "nope")))

    with pytest.raises(ModelError) as raised:
        await openai_model.generate_json(
            system_instruction="Extract.", contents="I like tea.", response_schema=SCHEMA
        )

    assert (raised.value.code, raised.value.transient) == ("model_invalid_output", False)


async def test_generate_json_on_a_busy_server_is_transient(openai_model, fake_openai):
    fake_openai.push(HttpError(429))

    with pytest.raises(ModelError) as raised:
        await openai_model.generate_json(
            system_instruction="Extract.", contents="I like tea.", response_schema=SCHEMA
        )

    assert (raised.value.code, raised.value.transient) == ("rate_limited", True)
    assert len(fake_openai.requests) == 1


async def test_embeddings_come_in_order_from_one_request(openai_model, fake_openai):
    vectors = await openai_model.embed(["likes tea", "lives in Lyon"], model="nomic-embed-text")

    assert vectors == [embedding_for("likes tea"), embedding_for("lives in Lyon")]
    [sent] = fake_openai.requests
    assert sent.path == "/v1/embeddings"
    assert sent.body == {
        "model": "nomic-embed-text",
        "input": ["likes tea", "lives in Lyon"],
        "encoding_format": "float",
    }
    assert await openai_model.embed([], model="nomic-embed-text") == []


async def test_an_embedding_failure_is_a_model_error(openai_model, fake_openai):
    fake_openai.push_embedding(HttpError(404, "model 'nomic-embed-text' not found"))

    with pytest.raises(ModelError) as raised:
        await openai_model.embed(["likes tea"], model="nomic-embed-text")

    assert raised.value.code == "model_rejected"
    assert "not found" in str(raised.value)


def _history(*texts: str) -> list[types.Content]:
    """Alternating user and model turns of ``texts``, the last one the user's."""
    return [
        types.Content(
            role="user" if (len(texts) - index) % 2 else "model", parts=[types.Part(text=text)]
        )
        for index, text in enumerate(texts)
    ]


async def test_every_request_has_max_tokens_from_the_settings(openai_model, fake_openai, settings):
    settings.LLM_MAX_REPLY_TOKENS = 300
    settings.LLM_MAX_SUMMARY_TOKENS = 200
    settings.LLM_MAX_STRUCTURED_TOKENS = 100
    fake_openai.push(text_reply("Hi."), text_reply("A summary."), json_reply({"facts": []}))

    await collect(openai_model.generate_stream(chat_request()))
    summary = chat_request()
    summary.purpose = "summarize"
    await collect(openai_model.generate_stream(summary))
    await openai_model.generate_json(
        system_instruction="Extract.", contents="I like tea.", response_schema=SCHEMA
    )

    assert [r.body["max_tokens"] for r in fake_openai.requests] == [300, 200, 100]


async def test_the_oldest_history_goes_first_to_fit_the_context_the_server_reports(
    openai_model, fake_openai, settings
):
    settings.LLM_MAX_REPLY_TOKENS = 100
    fake_openai.listed_models = {MODEL: {"max_model_len": 400}}
    old = ["a" * 300, "b" * 300, "c" * 300, "d" * 300]
    fake_openai.push(text_reply("Hi."))

    await collect(openai_model.generate_stream(chat_request(*_history(*old, "What now?"))))

    sent = fake_openai.requests[0]
    kept = [message["content"] for message in sent.messages[1:]]
    assert kept == ["c" * 300, "d" * 300, "What now?"]
    assert sent.body["max_tokens"] == 100


async def test_a_message_over_the_context_is_refused_in_words_before_any_request(
    openai_model, fake_openai, settings
):
    settings.OPENAI_CONTEXT_TOKENS = 2048

    with pytest.raises(ModelError) as raised:
        await collect(openai_model.generate_stream(chat_request(user_says("word " * 2000))))

    assert raised.value.code == "message_too_long"
    assert raised.value.transient is False
    assert str(raised.value).startswith("Your message is longer than this model can read (about ")
    assert str(raised.value).endswith(" of 2,048 tokens).")
    assert not [r for r in fake_openai.requests if r.path.endswith("/chat/completions")]


async def test_a_stream_that_ends_empty_is_asked_again_and_the_servers_context_error_told(
    openai_model, fake_openai
):
    fake_openai.push(
        Reply([]),
        HttpError(
            400,
            "This model's maximum context length is 2048 tokens. However, you requested 2224 "
            "tokens (2224 in the messages, None in the completion).",
        ),
    )

    with pytest.raises(ModelError) as raised:
        await collect(generate_with_retries(openai_model, chat_request(), FAST_RETRIES))

    assert str(raised.value) == (
        "Your message is longer than this model can read (about 2,224 of 2,048 tokens)."
    )
    assert len(fake_openai.requests) == 2


async def test_per_token_vectors_are_mean_pooled_into_one_per_text(openai_model, fake_openai):
    fake_openai.embeddings_per_token = True

    [vector] = await openai_model.embed(["likes green tea"], model="smollm2")

    words = [embedding_for(word) for word in ("likes", "green", "tea")]
    assert vector == pytest.approx([sum(column) / 3 for column in zip(*words, strict=True)])


async def test_a_stream_that_stops_without_finishing_is_an_error_after_its_text(
    openai_model, fake_openai
):
    fake_openai.push(Reply([text_delta("Ahoy! "), text_delta("This is")]))
    received = []

    with pytest.raises(ModelError) as raised:
        async for chunk in generate_with_retries(openai_model, chat_request(), FAST_RETRIES):
            received.append(chunk.text)

    assert received == ["Ahoy! ", "This is"]
    assert raised.value.code == "model_unavailable"
    assert "stopped in the middle of the reply" in str(raised.value)
    assert fake_openai.url in str(raised.value)


async def test_with_one_request_at_a_time_the_chat_goes_before_waiting_background_work(
    openai_model, fake_openai, settings
):
    settings.OPENAI_MAX_CONCURRENT_REQUESTS = 1
    fake_openai.push(text_reply("Hi."), json_reply({"facts": []}))

    async with request_slot(server=fake_openai.url, limit=1, chat=False):
        background = asyncio.create_task(
            openai_model.generate_json(
                system_instruction="Extract.", contents="I like tea.", response_schema=SCHEMA
            )
        )
        await asyncio.sleep(0.1)
        chat = asyncio.create_task(collect(openai_model.generate_stream(chat_request())))
        await asyncio.sleep(0.1)
        assert fake_openai.requests == [], "both wait while the server's one slot is taken"

    chunks, answer = await asyncio.gather(chat, background)

    assert "".join(chunk.text for chunk in chunks) == "Hi."
    assert answer == {"facts": []}
    first, second = fake_openai.requests
    assert first.body["stream"] is True and "response_format" in second.body


async def test_embeddings_go_to_a_server_of_their_own(openai_model, fake_openai, settings):
    embedding_server = FakeOpenAI().start()
    settings.MEMORY_OPENAI_EMBEDDING_BASE_URL = embedding_server.url
    try:
        vectors = await openai_model.embed(["likes tea"], model="nomic-embed-text")
    finally:
        embedding_server.stop()

    assert vectors == [embedding_for("likes tea")]
    assert [r.path for r in embedding_server.requests] == ["/v1/embeddings"]
    assert fake_openai.requests == []


async def test_a_stream_broken_off_before_a_word_is_asked_again_without_a_stream(
    openai_model, fake_openai
):
    fake_openai.push(FailMidStream([]), text_reply("Hello."))

    chunks = await collect(openai_model.generate_stream(chat_request()))

    assert "".join(chunk.text for chunk in chunks) == "Hello."
    broken, asked = fake_openai.requests
    assert broken.body["stream"] is True and "stream" not in asked.body
