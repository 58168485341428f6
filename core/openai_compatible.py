"""Any OpenAI-compatible server through the official ``openai`` client: Ollama, vLLM,
LM Studio, llama.cpp's server, LocalAI, or a hosted provider.

Access is configured by settings: ``OPENAI_BASE_URL`` (e.g. ``http://localhost:11434/v1`` for
Ollama) and ``OPENAI_API_KEY`` (optional: local servers take any). The conversation, in the
product's ``google.genai`` types, becomes Chat Completions messages: text as one string, content
parts only for a message with an image (as a data URL, for a model that takes it), text files as
text, function calls and their responses as ``tool_calls`` and ``tool`` messages. Every failure
surfaces as a ``ModelError``, transient for 429, 5xx, timeouts and broken connections; the
client's own retries are off, so that ``RetryPolicy`` and the job layer alone decide.

Structured answers take the first of several roads the server honours (``STRUCTURED_ROADS``:
``json_schema``, llama.cpp's ``json_object`` with a schema, a forced tool call, JSON asked for in
words), remembered per server and model.

Images go to the model as they are; a server that refuses a request carrying images (a model
without vision: Ollama's "does not support image input", LM Studio's "Model does not support
images") is asked again with each image replaced by a line saying it was left out. Without
that, one picture in a chat's history would make every later turn of that chat fail, and the
memory job reading it would fail for good.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai
from django.conf import settings
from google.genai import types

from core.chat_completions import (
    STRUCTURED_ROADS,
    PendingCall,
    ServerTraits,
    chat_messages,
    has_images,
    images_left_out,
    server_traits,
    structured_request,
    structured_text,
    tool_spec,
)
from core.llm import LlmChunk, LlmRequest, ModelError, structured_answer
from core.model_usage import model_call_report, usage_unreported
from core.prompt_fit import context_exceeded_error, messages_fit
from core.request_slots import request_slot
from core.tls import tls_context

PROVIDER = "The model server"

logger = logging.getLogger(__name__)


def _client(*, base_url: str | None = None, api_key: str | None = None) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=(settings.OPENAI_BASE_URL if base_url is None else base_url) or None,
        # Local servers need no key, but the client refuses to start without one.
        api_key=(settings.OPENAI_API_KEY if api_key is None else api_key) or "none",
        timeout=settings.LLM_TIMEOUT_SECONDS,
        max_retries=0,
        http_client=openai.DefaultAsyncHttpxClient(verify=tls_context()),
    )


def model_error_from(error: Exception, *, where: str = "") -> ModelError:
    """The ``ModelError`` for a failure of the client, transient when a retry may succeed;
    ``where``: the server's URL (default ``OPENAI_BASE_URL``)."""
    where = where or settings.OPENAI_BASE_URL or "the OpenAI API"
    if isinstance(error, openai.APITimeoutError | httpx2.TimeoutException):
        return ModelError(
            f"The model server at {where} did not answer within "
            f"{settings.LLM_TIMEOUT_SECONDS:g} s.",
            code="timeout",
            transient=True,
        )
    if isinstance(error, openai.APIConnectionError | httpx2.TransportError):
        return ModelError(
            f"The connection to the model server at {where} failed: {error}",
            code="model_unavailable",
            transient=True,
        )
    if isinstance(error, openai.APIStatusError):
        message = f"{error.status_code}: {error.message}"
        if error.status_code == 429:
            return ModelError(
                f"The model server is rate-limiting requests ({message})",
                code="rate_limited",
                transient=True,
            )
        if error.status_code == 408:
            return ModelError(
                f"The model server timed out ({message})", code="timeout", transient=True
            )
        if error.status_code >= 500:
            return ModelError(
                f"The model server is unavailable ({message})",
                code="model_unavailable",
                transient=True,
            )
        too_long = context_exceeded_error(error.message)
        if too_long is not None:
            return too_long
        return ModelError(
            f"The model server rejected the request ({message})", code="model_rejected"
        )
    return ModelError(f"The model server failed: {error}", code="model_error")


_CLIENT_ERRORS = (openai.OpenAIError, httpx2.TransportError)


# What a 5xx body says when the server failed on the request itself rather than on its own
# state: llama-cpp-python answers an invalid request with a 500 carrying the exception's text
# (pydantic's "validation error", a template's TypeError, a ValueError of its chat format).
_INVALID_REQUEST_5XX = re.compile(
    r"validation error|input should be|not supported|unsupported|can only concatenate|"
    r"invalid|not found in tools|expected|must be",
    re.IGNORECASE,
)


def _refused(error: openai.APIStatusError) -> bool:
    """Whether the server refused the request itself, which asking again unchanged would not
    mend: a 4xx other than a timeout or a rate limit, or a 5xx whose body says the request was
    invalid (llama-cpp-python's way). An outage (a 5xx saying nothing of the request, a
    broken connection) is not a refusal."""
    if error.status_code in (408, 429):
        return False
    if 400 <= error.status_code < 500:
        return True
    return error.status_code >= 500 and bool(_INVALID_REQUEST_5XX.search(error.message or ""))


def _refused_tools(error: openai.APIStatusError) -> bool:
    """Whether the refusal is of the tools offered (a model or server that calls none)."""
    return _refused(error) and "tool" in (error.message or "").lower()


def _refused_streamed_tools(error: openai.APIStatusError) -> bool:
    """Whether the refusal is of streaming a tool decision, not of tools (llama-cpp-python's
    "Automatic streaming tool choice is not supported"): asked without a stream, the same
    request is answered."""
    message = (error.message or "").lower()
    return _refused_tools(error) and "stream" in message


def _pooled(embedding: Any, *, model: str) -> list[float]:
    """One text's embedding as one vector: a server without pooling (llama.cpp's
    ``--pooling none``) answers a vector per token, which would not compare with anything, so
    they are averaged, as ``--pooling mean`` would; ``ModelError`` for what is neither."""
    if embedding and all(isinstance(row, list) for row in embedding):
        widths = {len(row) for row in embedding}
        if len(widths) == 1:
            logger.warning("%s answered a vector per token: mean-pooled", model)
            return [sum(column) / len(embedding) for column in zip(*embedding, strict=True)]
    if embedding and all(isinstance(value, int | float) for value in embedding):
        return [float(value) for value in embedding]
    raise ModelError(
        f"{PROVIDER}'s embedding model {model} answered no vector: {embedding!s:.100}",
        code="model_invalid_output",
    )


def _usage(usage: Any) -> types.GenerateContentResponseUsageMetadata | None:
    if usage is None:
        return None
    return types.GenerateContentResponseUsageMetadata(
        prompt_token_count=usage.prompt_tokens,
        candidates_token_count=usage.completion_tokens,
        total_token_count=usage.total_tokens,
    )


def _chunks_of_completion(response: Any) -> list[LlmChunk]:
    """A non-streamed completion as the chunks a stream of it would have given."""
    choice = response.choices[0] if response.choices else None
    chunks: list[LlmChunk] = []
    if choice is not None and choice.message.content:
        chunks.append(LlmChunk(text=choice.message.content))
    calls = []
    for index, call in enumerate((choice.message.tool_calls if choice else None) or ()):
        pending = PendingCall(
            id=call.id or f"call-{index}",
            name=call.function.name,
            arguments=[call.function.arguments],
        )
        calls.append(pending.function_call())
    if calls:
        parts = [types.Part(function_call=call) for call in calls]
        chunks.append(LlmChunk(function_calls=calls, function_call_parts=parts))
    return chunks


class OpenAICompatibleModel:
    """A model of an OpenAI-compatible server behind the ``ProviderModel`` protocol; one
    client per instance, reused."""

    offline = False

    def __init__(self, model: str) -> None:
        self.name = model
        self.client = _client()
        self.embedding_client: openai.AsyncOpenAI | None = None
        # Whether the embedding server's last answer came as a vector per token (pooled here):
        # what the console's "Test connection" warns of.
        self.embeddings_per_token = False

    @property
    def traits(self) -> ServerTraits:
        return server_traits(self.name)

    async def _context_tokens(self) -> int:
        """The model's context window: as the server's model list says it (vLLM's
        ``max_model_len``, LM Studio's ``max_context_length``, llama.cpp server's
        ``meta.n_ctx_train``...), asked once, else ``OPENAI_CONTEXT_TOKENS``."""
        traits = self.traits
        if not traits.context_tokens:
            traits.context_tokens = await self._listed_context_tokens() or -1
        if traits.context_tokens > 0:
            return traits.context_tokens
        return settings.OPENAI_CONTEXT_TOKENS

    async def _listed_context_tokens(self) -> int | None:
        try:
            listed = await self.client.models.list()
        except _CLIENT_ERRORS as error:
            logger.info("%s: no context size from the model list (%s)", self.name, error)
            return None
        for entry in listed.data:
            if entry.id != self.name:
                continue
            extra = {**(entry.model_extra or {})}
            extra.update(extra.get("meta") or {})
            for key in ("max_model_len", "max_context_length", "context_length", "n_ctx"):
                if isinstance(extra.get(key), int) and extra[key] > 0:
                    return extra[key]
        return None

    async def _fitted(
        self, messages: list[dict[str, Any]], *, max_tokens: int
    ) -> tuple[list[dict[str, Any]], int]:
        """``messages`` trimmed to the model's context with room for an answer of at most
        ``max_tokens`` (:func:`core.prompt_fit.messages_fit`), and the ``max_tokens`` to send."""
        return messages_fit(
            messages, context_tokens=await self._context_tokens(), max_tokens=max_tokens
        )

    @property
    def calls_tools(self) -> bool:
        """False once the server refused this model's tools: the chat says memory tools are
        off."""
        return self.traits.calls_tools

    def tool_traits(self) -> dict[str, bool]:
        """What is known of the server's tools for this model: whether it calls them and
        streams its decision (kept per app, see :meth:`tool_traits_remember`)."""
        traits = self.traits
        return {
            "calls_tools": traits.calls_tools,
            "streams_tool_choice": traits.streams_tool_choice,
        }

    def tool_traits_remember(self, remembered: dict[str, bool]) -> None:
        """Take what an earlier process found of the server's tools (the app's record, from
        "Test connection" or a refusal), so that this one neither offers refused tools nor
        streams a tool decision the server cannot stream, even on its first turn."""
        traits = self.traits
        if remembered.get("calls_tools") is False:
            traits.calls_tools = False
        if remembered.get("streams_tool_choice") is False:
            traits.streams_tool_choice = False

    async def _create(self, *, messages: list[dict[str, Any]], **options: Any) -> Any:
        """One Chat Completions call of this model; when the server refuses a request that
        carries images, the same call once more with the images left out
        (:func:`images_left_out`), the model being one without vision."""
        try:
            return await self.client.chat.completions.create(
                model=self.name, messages=messages, **options
            )
        except openai.APIStatusError as error:
            if not (_refused(error) and has_images(messages)):
                raise
            logger.info(
                "%s refused a request with images (%s): sent again without them",
                self.name,
                error.status_code,
            )
        return await self.client.chat.completions.create(
            model=self.name, messages=images_left_out(messages), **options
        )

    def _slot(self, *, chat: bool, server: str | None = None):
        """One of the server's request slots (``OPENAI_MAX_CONCURRENT_REQUESTS``), the chat's
        first (:func:`core.request_slots.request_slot`)."""
        return request_slot(
            server=settings.OPENAI_BASE_URL if server is None else server,
            limit=settings.OPENAI_MAX_CONCURRENT_REQUESTS,
            chat=chat,
        )

    async def generate_stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]:
        """The model's answer to ``request`` (:meth:`_stream`), once one of the server's request
        slots is free: a chat turn's before compaction's."""
        async with self._slot(chat=request.purpose == "chat"):
            async for chunk in self._stream(request):
                yield chunk

    async def _stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]:
        """Stream text as it arrives; tool calls (assembled from their fragments), usage and
        the finish reason come last. The usage is the server's (``include_usage``), or empty
        when it sent none (llama-cpp-python's streams): not reported, rather than zero.

        Reasoning deltas are not shown to the user, so they are skipped. A response with
        neither text nor a tool call raises ``ModelError``: ``model_blocked`` (not
        transient) when a content filter stopped it, ``model_empty_response`` (transient)
        otherwise. Errors after the first chunk are raised like any other; the caller
        decides not to retry them.
        """
        extra: dict[str, Any] = {}
        traits = self.traits
        if request.tools and traits.calls_tools:
            extra["tools"] = [tool_spec(declaration) for declaration in request.tools]
            extra["tool_choice"] = "auto"
        limit = (
            settings.LLM_MAX_SUMMARY_TOKENS
            if request.purpose == "summarize"
            else settings.LLM_MAX_REPLY_TOKENS
        )
        messages, extra["max_tokens"] = await self._fitted(
            chat_messages(request.system_instruction, request.contents), max_tokens=limit
        )
        offers_tools = "tools" in extra
        if offers_tools and not traits.streams_tool_choice:
            async for chunk in self._generate_unstreamed(messages=messages, **extra):
                yield chunk
            return
        pending: dict[int, PendingCall] = {}
        usage = None
        finish_reason = None
        produced = False
        opened = False
        try:
            try:
                stream = await self._create(
                    messages=messages,
                    stream=True,
                    stream_options={"include_usage": True},
                    **extra,
                )
            except openai.APIStatusError as error:
                if offers_tools and _refused_streamed_tools(error):
                    logger.info(
                        "%s cannot stream a tool decision (%s): asked without a stream",
                        self.name,
                        error.message,
                    )
                    traits.streams_tool_choice = False
                    async for chunk in self._generate_unstreamed(messages=messages, **extra):
                        yield chunk
                    return
                if not (offers_tools and _refused_tools(error)):
                    raise
                logger.warning(
                    "%s refused tools (%s): memory tools are off for it", self.name, error.message
                )
                traits.calls_tools = False
                offers_tools = False
                extra = {"max_tokens": extra["max_tokens"]}
                stream = await self._create(
                    messages=messages,
                    stream=True,
                    stream_options={"include_usage": True},
                    **extra,
                )
            opened = True
            async with stream:
                async for chunk in stream:
                    usage = _usage(chunk.usage) or usage
                    for choice in chunk.choices[:1]:
                        finish_reason = choice.finish_reason or finish_reason
                        delta = choice.delta
                        for fragment in delta.tool_calls or ():
                            call = pending.setdefault(fragment.index, PendingCall())
                            call.id = fragment.id or call.id
                            if fragment.function is not None:
                                call.name = fragment.function.name or call.name
                                call.arguments.append(fragment.function.arguments or "")
                        if delta.content:
                            produced = True
                            yield LlmChunk(text=delta.content)
        except _CLIENT_ERRORS as error:
            if not opened or produced or pending:
                raise model_error_from(error) from error
            logger.info("%s broke off its stream before a word: %s", self.name, error)
        if not produced and not pending and finish_reason is None:
            # A stream that ended (or broke off) before its first word, without saying why: a
            # server that failed after its 200 (llama-cpp-python cannot stream a tool
            # decision, and finds a prompt over its context only then). Asked again without a
            # stream, it calls the tool, answers, or says what is wrong.
            logger.info("%s streamed nothing: asked again without a stream", self.name)
            if offers_tools:
                # Offered tools, the stream gave nothing: the server cannot stream its tool
                # decision (llama-cpp-python decides, then fails the stream), so tool requests
                # to it go unstreamed from now on rather than paying for two decisions a step.
                traits.streams_tool_choice = False
            async for chunk in self._generate_unstreamed(
                messages=messages, after_broken_stream=True, **extra
            ):
                yield chunk
            return
        if (produced or pending) and finish_reason is None:
            # The stream ended without the server saying the answer was done: its process
            # died or the connection was cut. What came is kept by the caller, with this error.
            raise ModelError(
                f"The model server at {settings.OPENAI_BASE_URL or 'the OpenAI API'} stopped "
                "in the middle of the reply.",
                code="model_unavailable",
                transient=True,
            )
        calls = [pending[index].function_call() for index in sorted(pending)]
        if calls:
            produced = True
            parts = [types.Part(function_call=call) for call in calls]
            yield LlmChunk(function_calls=calls, function_call_parts=parts)
        if not produced:
            if finish_reason == "content_filter":
                raise ModelError(
                    "The model declined to answer (content filter).", code="model_blocked"
                )
            raise ModelError(
                f"The model returned an empty response (finish reason {finish_reason}).",
                code="model_empty_response",
                transient=True,
            )
        model_call_report(model=self.name, usage=usage)
        yield LlmChunk(usage_metadata=usage or usage_unreported(), finish_reason=finish_reason)

    async def _generate_unstreamed(
        self,
        *,
        messages: list[dict[str, Any]],
        after_broken_stream: bool = False,
        **options: Any,
    ) -> AsyncIterator[LlmChunk]:
        """The request of a turn asked without a stream, given as the chunks a stream would
        have given; an empty answer raises as a streamed one does. ``after_broken_stream``: a
        stream of the same request just broke off, and a server that cut it may also drop the
        kept-alive connection this request goes out on, so a failure to connect is tried once
        more on a new one."""
        try:
            try:
                response = await self._create(messages=messages, **options)
            except openai.APIConnectionError:
                if not after_broken_stream:
                    raise
                logger.info("%s dropped the connection after its stream: asked again", self.name)
                response = await self._create(messages=messages, **options)
        except _CLIENT_ERRORS as error:
            raise model_error_from(error) from error
        usage = _usage(response.usage)
        model_call_report(model=self.name, usage=usage)
        chunks = _chunks_of_completion(response)
        finish_reason = response.choices[0].finish_reason if response.choices else None
        if not chunks:
            raise ModelError(
                f"The model returned an empty response (finish reason {finish_reason}).",
                code="model_empty_response",
                transient=True,
            )
        for chunk in chunks:
            yield chunk
        yield LlmChunk(usage_metadata=usage or usage_unreported(), finish_reason=finish_reason)

    async def generate_json(
        self,
        *,
        system_instruction: str,
        contents: str | list[types.Content],
        response_schema: dict[str, Any],
    ) -> dict[str, Any]:
        """The structured answer (:meth:`_structured`), asked once one of the server's request
        slots is free and no chat request waits for one: this is background work."""
        async with self._slot(chat=False):
            return await self._structured(
                system_instruction=system_instruction,
                contents=contents,
                response_schema=response_schema,
            )

    async def _structured(
        self,
        *,
        system_instruction: str,
        contents: str | list[types.Content],
        response_schema: dict[str, Any],
    ) -> dict[str, Any]:
        """One non-streamed call whose answer is a JSON object matching ``response_schema``.

        Servers differ in how they are asked, so the roads of :data:`STRUCTURED_ROADS` are
        tried in order, from the one that last worked for this model: the next road is taken
        when the server refuses a road (:func:`_refused`) or answers something that is not a
        JSON object, never on an outage (raised as the transient error it is). ``ModelError``
        ``model_invalid_output`` when no road gives a JSON object.
        """
        messages, max_tokens = await self._fitted(
            chat_messages(system_instruction, contents),
            max_tokens=settings.LLM_MAX_STRUCTURED_TOKENS,
        )
        traits = self.traits
        roads = list(STRUCTURED_ROADS)
        if traits.structured_road in roads:
            roads = roads[roads.index(traits.structured_road) :]
        failure: ModelError | None = None
        for road in roads:
            try:
                response = await self._create(
                    **structured_request(road, messages, response_schema), max_tokens=max_tokens
                )
                model_call_report(model=self.name, usage=_usage(response.usage))
                answer = structured_answer(
                    structured_text(response),
                    provider=PROVIDER,
                    cut=bool(response.choices) and response.choices[0].finish_reason == "length",
                )
            except openai.APIStatusError as error:
                if not _refused(error) or context_exceeded_error(error.message):
                    raise model_error_from(error) from error
                failure = model_error_from(error)
                logger.info("%s refused structured output by %s: %s", self.name, road, error)
                continue
            except _CLIENT_ERRORS as error:
                raise model_error_from(error) from error
            except ModelError as error:
                failure = error
                logger.info("%s gave no JSON object by %s: %s", self.name, road, error)
                continue
            traits.structured_road = road
            return answer
        assert failure is not None
        raise ModelError(
            f"{PROVIDER} gave no JSON object by any road ({', '.join(roads)}): {failure}",
            code="model_invalid_output",
        )

    async def embed(self, texts: list[str], *, model: str) -> list[list[float]]:
        """One embedding vector per text, in order, from one ``/embeddings`` request to the
        embedding server (``MEMORY_OPENAI_EMBEDDING_BASE_URL``, else the chat's); a server
        that answers one vector per token (llama.cpp without pooling) has them mean-pooled."""
        if not texts:
            return []
        server = settings.MEMORY_OPENAI_EMBEDDING_BASE_URL or settings.OPENAI_BASE_URL
        try:
            async with self._slot(chat=True, server=server):
                response = await self._embedding_client().embeddings.create(
                    model=model, input=texts, encoding_format="float"
                )
        except _CLIENT_ERRORS as error:
            raise model_error_from(error, where=server) from error
        self.embeddings_per_token = any(
            item.embedding and isinstance(item.embedding[0], list) for item in response.data
        )
        return [
            _pooled(item.embedding, model=model)
            for item in sorted(response.data, key=lambda d: d.index)
        ]

    def _embedding_client(self) -> openai.AsyncOpenAI:
        """The client of the embedding server: its own when ``MEMORY_OPENAI_EMBEDDING_BASE_URL``
        names one (a second llama.cpp server with an embedding model), else the chat's."""
        if not settings.MEMORY_OPENAI_EMBEDDING_BASE_URL:
            return self.client
        if self.embedding_client is None:
            self.embedding_client = _client(
                base_url=settings.MEMORY_OPENAI_EMBEDDING_BASE_URL,
                api_key=settings.MEMORY_OPENAI_EMBEDDING_API_KEY,
            )
        return self.embedding_client

    async def aclose(self) -> None:
        """Close the clients' connections; the model cannot be used afterwards."""
        await self.client.close()
        if self.embedding_client is not None:
            await self.embedding_client.close()
