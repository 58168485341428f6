"""A local HTTP server that speaks Gemini's REST API, for testing the real google-genai client.

It listens on 127.0.0.1 (a random port) in a background thread and answers
the three calls ``GeminiModel`` makes, at the paths the client uses:

- ``POST /{version}/models/{model}:streamGenerateContent?alt=sse``: server-sent
  events, one ``data: {GenerateContentResponse}`` per chunk;
- ``POST /{version}/models/{model}:generateContent``: one JSON response;
- ``POST /{version}/models/{model}:batchEmbedContents``: ``{"embeddings": [...]}``

(the version is the client's choice: ``v1`` for google-genai 3.x), and the Files API's
resumable upload (``POST /upload/{version}/files``: a start, then the bytes), whose files
are kept in ``files`` by name.

Each test scripts the answers: every generation request takes the next
``Reply``, ``HttpError``, ``FailMidStream`` or ``Stall`` queued with ``push``;
one with nothing queued gets a 500 naming the problem, so a test that forgot
to script a reply fails loudly. Embedding requests have their own queue
(``push_embedding``, for errors and stalls) so they never take a generation
reply; with nothing queued they get deterministic vectors (``embedding_for``).
Every request is recorded in ``requests`` with its parsed JSON body.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.scripted_server import ScriptedServer

EMBEDDING_DIMENSIONS = 8

_PATH = re.compile(r"^/(?P<version>v1\w*)/models/(?P<model>[^/:]+):(?P<action>\w+)$")
_UPLOAD_PATH = re.compile(r"^/upload/v1\w*/files$")

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def text_chunk(text: str, *, thought: bool = False) -> dict[str, Any]:
    """A streamed response chunk carrying one text part (a thought summary when ``thought``)."""
    part: dict[str, Any] = {"text": text}
    if thought:
        part["thought"] = True
    return {"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]}


def function_call_chunk(
    name: str, args: dict[str, Any], *, thought_signature: str | None = None
) -> dict[str, Any]:
    """A response chunk in which the model calls the function ``name`` with ``args``.

    ``thought_signature`` (base64) rides on the part, as Gemini 3 models send it.
    """
    part: dict[str, Any] = {"functionCall": {"name": name, "args": args}}
    if thought_signature:
        part["thoughtSignature"] = thought_signature
    return {"candidates": [{"content": {"role": "model", "parts": [part]}, "index": 0}]}


def final_chunk(
    *, prompt_tokens: int = 10, output_tokens: int = 5, finish_reason: str = "STOP"
) -> dict[str, Any]:
    """The closing chunk of a stream: the finish reason and the token usage."""
    return {
        "candidates": [
            {"content": {"role": "model", "parts": []}, "finishReason": finish_reason, "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": prompt_tokens + output_tokens,
        },
    }


def error_body(status: int, message: str) -> dict[str, Any]:
    """Gemini's error JSON for an HTTP ``status``."""
    return {
        "error": {
            "code": status,
            "message": message,
            "status": _STATUS_NAMES.get(status, HTTPStatus(status).phrase.upper()),
        }
    }


def embedding_for(text: str) -> list[float]:
    """A deterministic unit-free vector for ``text``: equal texts get equal vectors."""
    digest = hashlib.sha256(text.encode()).digest()
    return [round(byte / 255, 4) for byte in digest[:EMBEDDING_DIMENSIONS]]


@dataclass
class Reply:
    """A successful answer: streamed chunk by chunk, or merged into one for generateContent."""

    chunks: list[dict[str, Any]]

    def merged(self) -> dict[str, Any]:
        """The chunks as one GenerateContentResponse: all parts, the last finish and usage."""
        parts: list[dict[str, Any]] = []
        merged: dict[str, Any] = {"candidates": [{"content": {"role": "model", "parts": parts}}]}
        for chunk in self.chunks:
            for candidate in chunk.get("candidates", []):
                parts.extend(candidate.get("content", {}).get("parts", []))
                if "finishReason" in candidate:
                    merged["candidates"][0]["finishReason"] = candidate["finishReason"]
            if "usageMetadata" in chunk:
                merged["usageMetadata"] = chunk["usageMetadata"]
        return merged


@dataclass
class HttpError:
    """An HTTP error status with Gemini's error JSON body, before any chunk."""

    status: int
    message: str = "scripted error"


@dataclass
class FailMidStream:
    """Stream ``chunks``, then break: close the connection, or send an SSE error event.

    With ``error_status`` None the connection is closed without ending the
    chunked body, as a dropped connection looks to the client; otherwise the
    stream carries ``data: {"error": ...}`` with that status, as Gemini does
    when it fails after it started answering.
    """

    chunks: list[dict[str, Any]]
    error_status: int | None = None


@dataclass
class Stall:
    """Send nothing for ``seconds`` (or until the server stops), then close: a hung model."""

    seconds: float


Script = Reply | HttpError | FailMidStream | Stall


@dataclass
class UploadedFile:
    """A file uploaded through the Files API."""

    name: str
    uri: str
    mime_type: str
    data: bytes = b""
    complete: bool = False


@dataclass
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    model: str
    action: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: dict[str, Any] = field(default_factory=dict)

    def system_text(self) -> str:
        """The text of the system instruction the client sent (empty when none)."""
        parts = self.body.get("systemInstruction", {}).get("parts", [])
        return "".join(part.get("text", "") for part in parts)

    def function_names(self) -> list[str]:
        """The names of the function declarations offered to the model."""
        return [
            declaration["name"]
            for tool in self.body.get("tools", [])
            for declaration in tool.get("functionDeclarations", [])
        ]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the recorded requests are what tests look at."""

    def do_POST(self) -> None:
        url = urlsplit(self.path)
        match = _PATH.match(url.path)
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if _UPLOAD_PATH.match(url.path):
            self._upload(parse_qs(url.query), raw)
            return
        request = RecordedRequest(
            method="POST",
            path=url.path,
            model=match["model"] if match else "",
            action=match["action"] if match else "",
            query=parse_qs(url.query),
            headers={key.lower(): value for key, value in self.headers.items()},
            body=json.loads(raw) if raw else {},
        )
        script = self.server.fake.record(request)
        if match is None:
            self._send_json(404, error_body(404, f"fake Gemini: unknown path {url.path}"))
        elif isinstance(script, HttpError):
            self._send_json(script.status, error_body(script.status, script.message))
        elif isinstance(script, Stall):
            self.server.fake.stopping.wait(script.seconds)
            self.close_connection = True
        elif request.action == "batchEmbedContents":
            self._embed(request)
        elif script is None:
            message = f"fake Gemini: no reply scripted for {request.action}"
            self._send_json(500, error_body(500, message))
        elif request.action == "streamGenerateContent":
            self._stream(script)
        elif request.action == "generateContent" and isinstance(script, Reply):
            self._send_json(200, script.merged())
        else:
            message = f"fake Gemini: {type(script).__name__} cannot answer {request.action}"
            self._send_json(500, error_body(500, message))

    def _upload(self, query: dict[str, list[str]], raw: bytes) -> None:
        """The resumable upload: a start names the file, then chunks carry its bytes."""
        fake = self.server.fake
        command = self.headers.get("X-Goog-Upload-Command", "")
        if command == "start":
            described = json.loads(raw or b"{}").get("file", {})
            uploaded = fake.file_new(
                mime_type=described.get("mimeType")
                or self.headers.get("X-Goog-Upload-Header-Content-Type", "")
            )
            self._send_json(
                200,
                {},
                headers={
                    "X-Goog-Upload-URL": f"{fake.url}{urlsplit(self.path).path}"
                    f"?upload_id={uploaded.name}",
                    "X-Goog-Upload-Status": "active",
                },
            )
            return
        uploaded = fake.files[query["upload_id"][0]]
        uploaded.data += raw
        if "finalize" not in command:
            self._send_json(200, {}, headers={"X-Goog-Upload-Status": "active"})
            return
        uploaded.complete = True
        self._send_json(
            200,
            {
                "file": {
                    "name": uploaded.name,
                    "uri": uploaded.uri,
                    "mimeType": uploaded.mime_type,
                    "sizeBytes": str(len(uploaded.data)),
                    "state": "ACTIVE",
                    "expirationTime": "2099-01-01T00:00:00Z",
                }
            },
            headers={"X-Goog-Upload-Status": "final"},
        )

    def _send_json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _embed(self, request: RecordedRequest) -> None:
        texts = [
            "".join(part.get("text", "") for part in item["content"].get("parts", []))
            for item in request.body.get("requests", [])
        ]
        self._send_json(200, {"embeddings": [{"values": embedding_for(text)} for text in texts]})

    def _stream(self, script: Reply | FailMidStream) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for chunk in script.chunks:
            self._send_event(chunk)
        if isinstance(script, FailMidStream):
            if script.error_status is None:
                self.wfile.flush()
                self.close_connection = True
                return
            self._send_event(error_body(script.error_status, "scripted mid-stream error"))
        self.wfile.write(b"0\r\n\r\n")

    def _send_event(self, body: dict[str, Any]) -> None:
        data = f"data: {json.dumps(body)}\r\n\r\n".encode()
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class FakeGemini(ScriptedServer):
    """The scripted server; ``start`` it, ``push`` answers, read ``requests``, ``stop`` it."""

    handler = _Handler
    thread_name = "fake-gemini"

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, UploadedFile] = {}

    @property
    def url(self) -> str:
        """The base URL to give the client, e.g. ``http://127.0.0.1:54321``."""
        return self.origin

    def file_new(self, *, mime_type: str) -> UploadedFile:
        """A file the Files API is about to receive."""
        with self._lock:
            name = f"files/upload-{len(self.files) + 1}"
            uploaded = UploadedFile(name=name, uri=f"{self.url}/v1beta/{name}", mime_type=mime_type)
            self.files[name] = uploaded
            return uploaded

    def record(self, request: RecordedRequest) -> Script | None:
        """Store ``request`` and hand it the next answer of its queue (None when empty)."""
        return self.take(request, embedding=request.action == "batchEmbedContents")
