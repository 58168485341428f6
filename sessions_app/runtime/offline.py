"""The built-in offline model: deterministic, no network, grounded in state and memories.

It is what makes the app work on a fresh machine, so its behaviour is
specified (and tested) rule by rule. For the latest user message:

1. "remember (that) X" with ``create_memory`` offered: call ``create_memory(text=X)``.
2. "what do you know/remember (about X)?" with ``load_memory`` offered: call
   ``load_memory(query=X or the whole question)``.
3. "my name is N" with ``set_state`` offered: call ``set_state("user:name", N)``.
4. "set K to V" with ``set_state`` offered: call ``set_state(K, V)``.
5. Otherwise a reply that greets the user by ``user:name`` when known, repeats
   what they said, and cites the best-scoring preloaded memory.

After a tool response it reports the tool's result in one sentence. A
"summarize" request gets one line per turn of the conversation. Text is
streamed a few words at a time.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings
from google.genai import types

from sessions_app.runtime.context import SUMMARY_PREFIX, estimate_tokens
from sessions_app.runtime.llm import LlmChunk, LlmRequest

OFFLINE_MODEL_NAME = "offline"
WORDS_PER_CHUNK = 3
SUMMARY_LINE_CHARS = 160
SUMMARY_MAX_LINES = 60

_REMEMBER = re.compile(
    r"^\s*(?:please\s+)?remember\s+(?:that\s+)?(?P<fact>.+?)\s*[.!]?\s*$", re.I | re.S
)
_RECALL = re.compile(
    r"what\s+do\s+you\s+(?:know|remember)(?:\s+about\s+(?P<topic>.+?))?\s*\??\s*$", re.I | re.S
)
_MY_NAME = re.compile(r"\bmy\s+name\s+is\s+(?P<name>[^\W\d_][\w'-]*)", re.I)
_SET = re.compile(
    r"^\s*(?:please\s+)?set\s+(?P<key>(?:user:|temp:)?[A-Za-z_]\w*)\s+(?:to|=)\s+(?P<value>.+?)\s*\.?\s*$",
    re.I | re.S,
)


def _text(content: types.Content) -> str:
    return "".join(part.text or "" for part in content.parts or ())


def _call(name: str, **args: Any) -> LlmChunk:
    return LlmChunk(function_calls=[types.FunctionCall(name=name, args=args)])


def _tool_names(request: LlmRequest) -> set[str]:
    return {declaration.name for declaration in request.tools}


def _after_tool(responses: list[types.FunctionResponse]) -> str:
    sentences = []
    for response in responses:
        result = response.response or {}
        if result.get("status") == "error" or "error" in result:
            sentences.append(f"I couldn't do that: {result.get('message') or result.get('error')}.")
        elif response.name == "create_memory":
            sentences.append(f"Got it, I'll remember that {result.get('text', 'fact')}.")
        elif response.name == "load_memory":
            memories = result.get("memories") or []
            if memories:
                lines = "\n".join(
                    f"- {m['text']} (confidence {float(m.get('confidence', 1)):.2f})"
                    for m in memories
                )
                sentences.append("Here is what I remember:\n" + lines)
            else:
                sentences.append("I don't have anything remembered about that yet.")
        elif response.name == "set_state":
            sentences.append(f"Saved {result.get('key')}.")
        else:
            sentences.append(f"{response.name} returned {result}.")
    return " ".join(sentences)


def _reply(request: LlmRequest, text: str) -> str:
    name = request.state.get("user:name")
    greeting = f"Hi {name}! " if name else ""
    reply = f"{greeting}You said: \u201c{text.strip()}\u201d."
    relevant = [memory for memory in request.memories if memory.score > 0] or request.memories
    if relevant:
        reply += f" I remember that {relevant[0].text}."
    return reply


def _summary(request: LlmRequest) -> str:
    """One line per turn, an earlier summary's lines kept as they were, the newest lines last."""
    lines: list[str] = []
    for content in request.contents:
        text = _text(content)
        if text.startswith(SUMMARY_PREFIX):
            lines.extend(line for line in text[len(SUMMARY_PREFIX) :].splitlines() if line)
            continue
        said = " ".join(text.split())
        if said:
            speaker = "User" if content.role == "user" else "Assistant"
            lines.append(f"- {speaker}: {said[:SUMMARY_LINE_CHARS]}")
    return "\n".join(lines[-SUMMARY_MAX_LINES:])


class OfflineModel:
    """Deterministic rule-based model; see the module docstring for its rules."""

    name = OFFLINE_MODEL_NAME
    offline = True

    def __init__(self, *, chunk_delay: float | None = None) -> None:
        self.chunk_delay = (
            settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS if chunk_delay is None else chunk_delay
        )

    def respond(self, request: LlmRequest) -> LlmChunk | str:
        """The decision for this request: a tool call, or the text of the reply."""
        if request.purpose == "summarize":
            return _summary(request)
        last = request.contents[-1] if request.contents else types.Content(role="user", parts=[])
        responses = [part.function_response for part in last.parts or () if part.function_response]
        if responses:
            return _after_tool(responses)
        text = _text(last)
        tools = _tool_names(request)
        if "create_memory" in tools and (match := _REMEMBER.match(text)):
            return _call("create_memory", text=match["fact"])
        if "load_memory" in tools and (match := _RECALL.search(text)):
            return _call("load_memory", query=(match["topic"] or text).strip())
        if "set_state" in tools and (match := _MY_NAME.search(text)):
            return _call("set_state", key="user:name", value=match["name"])
        if "set_state" in tools and (match := _SET.match(text)):
            return _call("set_state", key=match["key"], value=match["value"])
        return _reply(request, text)

    async def generate_stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]:
        decision = self.respond(request)
        prompt_tokens = sum(estimate_tokens(content) for content in request.contents)
        if isinstance(decision, LlmChunk):
            decision.usage_metadata = types.GenerateContentResponseUsageMetadata(
                prompt_token_count=prompt_tokens, candidates_token_count=8
            )
            yield decision
            return
        words = re.findall(r"\S+\s*", decision)
        for start in range(0, len(words), WORDS_PER_CHUNK):
            if self.chunk_delay:
                await asyncio.sleep(self.chunk_delay)
            yield LlmChunk(text="".join(words[start : start + WORDS_PER_CHUNK]))
        yield LlmChunk(
            usage_metadata=types.GenerateContentResponseUsageMetadata(
                prompt_token_count=prompt_tokens, candidates_token_count=len(words)
            ),
            finish_reason="STOP",
        )
