"""The model interface every model use goes through (the chat, memory extraction and
consolidation, compaction summaries, the answer judge, embeddings), whatever provider is behind
it: Gemini (``core.gemini``), any OpenAI-compatible server (``core.openai_compatible``), or the
offline model the agents fall back to."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from google.genai import types

logger = logging.getLogger(__name__)

OFFLINE_PROVIDER = "offline"
# Provider name -> how the console and the chat page name it.
PROVIDERS = {
    "gemini": "Gemini",
    "openai": "OpenAI-compatible server",
    OFFLINE_PROVIDER: "Offline model",
}


def gemini_configured() -> bool:
    """Whether Gemini is reachable by configuration (an API key or Vertex AI)."""
    return bool(settings.GEMINI_API_KEY or settings.GOOGLE_GENAI_USE_VERTEXAI)


def provider_name(provider: str | None = None) -> str:
    """``provider``, or ``LLM_PROVIDER`` when it is empty; ``ImproperlyConfigured`` when it
    names no provider, so a typo fails loudly rather than answering offline."""
    name = (provider or settings.LLM_PROVIDER or "gemini").lower()
    if name not in PROVIDERS:
        raise ImproperlyConfigured(
            f"Unknown model provider {name!r}: expected one of {', '.join(PROVIDERS)}."
        )
    return name


def provider_configured(provider: str | None = None) -> bool:
    """Whether ``provider`` (default ``LLM_PROVIDER``) is reachable by configuration: Gemini
    with a key or Vertex AI, an OpenAI-compatible server with ``OPENAI_BASE_URL`` or
    ``OPENAI_API_KEY``. Without it the agents answer with the offline model and memory
    generation uses its offline rules."""
    name = provider_name(provider)
    if name == "gemini":
        return gemini_configured()
    if name == "openai":
        return bool(settings.OPENAI_BASE_URL or settings.OPENAI_API_KEY)
    return False


@dataclass(frozen=True)
class MemorySnippet:
    """A remembered fact as the prompt shows it (filled by the memory app)."""

    id: str
    text: str
    confidence: float = 1.0
    score: float = 0.0
    # The file the memory keeps ("remember this logo"): its ``artifact://`` address and type,
    # read into the request when the memory is recalled.
    image_uri: str = ""
    image_mime_type: str = ""
    # What a kept text file or PDF says, placed with the memory inside the prompt's data block
    # (never as a message of the user's, which a model would read as said to it now).
    file_text: str = ""


@dataclass(frozen=True)
class PastConversationSnippet:
    """A turn the user said in a past chat, as the prompt shows it, with its provenance: the
    chat (id and title), the event, and the day it was said, and the question it answers ("" when
    none) (filled by the memory app)."""

    session_id: str
    event_id: str
    title: str
    date: str
    excerpt: str
    score: float = 0.0
    asked: str = ""


# The line before an attached file's bytes in a model request, naming it for the model.
ATTACHMENT_LABEL_PREFIX = "[Attached file "


@dataclass(frozen=True)
class AttachmentInfo:
    """A file attached to the message the model answers, as the offline model names it."""

    filename: str
    mime_type: str
    size: int


@dataclass
class LlmRequest:
    """Everything one model call gets.

    ``state`` and ``memories`` are what the system instruction was built from;
    a real model reads them through the instruction, the offline model reads
    them directly to stay grounded without parsing its own prompt. ``purpose``
    is "chat" for a turn and "summarize" for a compaction.
    """

    model: str
    system_instruction: str
    contents: list[types.Content]
    tools: list[types.FunctionDeclaration] = field(default_factory=list)
    state: Mapping[str, Any] = field(default_factory=dict)
    memories: list[MemorySnippet] = field(default_factory=list)
    past_conversations: list[PastConversationSnippet] = field(default_factory=list)
    purpose: str = "chat"
    not_saved_reason: str = ""  # why nothing of this chat is kept ("" when it is)
    # Files attached to the newest user message; their bytes are parts of ``contents``.
    attachments: list[AttachmentInfo] = field(default_factory=list)


@dataclass
class LlmChunk:
    """One streamed piece of a model response: text, function calls, or the final usage.

    ``function_call_parts`` are the model's own parts holding the calls, when it
    has any: they carry what the model needs back on the next step (Gemini's
    ``thought_signature``), so the runner stores and resends them as they came.
    """

    text: str = ""
    function_calls: list[types.FunctionCall] = field(default_factory=list)
    function_call_parts: list[types.Part] = field(default_factory=list)
    usage_metadata: types.GenerateContentResponseUsageMetadata | None = None
    finish_reason: str | None = None


class ModelError(Exception):
    """A model call failed; ``transient`` errors (429, 5xx, timeouts) are worth retrying."""

    def __init__(self, message: str, *, code: str = "model_error", transient: bool = False):
        super().__init__(message)
        self.code = code
        self.transient = transient


def structured_answer(text: str, *, provider: str, cut: bool = False) -> dict[str, Any]:
    """``text`` read as the JSON object a structured call asked for, tolerantly, as small
    models answer: the object alone, in a fenced block, or within prose or before trailing
    text (the first object that parses); ``ModelError`` ``model_invalid_output`` otherwise.

    ``cut``: the answer stopped at its ``max_tokens`` (finish reason ``length``), as a small
    model's does that goes on listing facts until its budget ends: the object is read as far
    as its last complete item of a list (:func:`json_cut_closed`), so that what was answered
    in full is kept rather than the whole answer lost."""
    stripped = text.strip()
    try:
        answer = json.loads(stripped)
    except json.JSONDecodeError as error:
        closed = json_cut_closed(stripped) if cut else None
        if closed is not None:
            logger.warning(
                "%s's structured answer was cut at its token limit: kept its complete items",
                provider,
            )
            answer = json.loads(closed)
        else:
            answer = _first_json_object(stripped)
        if answer is None:
            raise ModelError(
                f"{provider}'s structured answer is not JSON: {error}",
                code="model_invalid_output",
            ) from error
    if not isinstance(answer, dict):
        raise ModelError(
            f"{provider}'s structured answer is not a JSON object: {answer!r:.200}",
            code="model_invalid_output",
        )
    return answer


def json_cut_closed(text: str) -> str | None:
    """``text``, a JSON object cut off mid-way, up to the end of its last complete item of a
    list (an object, a list or a string), with the lists and objects still open closed after
    it: ``{"facts": [{...}, {"te``
    becomes ``{"facts": [{...}]}``. None when no item was complete, or the result does not
    parse. Only whole items are kept: an object cut inside would lack fields it must have."""
    start = text.find("{")
    if start == -1:
        return None
    open_containers: list[str] = []
    in_string = escaped = False
    last_item: tuple[int, list[str]] | None = None
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                if _whole_when_closed(open_containers):
                    last_item = (index + 1, list(open_containers))
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            open_containers.append(char)
        elif char in "}]":
            if not open_containers:
                return None
            open_containers.pop()
            if not open_containers:
                return None  # the object was whole: not a cut answer
            if _whole_when_closed(open_containers):
                last_item = (index + 1, list(open_containers))
    if last_item is None:
        return None
    end, still_open = last_item
    closers = "".join("]" if opener == "[" else "}" for opener in reversed(still_open))
    closed = text[start:end] + closers
    try:
        json.loads(closed)
    except json.JSONDecodeError:
        return None
    return closed


def _whole_when_closed(open_containers: list[str]) -> bool:
    """Whether a value just ended in the innermost of ``open_containers`` is an item of a
    list, and closing them all there leaves no object that is an item of a list half
    written."""
    if open_containers[-1] != "[":
        return False
    return not any(
        inner == "{" and outer == "[" for outer, inner in itertools.pairwise(open_containers)
    )


def _first_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object within ``text`` (None when there is none)."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            answer, _end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        if isinstance(answer, dict):
            return answer
        start = text.find("{", start + 1)
    return None


class Llm(Protocol):
    """A chat model. ``offline`` is shown to the user (the UI labels the offline model)."""

    name: str
    offline: bool

    def generate_stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]: ...


class ProviderModel(Llm, Protocol):
    """A provider's model: chat, and the structured answers and embeddings memory needs.

    ``generate_json`` answers a JSON object matching a JSON Schema (``ModelError`` with code
    ``model_invalid_output`` when the answer is not one); ``embed`` gives one vector per
    text; ``aclose`` closes the client's connections.
    """

    async def generate_json(
        self,
        *,
        system_instruction: str,
        contents: str | list[types.Content],
        response_schema: dict[str, Any],
    ) -> dict[str, Any]: ...

    async def embed(self, texts: list[str], *, model: str) -> list[list[float]]: ...

    async def aclose(self) -> None: ...


def provider_model(*, model: str, provider: str | None = None) -> ProviderModel:
    """``model`` of ``provider`` (default ``LLM_PROVIDER``) through that provider's client.

    The caller checks :func:`provider_configured` first; the offline provider has no client
    here (the agents' runtime has the offline model), so asking for it is a programming error.
    """
    name = provider_name(provider)
    if name == "gemini":
        from core.gemini import GeminiModel

        return GeminiModel(model)
    if name == "openai":
        from core.openai_compatible import OpenAICompatibleModel

        return OpenAICompatibleModel(model)
    raise ValueError(f"the {name} provider has no client")


async def provider_text(*, model: Llm, prompt: str, system_instruction: str = "") -> str:
    """The text ``model`` answers to one short ``prompt`` (no retries): what a connection
    test shows. ``ModelError`` when the call fails."""
    request = LlmRequest(
        model=model.name,
        system_instruction=system_instruction,
        contents=[types.Content(role="user", parts=[types.Part(text=prompt)])],
    )
    return "".join([chunk.text async for chunk in model.generate_stream(request)]).strip()


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 8.0

    def delay(self, attempt: int) -> float:
        """Exponential backoff with full jitter before retry number ``attempt`` (1-based)."""
        return random.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))


async def generate_with_retries(
    model: Llm, request: LlmRequest, policy: RetryPolicy
) -> AsyncIterator[LlmChunk]:
    """Stream the model's response, retrying transient errors before the first chunk.

    Once a chunk has been handed on, a retry would repeat text the user has
    already seen, so a later failure is raised to the caller as it is.
    """
    attempt = 0
    while True:
        attempt += 1
        started = False
        try:
            async for chunk in model.generate_stream(request):
                started = True
                yield chunk
            return
        except ModelError as error:
            if started or not error.transient or attempt >= policy.attempts:
                raise
        await asyncio.sleep(policy.delay(attempt))
