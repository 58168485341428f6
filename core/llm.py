"""The model interface the agents' runner and memory extraction talk to, whatever model is
behind it."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.conf import settings
from google.genai import types


def gemini_configured() -> bool:
    """Whether Gemini is reachable by configuration (an API key or Vertex AI); without it the
    agents answer with the offline model and memory extraction uses its offline rules."""
    return bool(settings.GEMINI_API_KEY or settings.GOOGLE_GENAI_USE_VERTEXAI)


@dataclass(frozen=True)
class MemorySnippet:
    """A remembered fact as the prompt shows it (filled by the memory app)."""

    id: str
    text: str
    confidence: float = 1.0
    score: float = 0.0


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


class Llm(Protocol):
    """A chat model. ``offline`` is shown to the user (the UI labels the offline model)."""

    name: str
    offline: bool

    def generate_stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]: ...


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
