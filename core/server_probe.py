"""What an OpenAI-compatible server can do for a model, found by asking it (the console's
"Test connection"): whether it calls tools, whether it can stream a tool decision, and whether
its embeddings come one vector a text or one a token.

Whether a decision to call a tool can be streamed shows only when the model decides to call
one (llama-cpp-python streams a reply in words and fails only a streamed tool call), so the
probe's request is a conversation in which the model already called the tool once and is told
to call it again: a small model follows the pattern. A model that answers in words all the
same leaves the question open (``streams_tool_choice`` None), and the first turn whose reply
calls a tool finds out.

A server that refuses tools, or cannot stream a decision to call one (llama-cpp-python's
``chatml-function-calling`` answers 200 and ends the stream), would otherwise be found out on
a person's turn; one that embeds per token (llama.cpp without pooling) gives vectors that the
app averages, which search less well than the server's own pooling. The probe asks each
question once, with the same requests a turn and a search send, and says in words what it
found.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from google.genai import types

from core.llm import LlmRequest, ModelError
from core.openai_compatible import OpenAICompatibleModel

logger = logging.getLogger(__name__)

PROBE_TOOL = types.FunctionDeclaration(
    name="current_time",
    description="Gives the current time.",
    parameters_json_schema={"type": "object", "properties": {}},
)
PROBE_PROMPT = "What time is it? Call the current_time tool."
PROBE_AGAIN = "And now? Call the current_time tool again."
PROBE_EMBEDDING_TEXT = "Test connection of the embedding model"


@dataclass(frozen=True)
class ServerFindings:
    """What the probe found; ``embedding_error`` is empty when the embedding answered (or none
    was asked)."""

    calls_tools: bool
    # None: the model answered in words, so whether its tool decision streams is not known.
    streams_tool_choice: bool | None
    embeddings_per_token: bool = False
    embedding_error: str = ""

    def tool_traits(self) -> dict[str, bool]:
        """The findings on tools, as an app keeps them (``OpenAICompatibleModel.tool_traits``);
        what is not known is left out, so that what a turn found stays."""
        traits = {"calls_tools": self.calls_tools}
        if self.streams_tool_choice is not None:
            traits["streams_tool_choice"] = self.streams_tool_choice
        return traits

    def warnings(self) -> list[str]:
        """What a person running the app needs to know, in sentences; empty when all is well."""
        said = []
        if not self.calls_tools:
            said.append(
                "The server refused tools for this model: memory tools are off in its chats "
                "(the chat's context panel says so); memories are still made in the background."
            )
        elif self.streams_tool_choice is False:
            said.append(
                "The server cannot stream a decision to call a tool: turns that offer tools are "
                "asked without a stream, so their replies come at once rather than word by word."
            )
        elif self.streams_tool_choice is None:
            said.append(
                "The model answered in words when told to call a tool, so whether the server "
                "can stream a decision to call one is not known yet: the first reply that calls "
                "a tool finds out, and the app remembers it."
            )
        if self.embeddings_per_token:
            said.append(
                "The embedding server answers a vector per token (no pooling): the app averages "
                "them; start it with pooling (llama.cpp: --pooling mean) for better search."
            )
        if self.embedding_error:
            said.append(
                f"Embeddings failed ({self.embedding_error}): memory search goes by words alone."
            )
        return said


async def server_probe(
    model: OpenAICompatibleModel, *, embedding_model: str = ""
) -> ServerFindings:
    """Ask the server of ``model`` what it can do: a turn's streamed request offering one
    tool the model is told to call (what it refuses or cannot stream, learnt as a turn learns
    it, starting from no knowledge), and with ``embedding_model`` one embedding. The process's
    knowledge of the server is what the probe found afterwards."""
    traits = model.traits
    traits.calls_tools = True
    traits.streams_tool_choice = True
    called = False
    try:
        async for chunk in model.generate_stream(_probe_request(model.name)):
            called = called or bool(chunk.function_calls)
    except ModelError as error:
        logger.info("%s: the tool probe ended in %s", model.name, error)
    streams = traits.streams_tool_choice
    if traits.calls_tools and streams and not called:
        streams = None
    per_token = False
    embedding_error = ""
    if embedding_model:
        try:
            await model.embed([PROBE_EMBEDDING_TEXT], model=embedding_model)
            per_token = model.embeddings_per_token
        except ModelError as error:
            embedding_error = str(error)
    return ServerFindings(
        calls_tools=traits.calls_tools,
        streams_tool_choice=streams if traits.calls_tools else None,
        embeddings_per_token=per_token,
        embedding_error=embedding_error,
    )


def _probe_request(model: str) -> LlmRequest:
    """A conversation in which the model called ``current_time`` and is asked to call it
    again, offering that tool alone."""
    call = types.FunctionCall(id="probe-1", name=PROBE_TOOL.name, args={})
    answer = types.FunctionResponse(id="probe-1", name=PROBE_TOOL.name, response={"time": "09:00"})
    return LlmRequest(
        model=model,
        system_instruction="You can call tools. Call the tool the user asks for.",
        contents=[
            types.Content(role="user", parts=[types.Part(text=PROBE_PROMPT)]),
            types.Content(role="model", parts=[types.Part(function_call=call)]),
            types.Content(role="user", parts=[types.Part(function_response=answer)]),
            types.Content(role="user", parts=[types.Part(text=PROBE_AGAIN)]),
        ],
        tools=[PROBE_TOOL],
    )
