"""Gemini through the google-genai client: streaming chat, structured output, embeddings.

Access is configured by settings: ``GEMINI_API_KEY`` for the Gemini API, or
``GOOGLE_GENAI_USE_VERTEXAI`` with ``GOOGLE_CLOUD_PROJECT`` and
``GOOGLE_CLOUD_LOCATION`` for Vertex AI; ``GEMINI_BASE_URL`` points the client
elsewhere (tests use a local server). Every failure surfaces as a
``ModelError``: rate limits, server errors, timeouts and broken connections
are transient, anything else the service refused is not. The client's own
retries are switched off so that ``RetryPolicy`` alone decides.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx2
from django.conf import settings
from google import genai
from google.genai import errors, types

from core.llm import LlmChunk, LlmRequest, ModelError, structured_answer
from core.model_usage import model_call_report
from core.tls import tls_context

DEFAULT_EMBEDDING_MODEL = "gemini-embedding-001"

_BLOCKING_FINISH_REASONS = {
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
}


def _client() -> genai.Client:
    """A client for the configured backend, with our timeout and without its own retries, and
    the process's TLS context (:func:`core.tls.tls_context`) for the Gemini API.

    ``HttpRetryOptions(attempts=1)`` makes the single attempt explicit; it also
    turns off the implicit reconnect-and-retry the client does on connection
    errors when it runs on aiohttp.
    """
    options: dict[str, Any] = {
        "base_url": settings.GEMINI_BASE_URL or None,
        "timeout": round(settings.LLM_TIMEOUT_SECONDS * 1000),
        "retry_options": types.HttpRetryOptions(attempts=1),
    }
    if settings.GOOGLE_GENAI_USE_VERTEXAI:
        # The client's own TLS context: it may carry a client certificate (mutual TLS).
        return genai.Client(
            vertexai=True,
            project=settings.GOOGLE_CLOUD_PROJECT or None,
            location=settings.GOOGLE_CLOUD_LOCATION or None,
            http_options=types.HttpOptions(**options),
        )
    http_options = types.HttpOptions(
        **options,
        client_args={"verify": tls_context()},
        # "ssl" is what the client's websockets verify with.
        async_client_args={"verify": tls_context(), "ssl": tls_context()},
    )
    return genai.Client(vertexai=False, api_key=settings.GEMINI_API_KEY, http_options=http_options)


def model_error_from(error: Exception) -> ModelError:
    """The ``ModelError`` for a failure of the client, transient when a retry may succeed."""
    if isinstance(error, errors.APIError):
        detail = f"{error.code} {error.status or ''}".strip()
        message = error.message or str(error)
        if error.code == 429:
            return ModelError(
                f"Gemini is rate-limiting requests ({detail}): {message}",
                code="rate_limited",
                transient=True,
            )
        if error.code == 408:
            return ModelError(
                f"Gemini timed out ({detail}): {message}", code="timeout", transient=True
            )
        if isinstance(error, errors.ServerError):
            return ModelError(
                f"Gemini is unavailable ({detail}): {message}",
                code="model_unavailable",
                transient=True,
            )
        if isinstance(error, errors.ClientError):
            return ModelError(
                f"Gemini rejected the request ({detail}): {message}",
                code="model_rejected",
                transient=False,
            )
        return ModelError(f"Gemini failed ({detail}): {message}", code="model_error")
    if isinstance(error, httpx2.TimeoutException):
        return ModelError(
            f"Gemini did not answer within {settings.LLM_TIMEOUT_SECONDS:g} s.",
            code="timeout",
            transient=True,
        )
    if isinstance(error, httpx2.TransportError):
        return ModelError(
            f"The connection to Gemini failed: {type(error).__name__}: {error}",
            code="model_unavailable",
            transient=True,
        )
    return ModelError(f"Gemini returned an unusable response: {error}", code="model_error")


_CLIENT_ERRORS = (errors.APIError, errors.UnknownApiResponseError, httpx2.TransportError)


def _finish_reason(candidate: types.Candidate) -> str | None:
    reason = candidate.finish_reason
    if reason is None:
        return None
    return reason.value if isinstance(reason, types.FinishReason) else str(reason)


class GeminiModel:
    """A Gemini model behind the ``Llm`` protocol; one client per instance, reused."""

    offline = False

    # Files uploaded through the Files API that this instance remembers, by content digest.
    UPLOADS_KEPT = 64

    def __init__(self, model: str) -> None:
        self.name = model
        self.client = _client()
        self._uploads: OrderedDict[str, tuple[str, float]] = OrderedDict()

    async def generate_stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]:
        """Stream text and function calls as they arrive; usage and finish reason come last.

        Thought parts are not shown to the user, so they are skipped. A
        response with neither text nor a function call raises ``ModelError``:
        ``model_blocked`` (not transient) when a safety filter stopped it,
        ``model_empty_response`` (transient) otherwise. Errors after the first
        chunk are raised like any other; the caller decides not to retry them.
        """
        config = types.GenerateContentConfig(
            system_instruction=request.system_instruction or None,
            tools=[types.Tool(function_declarations=request.tools)] if request.tools else None,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        usage = None
        finish_reason = None
        block_reason = None
        produced = False
        try:
            contents = await self._contents_sized(request.contents)
            stream = await self.client.aio.models.generate_content_stream(
                model=self.name, contents=contents, config=config
            )
            async with aclosing(stream):
                async for response in stream:
                    usage = response.usage_metadata or usage
                    if response.prompt_feedback and response.prompt_feedback.block_reason:
                        block_reason = str(response.prompt_feedback.block_reason.value)
                    for candidate in (response.candidates or [])[:1]:
                        finish_reason = _finish_reason(candidate) or finish_reason
                        chunk = _chunk_from(candidate)
                        if chunk.text or chunk.function_calls:
                            produced = True
                            yield chunk
        except _CLIENT_ERRORS as error:
            raise model_error_from(error) from error
        if not produced:
            if block_reason or finish_reason in _BLOCKING_FINISH_REASONS:
                raise ModelError(
                    f"Gemini declined to answer ({block_reason or finish_reason}).",
                    code="model_blocked",
                )
            raise ModelError(
                f"Gemini returned an empty response (finish reason {finish_reason}).",
                code="model_empty_response",
                transient=True,
            )
        model_call_report(model=self.name, usage=usage)
        yield LlmChunk(usage_metadata=usage, finish_reason=finish_reason)

    async def _contents_sized(self, contents: list[types.Content]) -> list[types.Content]:
        """The contents with each inline file over ``ATTACHMENT_INLINE_MAX_BYTES`` sent
        through the Files API instead (referenced by its URI): a request carries at most
        about 20 MB inline, and a file uploaded once is reused while Gemini keeps it."""
        limit = settings.ATTACHMENT_INLINE_MAX_BYTES
        sized = []
        for content in contents:
            parts = list(content.parts or ())
            large = [
                index
                for index, part in enumerate(parts)
                if part.inline_data is not None and len(part.inline_data.data or b"") > limit
            ]
            for index in large:
                parts[index] = await self._uploaded(parts[index].inline_data)
            sized.append(types.Content(role=content.role, parts=parts) if large else content)
        return sized

    async def _uploaded(self, blob: types.Blob) -> types.Part:
        """``blob`` as a Files API reference, uploading it unless a live upload is known."""
        digest = hashlib.sha256(blob.data).hexdigest()
        known = self._uploads.get(digest)
        if known is None or known[1] <= time.time():
            uploaded = await self.client.aio.files.upload(
                file=io.BytesIO(blob.data),
                config=types.UploadFileConfig(mime_type=blob.mime_type),
            )
            # Gemini keeps a file 48 hours; it is forgotten here an hour before that.
            expires = (
                uploaded.expiration_time.timestamp() - 3600
                if uploaded.expiration_time
                else time.time() + 3600
            )
            known = (uploaded.uri, expires)
            self._uploads[digest] = known
            while len(self._uploads) > self.UPLOADS_KEPT:
                self._uploads.popitem(last=False)
        return types.Part(file_data=types.FileData(file_uri=known[0], mime_type=blob.mime_type))

    async def generate_json(
        self,
        *,
        system_instruction: str,
        contents: types.ContentListUnion,
        response_schema: dict[str, Any],
    ) -> dict[str, Any]:
        """One non-streamed call whose answer is a JSON object matching ``response_schema``.

        ``response_schema`` is a JSON Schema of an object; the parsed object is
        returned. Files in a list of contents go inline or through the Files API, as in
        ``generate_stream``. An answer that is not a JSON object raises a non-transient
        ``ModelError`` with code ``model_invalid_output``.
        """
        config = types.GenerateContentConfig(
            system_instruction=system_instruction,
            response_mime_type="application/json",
            response_json_schema=response_schema,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        )
        try:
            if isinstance(contents, list) and all(isinstance(c, types.Content) for c in contents):
                contents = await self._contents_sized(contents)
            response = await self.client.aio.models.generate_content(
                model=self.name, contents=contents, config=config
            )
        except _CLIENT_ERRORS as error:
            raise model_error_from(error) from error
        model_call_report(model=self.name, usage=response.usage_metadata)
        return structured_answer(response.text or "", provider="Gemini")

    async def embed(
        self, texts: list[str], *, model: str = DEFAULT_EMBEDDING_MODEL
    ) -> list[list[float]]:
        """One embedding vector per text, in order, from one batch request."""
        if not texts:
            return []
        try:
            response = await self.client.aio.models.embed_content(model=model, contents=texts)
        except _CLIENT_ERRORS as error:
            raise model_error_from(error) from error
        return [list(embedding.values or []) for embedding in response.embeddings or ()]

    async def aclose(self) -> None:
        """Close the client's connections; the model cannot be used afterwards.

        The client keeps a connection pool per event loop; a caller that runs
        the model in a short-lived loop closes it here, before the loop ends,
        rather than leaving open sockets to the garbage collector.
        """
        await self.client.aio.aclose()


def _chunk_from(candidate: types.Candidate) -> LlmChunk:
    """The visible text and the function calls of one streamed candidate (thoughts skipped)."""
    text_parts = []
    call_parts = []
    parts = candidate.content.parts if candidate.content else None
    for part in parts or ():
        if part.thought:
            continue
        if part.text:
            text_parts.append(part.text)
        if part.function_call:
            call_parts.append(part)
    return LlmChunk(
        text="".join(text_parts),
        function_calls=[part.function_call for part in call_parts],
        function_call_parts=call_parts,
    )
