"""A local HTTP server that speaks the OpenAI-compatible API, for testing the real ``openai``
client as Ollama, vLLM or LM Studio would answer it.

It listens on 127.0.0.1 (a random port) in a background thread and answers:

- ``POST /v1/chat/completions``: with ``"stream": true``, server-sent events, one
  ``data: {chat.completion.chunk}`` per chunk and ``data: [DONE]``; otherwise one
  ``chat.completion``;
- ``POST /v1/embeddings``: deterministic vectors (``embedding_for``) in the order asked.

Each test scripts the answers: every chat request takes the next ``Reply``, ``HttpError``,
``FailMidStream`` or ``Stall`` queued with ``push``; with nothing queued, the ``responder``
(a function of the recorded request, for a whole conversation whose order a test cannot
know, as in a browser test) answers, else a 500 names the problem, so a test that forgot to
script a reply fails loudly. Embedding requests have their own queue (``push_embedding``).
Every request is recorded in ``requests`` with its parsed JSON body.

The fake can also run as a process of its own (``python -m tests.fake_openai PORT``) with a
responder that plays a small assistant (``conversation_reply``), for a server under test in
another process.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fake_gemini import embedding_for
from tests.scripted_server import ScriptedServer


def text_delta(text: str) -> dict[str, Any]:
    """A streamed chunk carrying text."""
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}


def reasoning_delta(text: str) -> dict[str, Any]:
    """A streamed chunk carrying reasoning (as Ollama and vLLM send a thinking model's)."""
    return {"choices": [{"index": 0, "delta": {"reasoning_content": text}, "finish_reason": None}]}


def tool_call_deltas(name: str, args: dict[str, Any], *, call_id: str = "call_1", index: int = 0):
    """The chunks of one streamed tool call: its name, then its arguments in two pieces."""
    arguments = json.dumps(args)
    half = len(arguments) // 2
    first = {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments[:half]},
    }
    second = {"index": index, "function": {"arguments": arguments[half:]}}
    return [
        {"choices": [{"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [second]}, "finish_reason": None}]},
    ]


def final_chunk(
    *, prompt_tokens: int = 10, output_tokens: int = 5, finish_reason: str = "stop"
) -> list[dict[str, Any]]:
    """The closing chunks of a stream: the finish reason, then the usage (``include_usage``)."""
    return [
        {"choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason}]},
        {
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": output_tokens,
                "total_tokens": prompt_tokens + output_tokens,
            },
        },
    ]


def text_reply(*pieces: str) -> Reply:
    """A streamed answer of ``pieces`` of text (one chunk each), then its end."""
    return Reply([*(text_delta(piece) for piece in pieces), *final_chunk()])


def json_reply(answer: Any) -> Reply:
    """A structured answer: ``answer`` as the message's JSON text."""
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return Reply([text_delta(text), *final_chunk()])


def tool_answer_reply(name: str, answer: Any) -> Reply:
    """A structured answer given as a call of the tool ``name`` (the fallback way)."""
    return Reply([*tool_call_deltas(name, answer), *final_chunk(finish_reason="tool_calls")])


@dataclass
class Reply:
    """A successful answer: streamed chunk by chunk, or merged into one completion."""

    chunks: list[dict[str, Any]]

    def merged(self, model: str) -> dict[str, Any]:
        """The chunks as one ``chat.completion``: the text, the tool calls, finish and usage."""
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        finish, usage = "stop", None
        for chunk in self.chunks:
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices", []):
                finish = choice.get("finish_reason") or finish
                delta = choice.get("delta", {})
                text.append(delta.get("content") or "")
                for fragment in delta.get("tool_calls", []):
                    call = calls.setdefault(
                        fragment["index"],
                        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}},
                    )
                    call["id"] = fragment.get("id") or call["id"]
                    function = fragment.get("function", {})
                    call["function"]["name"] = function.get("name") or call["function"]["name"]
                    call["function"]["arguments"] += function.get("arguments") or ""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
        if calls:
            message["tool_calls"] = [calls[index] for index in sorted(calls)]
        body = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if usage:
            body["usage"] = usage
        return body


@dataclass
class HttpError:
    """An HTTP error status with the API's error JSON body, before any chunk."""

    status: int
    message: str = "scripted error"


@dataclass
class FailMidStream:
    """Stream ``chunks``, then break: close the connection without ending the body, as a
    dropped connection looks to the client, or, with ``error``, send an error event."""

    chunks: list[dict[str, Any]]
    error: bool = False


@dataclass
class Stall:
    """Send nothing for ``seconds`` (or until the server stops), then close: a hung model."""

    seconds: float


Script = Reply | HttpError | FailMidStream | Stall


@dataclass
class RecordedRequest:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any] = field(default_factory=dict)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    def system_text(self) -> str:
        """The text of the system message (empty when none)."""
        return "".join(m["content"] for m in self.messages if m["role"] == "system")

    def user_text(self) -> str:
        """The text of the last user message."""
        for message in reversed(self.messages):
            if message["role"] == "user":
                content = message["content"]
                if isinstance(content, str):
                    return content
                return "".join(item.get("text", "") for item in content)
        return ""

    def tool_names(self) -> list[str]:
        """The names of the tools offered to the model."""
        return [tool["function"]["name"] for tool in self.body.get("tools", [])]


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "fake_error", "code": status}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the recorded requests are what tests look at."""

    def do_GET(self) -> None:
        """The model list: ``listed_models``, each with the fields a server adds (vLLM's
        ``max_model_len``...)."""
        if not self.path.endswith("/models"):
            self._send_json(404, error_body(404, f"fake OpenAI: unknown path {self.path}"))
            return
        data = [
            {"id": name, "object": "model", "owned_by": "me", **fields}
            for name, fields in self.server.fake.listed_models.items()
        ]
        self._send_json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        request = RecordedRequest(
            path=self.path,
            headers={key.lower(): value for key, value in self.headers.items()},
            body=json.loads(raw) if raw else {},
        )
        fake = self.server.fake
        refusal = fake.refusal(request)
        script = fake.record(request, refused=refusal is not None)
        if refusal is not None:
            status, message = refusal
            self._send_json(status, error_body(status, message))
        elif isinstance(script, HttpError):
            self._send_json(script.status, error_body(script.status, script.message))
        elif isinstance(script, Stall):
            fake.stopping.wait(script.seconds)
            self.close_connection = True
        elif request.path.endswith("/embeddings"):
            inputs = request.body.get("input", [])
            inputs = [inputs] if isinstance(inputs, str) else inputs
            data = [
                {"object": "embedding", "index": index, "embedding": fake.embedding(text)}
                for index, text in enumerate(inputs)
            ]
            self._send_json(
                200, {"object": "list", "data": data, "model": request.body.get("model")}
            )
        elif not request.path.endswith("/chat/completions"):
            self._send_json(404, error_body(404, f"fake OpenAI: unknown path {request.path}"))
        elif script is None:
            self._send_json(500, error_body(500, "fake OpenAI: no reply scripted"))
        elif request.body.get("stream") and fake.fails_streamed_tool_choice(request, script):
            self._stream(Reply([]), model=request.body.get("model", ""))
        elif request.body.get("stream"):
            usage = fake.streams_usage and bool(
                (request.body.get("stream_options") or {}).get("include_usage")
            )
            self._stream(script, model=request.body.get("model", ""), usage=usage)
        elif isinstance(script, Reply):
            self._send_json(200, script.merged(request.body.get("model", "")))
        else:
            message = f"fake OpenAI: {type(script).__name__} cannot answer without a stream"
            self._send_json(500, error_body(500, message))

    def _send_json(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, script: Reply | FailMidStream, *, model: str, usage: bool = False) -> None:
        """Send ``script``'s chunks as server-sent events; its usage chunk only when the
        request asked for it (``stream_options.include_usage``), as the OpenAI API does."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in script.chunks:
            if "usage" in chunk and not chunk.get("choices") and not usage:
                continue
            body = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0}
            self._send_data(json.dumps({**body, "model": model, **chunk}))
        if isinstance(script, FailMidStream):
            if not script.error:
                self.wfile.flush()
                self.close_connection = True
                return
            self._send_data(json.dumps(error_body(500, "scripted mid-stream error")))
        self._send_data("[DONE]")
        self.wfile.write(b"0\r\n\r\n")

    def _send_data(self, data: str) -> None:
        event = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(event):X}\r\n".encode() + event + b"\r\n")
        self.wfile.flush()


class FakeOpenAI(ScriptedServer):
    """The scripted server; ``start`` it, ``push`` answers, read ``requests``, ``stop`` it."""

    handler = _Handler
    thread_name = "fake-openai"

    def __init__(self, responder: Callable[[RecordedRequest], Script] | None = None) -> None:
        super().__init__()
        self.responder = responder
        # Refuse ``json_schema`` as llama-cpp-python's server does (see ``refusal``).
        self.json_schema_refused = False
        # Stream a tool decision, which llama-cpp-python's server cannot
        # (see ``fails_streamed_tool_choice``).
        self.streams_tool_choice = True
        # Refuse any request offering tools, as Ollama does for a model that calls none.
        self.tools_refused = False
        # Send the usage chunk a stream asks for (``include_usage``), which llama-cpp-python's
        # server never sends: its streams carry no usage.
        self.streams_usage = True
        # Answer a vector per token, as llama.cpp's server without pooling (see ``embedding``).
        self.embeddings_per_token = False
        # ``GET /v1/models``: model name -> the fields its entry adds.
        self.listed_models: dict[str, dict[str, Any]] = {}

    @property
    def url(self) -> str:
        """The base URL to give the client, e.g. ``http://127.0.0.1:54321/v1``."""
        return f"{self.origin}/v1"

    def refusal(self, request: RecordedRequest) -> tuple[int, str] | None:
        """The status and message with which a real server would refuse ``request`` (None
        when it would not). As llama-cpp-python's server, with a 500: a message whose text
        comes as a list of parts without an image fails its models' own chat templates; an
        assistant message's content must be a string, even beside tool calls; with
        ``json_schema_refused``, a ``json_schema`` response format, which it does not know.
        With ``tools_refused``, tools, as Ollama refuses them for a model without tool calling
        (400 "... does not support tools")."""
        for message in request.messages:
            content = message.get("content")
            if message.get("role") == "assistant" and not isinstance(content, str):
                return (
                    500,
                    "messages: an assistant message's content: Input should be a valid string",
                )
            if isinstance(content, list) and not any(
                item.get("type") == "image_url" for item in content
            ):
                return 500, 'can only concatenate str (not "list") to str'
        response_format = request.body.get("response_format") or {}
        if self.json_schema_refused and response_format.get("type") == "json_schema":
            return 500, (
                "1 validation error for CreateChatCompletionRequest response_format.type: "
                "Input should be 'text' or 'json_object'"
            )
        if self.tools_refused and request.body.get("tools"):
            return (
                400,
                f"registry.ollama.ai/library/{request.body.get('model')} does not support tools",
            )
        return None

    def embedding(self, text: str) -> list[float] | list[list[float]]:
        """``text``'s vector, or with ``embeddings_per_token`` one per word, as llama.cpp's
        server answers without pooling (each the vector of the word)."""
        if self.embeddings_per_token:
            return [embedding_for(word) for word in text.split()]
        return embedding_for(text)

    def fails_streamed_tool_choice(self, request: RecordedRequest, script: Script) -> bool:
        """Whether, without ``streams_tool_choice``, this streamed request's answer is a tool
        call the server cannot stream: llama-cpp-python's ``chatml-function-calling`` raises
        "Automatic streaming tool choice is not supported" after its 200, and the stream ends
        with nothing in it."""
        return (
            not self.streams_tool_choice
            and request.body.get("tool_choice") == "auto"
            and isinstance(script, Reply)
            and any(
                choice.get("delta", {}).get("tool_calls")
                for chunk in script.chunks
                for choice in chunk.get("choices", [])
            )
        )

    def record(self, request: RecordedRequest, *, refused: bool = False) -> Script | None:
        """Store ``request`` and hand it the next answer of its queue, else the responder's;
        a ``refused`` request takes none, leaving it for the request sent instead."""
        if refused:
            with self._lock:
                self.requests.append(request)
            return None
        embedding = request.path.endswith("/embeddings")
        script = self.take(request, embedding=embedding)
        if script is None and self.responder is not None and not embedding:
            return self.responder(request)
        return script


_REMEMBER = re.compile(r"remember that (?:my|i) (?P<what>[^.?!]+)", re.IGNORECASE)
_CORRECTION = re.compile(r"actually,? (?:my|i) (?P<what>[^.?!]+)", re.IGNORECASE)


def conversation_reply(request: RecordedRequest) -> Script:
    """A small assistant for a whole conversation: fact extraction (the fact of a "remember
    that my ..." or "actually my ..." message), consolidation (a correction UPDATEs the memory
    shown for it, anything else is CREATEd), compaction summaries, and chat replies that
    quote the user; a judge of answers finds every answer correct."""
    system = request.system_text()
    user = request.user_text()
    if "response_format" in request.body and "operations" in json.dumps(request.body):
        return json_reply(_consolidation(user))
    if "response_format" in request.body:
        return json_reply(_extraction(request))
    if system.startswith("You grade an answer"):
        return text_reply('{"label": "CORRECT"}')
    if system.startswith("Summarise the conversation"):
        return text_reply("Summary: ", "the user talked about ", "their plans.")
    return text_reply("You said: ", user[:80])


def _extraction(request: RecordedRequest) -> dict[str, Any]:
    facts = []
    for line in request.user_text().splitlines():
        event = re.match(r"\[(?P<id>[^\]]+)\] user: (?P<text>.*)$", line)
        said = event and (_CORRECTION.search(event["text"]) or _REMEMBER.search(event["text"]))
        if said:
            facts.append(
                {
                    "text": f"The user's {said['what'].strip()}.",
                    "topic": "personal_info",
                    "source_type": "explicit",
                    "kind": "correction" if said.re is _CORRECTION else "statement",
                    "confidence": 0.9,
                    "importance": 0.7,
                    "event_ids": [event["id"]],
                    "excerpt": said.group(0),
                }
            )
    return {"facts": facts}


def _consolidation(prompt: str) -> dict[str, Any]:
    operations = []
    for block in re.split(r"(?m)^(?=Fact \d+:)", prompt):
        fact = re.match(r"Fact (?P<n>\d+): (?P<text>.+?) \(kind: (?P<kind>\w+)\)", block)
        if fact is None:
            continue
        memory = re.search(r"- id (?P<id>[0-9a-f-]{36}):", block)
        if memory and fact["kind"] == "correction":
            operations.append(
                {
                    "fact": int(fact["n"]),
                    "operation": "UPDATE",
                    "memory_id": memory["id"],
                    "text": fact["text"],
                    "reason": "You corrected it.",
                }
            )
        else:
            operations.append(
                {"fact": int(fact["n"]), "operation": "CREATE", "reason": "Something new."}
            )
    return {"operations": operations}


if __name__ == "__main__":
    server = FakeOpenAI(responder=conversation_reply).start(port=int(sys.argv[1]))
    print(server.url, flush=True)
    server.stopping.wait()
