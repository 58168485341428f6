"""The Chat Completions wire format as the OpenAI-compatible provider speaks it, without the
client: the product's conversation as messages (text as one string, content parts only for a
message with an image), tools, streamed tool calls, the roads to a structured answer, and what
is learnt of each server's model."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from google.genai import types

from core.llm import ModelError

ANSWER_TOOL = "answer"
# What stands for an image in a request resent to a model that refused images.
IMAGE_LEFT_OUT = "(An image was here; this model cannot see images, so it was left out.)"


def partuser_content(part: types.Part) -> dict[str, Any] | None:
    """One part of a user message as a Chat Completions content part: text, an image as a
    data URL, a text file as its text, any other file named (the API carries no other kind)."""
    if part.text:
        return {"type": "text", "text": part.text}
    blob = part.inline_data
    if blob is None or blob.data is None:
        return None
    mime_type = blob.mime_type or "application/octet-stream"
    if mime_type.startswith("image/"):
        url = f"data:{mime_type};base64,{base64.b64encode(blob.data).decode()}"
        return {"type": "image_url", "image_url": {"url": url}}
    if mime_type.startswith("text/") or mime_type in ("application/json", "text/csv"):
        return {"type": "text", "text": blob.data.decode("utf-8", errors="replace")}
    return {"type": "text", "text": f"(a {mime_type} file this model cannot read)"}


def chat_messages(system_instruction: str, contents: str | list[types.Content]) -> list[dict]:
    """The conversation as Chat Completions messages, the system instruction first."""
    messages: list[dict[str, Any]] = []
    if system_instruction:
        messages.append({"role": "system", "content": system_instruction})
    if isinstance(contents, str):
        messages.append({"role": "user", "content": contents})
        return messages
    for content in contents:
        parts = list(content.parts or ())
        if content.role == "model":
            text = "".join(part.text or "" for part in parts if not part.thought)
            calls = [
                {
                    "id": part.function_call.id or f"call-{index}",
                    "type": "function",
                    "function": {
                        "name": part.function_call.name,
                        "arguments": json.dumps(part.function_call.args or {}),
                    },
                }
                for index, part in enumerate(parts)
                if part.function_call
            ]
            # Text even when empty: llama-cpp-python's server refuses an assistant message whose
            # content is null, which the OpenAI API allows beside tool calls.
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                message["tool_calls"] = calls
            messages.append(message)
            continue
        for index, part in enumerate(parts):
            if part.function_response:
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.function_response.id or f"call-{index}",
                        "content": json.dumps(part.function_response.response or {}),
                    }
                )
        shown = [
            item
            for part in parts
            if not part.function_response and (item := partuser_content(part)) is not None
        ]
        if shown:
            messages.append({"role": "user", "content": user_content(shown)})
    return messages


def user_content(items: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A user message's content as servers take it: one string when it is all text (llama.cpp's
    ``chatml`` format drops a list of parts, other templates fail on it), the list of parts only
    when an image needs the vision form."""
    if any(item["type"] == "image_url" for item in items):
        return items
    return "\n\n".join(item["text"] for item in items)


def has_images(messages: list[dict[str, Any]]) -> bool:
    return any(
        isinstance(message["content"], list)
        and any(item["type"] == "image_url" for item in message["content"])
        for message in messages
    )


def images_left_out(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every image replaced by the text :data:`IMAGE_LEFT_OUT`."""
    return [
        {
            **message,
            "content": user_content(
                [
                    {"type": "text", "text": IMAGE_LEFT_OUT}
                    if item["type"] == "image_url"
                    else item
                    for item in message["content"]
                ]
            ),
        }
        if isinstance(message["content"], list)
        else message
        for message in messages
    ]


def tool_spec(declaration: types.FunctionDeclaration) -> dict[str, Any]:
    parameters = declaration.parameters_json_schema
    if parameters is None and declaration.parameters is not None:
        parameters = declaration.parameters.json_schema.model_dump(mode="json", exclude_none=True)
    return {
        "type": "function",
        "function": {
            "name": declaration.name,
            "description": declaration.description or "",
            "parameters": parameters or {"type": "object", "properties": {}},
        },
    }


@dataclass
class PendingCall:
    """A tool call being streamed: its arguments arrive as fragments of a JSON string."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def function_call(self) -> types.FunctionCall:
        raw = "".join(self.arguments).strip() or "{}"
        try:
            args = json.loads(raw)
        except json.JSONDecodeError as error:
            raise ModelError(
                f"The model called {self.name} with arguments that are not JSON: {raw:.200}",
                code="model_invalid_output",
                transient=True,
            ) from error
        return types.FunctionCall(
            id=self.id or None, name=self.name, args=args if isinstance(args, dict) else {}
        )


# The roads to a structured answer, in the order tried: the standard ``json_schema`` response
# format; llama.cpp's own form (``json_object`` with the schema, which its grammar enforces);
# the schema as the parameters of one forced tool call; and the schema asked for in words,
# read by a tolerant parser (JSON in prose, in fences, with text after it).
STRUCTURED_ROADS = ("json_schema", "json_object", "tool_call", "prompt")


def structured_request(
    road: str, messages: list[dict[str, Any]], schema: dict[str, Any]
) -> dict[str, Any]:
    """The keyword arguments of a Chat Completions call asking by ``road`` for a JSON object
    matching ``schema``."""
    if road == "json_schema":
        return {
            "messages": messages,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": ANSWER_TOOL, "schema": schema},
            },
        }
    if road == "json_object":
        return {
            "messages": messages,
            "response_format": {"type": "json_object", "schema": schema},
        }
    if road == "tool_call":
        return {
            "messages": messages,
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": ANSWER_TOOL,
                        "description": "Give your answer.",
                        "parameters": schema,
                    },
                }
            ],
            "tool_choice": {"type": "function", "function": {"name": ANSWER_TOOL}},
        }
    asked = (
        "Answer with one JSON object and nothing else, matching this JSON Schema:\n"
        + json.dumps(schema)
    )
    if messages and messages[0]["role"] == "system":
        system = {"role": "system", "content": f"{messages[0]['content']}\n\n{asked}"}
        return {"messages": [system, *messages[1:]]}
    return {"messages": [{"role": "system", "content": asked}, *messages]}


def structured_text(response: Any) -> str:
    """The JSON text of a structured answer: the forced tool call's arguments, else the
    message's text."""
    message = response.choices[0].message
    calls = message.tool_calls or []
    return calls[0].function.arguments if calls else (message.content or "")


@dataclass
class ServerTraits:
    """What this process has learnt of one model of one server, so that a later request goes
    the way that works at once: whether it calls tools at all, whether it can stream a tool
    decision (llama-cpp-python's ``chatml-function-calling`` cannot), and which road of
    structured output it answers, and the model's context window."""

    calls_tools: bool = True
    streams_tool_choice: bool = True
    structured_road: str = ""
    # The model's context window as the server's model list says it (0: not asked yet; -1:
    # the server does not say, so ``OPENAI_CONTEXT_TOKENS`` holds).
    context_tokens: int = 0


TRAITS: dict[tuple[str, str], ServerTraits] = {}


def server_traits(model: str) -> ServerTraits:
    """The traits learnt of ``model`` on the configured server (``OPENAI_BASE_URL``)."""
    return TRAITS.setdefault((settings.OPENAI_BASE_URL, model), ServerTraits())
