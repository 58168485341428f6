"""The built-in offline model: deterministic, no network, grounded in state and memories.

It is what makes the app work on a fresh machine, so its behaviour is
specified (and tested) rule by rule. For the latest user message:

1. "remember (that) X" with ``create_memory`` offered: call ``create_memory(text=X,
   asked=True)``;
   without it, in a chat that keeps nothing (``not_saved_reason``): say it was not saved, and
   why, and with creation off what the chat keeps and what it does not
   (``CREATION_OFF_KEPT``). A message with attached files that asks to remember them
   ("remember this logo", ``memory_app.extraction.files.KEEP_REQUEST``) calls no tool: the
   reply names the files and says they will be kept (or why not), and the memory job the
   request triggers keeps them, as memories that hold the files.
2. "forget (that) X", "don't remember X", "delete what you know about X"
   (``memory_app.extraction.facts.FORGET_REQUEST``) with ``forget_memory`` offered: call
   ``forget_memory(about=X)``, with ``all=True`` for "what you know about"; the result is said
   as what was forgotten, or the memories that could be meant, asking which.
2b. "what do you know/remember (about X)?" with ``load_memory`` offered: call
   ``load_memory(query=X or the whole question)``.
3. "where/when did I say/mention/tell you X?" (or "did I ever mention X?") with
   ``search_past_conversations`` offered: call ``search_past_conversations(query=X)``.
4. "my name is N" with ``set_state`` offered: call ``set_state("user:name", N)``.
5. "set K to V" with ``set_state`` offered: call ``set_state(K, V)``.
6. A question about the attached text files or PDFs ("what does the file say?"): the files
   received, and a quote of the start of each one's text.
7. Otherwise a reply that greets the user by ``user:name`` when known, repeats
   what they said, and cites the best-ranked preloaded memory that shares a word with it,
   or a word the retrieval relates to one of its words ("snack" and "peanuts"); an
   unrelated memory is not cited.

After a tool response it reports the tool's result in one sentence, as a person would say
it, memories in the second person ("your daughter's birthday is May 3rd"), past turns by
the chat and the day they were said in; a refusal
that starts "Not saved" is said as it is. A
"summarize" request gets one line per turn of the conversation. Text is
streamed a few words at a time.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from django.conf import settings
from google.genai import types

from agents_app.runtime.context import SUMMARY_PREFIX, estimate_tokens
from agents_app.runtime.memory_hooks import CREATION_OFF, CREATION_OFF_KEPT
from core.llm import ATTACHMENT_LABEL_PREFIX, AttachmentInfo, LlmChunk, LlmRequest
from core.sizes import size_words
from memory_app.extraction.facts import FORGET_REQUEST
from memory_app.extraction.files import KEEP_REQUEST
from memory_app.ranking import terms_related, tokenize
from memory_app.wording import memories_said_to_user, memory_said_to_user, sentence
from sessions_app.uploads import pdf_text

OFFLINE_MODEL_NAME = "offline"
WORDS_PER_CHUNK = 3
SUMMARY_LINE_CHARS = 160
SUMMARY_MAX_LINES = 60
QUOTE_CHARS = 400
_ABOUT_FILES = re.compile(
    r"\b(?:says?|said|read|quote|contents?|what'?s in|summar\w*|tell me about)\b", re.I
)
_TEXT_TYPES = ("text/plain", "text/markdown")
# A recalled memory below this confidence is said with a doubt.
UNSURE_BELOW_CONFIDENCE = 0.6

_REMEMBER = re.compile(
    r"^\s*(?:please\s+)?remember\s+(?:that\s+)?(?P<fact>.+?)\s*[.!]?\s*$", re.I | re.S
)
_RECALL = re.compile(
    r"what\s+do\s+you\s+(?:know|remember)(?:\s+about\s+(?P<topic>.+?))?\s*\??\s*$", re.I | re.S
)
_WHERE_SAID = re.compile(
    r"(?:(?:where|when|which\s+chat)\s+did\s+i|did\s+i\s+(?:ever\s+)?)\s*"
    r"(?:say|mention|tell\s+you|talk|write|ask)(?:\s+(?:about|that|of))?\s+(?P<what>.+?)\s*\??\s*$",
    re.I | re.S,
)
_MY_NAME = re.compile(r"\bmy\s+name\s+is\s+(?P<name>[^\W\d_][\w'-]*)", re.I)
_SET = re.compile(
    r"^\s*(?:please\s+)?set\s+(?P<key>(?:user:|temp:)?[A-Za-z_]\w*)\s+(?:to|=)\s+(?P<value>.+?)\s*\.?\s*$",
    re.I | re.S,
)


def _text(content: types.Content) -> str:
    """What the user wrote: the lines naming attached files are the server's, not theirs."""
    return "".join(
        part.text
        for part in content.parts or ()
        if part.text and not part.text.startswith(ATTACHMENT_LABEL_PREFIX)
    )


_TYPE_WORDS = {
    "image/png": "a PNG image",
    "image/jpeg": "a JPEG image",
    "image/webp": "a WebP image",
    "image/gif": "a GIF image",
    "application/pdf": "a PDF document",
    "text/plain": "a text file",
    "text/markdown": "a Markdown file",
}


def _attachments_received(attachments: list[AttachmentInfo]) -> str:
    """The files of the message by name, type and size, so a user sees the model got them."""
    described = [
        f"{each.filename} ({_TYPE_WORDS.get(each.mime_type, each.mime_type)}, "
        f"{size_words(each.size)})"
        for each in attachments
    ]
    listed = (
        described[0] if len(described) == 1 else ", ".join(described[:-1]) + " and " + described[-1]
    )
    return f"I received {listed}."


def _file_texts(content: types.Content) -> list[tuple[str, str]]:
    """(filename, text) of the text files and PDFs attached to ``content``, in order."""
    texts: list[tuple[str, str]] = []
    name = ""
    for part in content.parts or ():
        if part.text and part.text.startswith(ATTACHMENT_LABEL_PREFIX):
            name = part.text.removeprefix(ATTACHMENT_LABEL_PREFIX).split(":", 1)[0]
        elif part.inline_data and part.inline_data.data:
            blob = part.inline_data
            if blob.mime_type in _TEXT_TYPES:
                texts.append((name, blob.data.decode("utf-8", errors="replace")))
            elif blob.mime_type == "application/pdf":
                texts.append((name, pdf_text(blob.data)))
    return texts


def _files_quoted(request: LlmRequest, content: types.Content) -> str | None:
    """The reply to a question about the attached files: what each says (its start), or
    None when none of them holds text."""
    quotes = []
    for name, text in _file_texts(content):
        flat = " ".join(text.split())
        if flat:
            cut = flat[:QUOTE_CHARS] + ("\u2026" if len(flat) > QUOTE_CHARS else "")
            quotes.append(f"{name} says: \u201c{cut}\u201d")
    if not quotes:
        return None
    return _attachments_received(request.attachments) + " " + " ".join(quotes)


def _files_kept(request: LlmRequest) -> str:
    """The reply to "remember this" about the message's files: received, and kept or not."""
    received = _attachments_received(request.attachments)
    if request.not_saved_reason:
        return f"{received} I have not saved them: {request.not_saved_reason}."
    names = [each.filename for each in request.attachments]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    return f"{received} " + sentence(f"Got it \u2014 I'll keep {listed} in your memories")


def _call(name: str, **args: Any) -> LlmChunk:
    return LlmChunk(function_calls=[types.FunctionCall(name=name, args=args)])


def _tool_names(request: LlmRequest) -> set[str]:
    return {declaration.name for declaration in request.tools}


def _key_words(key: str) -> str:
    """A state key as words: "user:favourite_colour" -> "favourite colour"."""
    return key.split(":", 1)[-1].replace("_", " ")


def _state_saved(key: str, value: Any) -> str:
    shown = value if isinstance(value, str) else json.dumps(value)
    if key == "user:name":
        return f"Nice to meet you, {shown}! I'll call you that in all your chats."
    if key.startswith("user:"):
        return f"Done: your {_key_words(key)} is now \u201c{shown}\u201d, in all your chats."
    if key.startswith("temp:"):
        return f"Done: {_key_words(key)} is \u201c{shown}\u201d for this reply only."
    return f"Done: in this chat, {_key_words(key)} is now \u201c{shown}\u201d."


def _recalled(memories: list[dict[str, Any]]) -> str:
    if not memories:
        return "I don't have anything remembered about that yet."
    lines = []
    for memory in memories:
        line = f"- {sentence(memory_said_to_user(str(memory.get('text', ''))))}"
        if float(memory.get("confidence", 1)) < UNSURE_BELOW_CONFIDENCE:
            line += " (I'm not sure about this one.)"
        lines.append(line)
    return "Here's what I remember:\n" + "\n".join(lines)


def _forgot(result: dict[str, Any]) -> str:
    """What a ``forget_memory`` result tells the person: what went, or which it could mean."""
    choices = result.get("choices") or []
    if choices:
        lines = [f"- {sentence(memory_said_to_user(str(c.get('text', ''))))}" for c in choices]
        return "Which one should I forget?\n" + "\n".join(lines)
    forgotten = [str(text) for text in result.get("forgotten") or []]
    if not forgotten:
        return "I don't have anything remembered about that, so there is nothing to forget."
    return sentence(f"Done \u2014 I've forgotten that {memories_said_to_user(forgotten)}")


def _past_found(turns: list[dict[str, Any]]) -> str:
    if not turns:
        return "I couldn't find that in your past chats."
    lines = [
        f"- In \u201c{turn.get('chat_title') or 'a chat'}\u201d on {turn.get('date', '')}, "
        f"you said: \u201c{turn.get('excerpt', '')}\u201d"
        + (f" (in reply to \u201c{turn['in_reply_to']}\u201d)" if turn.get("in_reply_to") else "")
        for turn in turns
    ]
    return "Here's where you said it in your past chats:\n" + "\n".join(lines)


_FAILED = {
    "create_memory": "Sorry, I couldn't save that",
    "load_memory": "Sorry, I couldn't look that up",
    "forget_memory": "Sorry, I couldn't forget that",
    "search_past_conversations": "Sorry, I couldn't search your past chats",
    "set_state": "Sorry, I couldn't save that",
}


def _after_tool(responses: list[types.FunctionResponse], calls: list[types.FunctionCall]) -> str:
    """One sentence a tool result, as a person would report it; ``calls`` are the calls the
    results answer (a result does not repeat, say, the value it saved)."""
    args_of = {call.name: call.args or {} for call in calls}
    sentences = []
    for response in responses:
        result = response.response or {}
        message = str(result.get("message") or result.get("error") or "")
        if message.startswith("Not saved"):
            sentences.append(message)
        elif result.get("status") == "error" or "error" in result:
            problem = message or "something went wrong"
            failed = _FAILED.get(response.name, "Sorry, that didn't work")
            sentences.append(sentence(f"{failed}: {problem}"))
        elif response.name == "create_memory":
            fact = memory_said_to_user(str(result.get("text") or "that"))
            sentences.append(sentence(f"Got it \u2014 I'll remember that {fact}"))
        elif response.name == "forget_memory":
            sentences.append(_forgot(result))
        elif response.name == "load_memory":
            sentences.append(_recalled(result.get("memories") or []))
        elif response.name == "search_past_conversations":
            sentences.append(_past_found(result.get("past_conversations") or []))
        elif response.name == "set_state":
            key = str(result.get("key") or args_of.get("set_state", {}).get("key", ""))
            sentences.append(_state_saved(key, args_of.get("set_state", {}).get("value", "")))
        else:
            sentences.append(f"I used {response.name}.")
    return " ".join(sentences)


def _reply(request: LlmRequest, text: str) -> str:
    name = request.state.get("user:name")
    greeting = f"Hi {name}! " if name else ""
    reply = greeting + sentence(f"You said: \u201c{text.strip()}\u201d")
    asked = terms_related(tokenize(text)) - {"user"}
    relevant = [memory for memory in request.memories if asked & set(tokenize(memory.text))]
    if relevant:
        reply += " " + sentence(f"I remember that {memory_said_to_user(relevant[0].text)}")
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
            before = request.contents[-2] if len(request.contents) > 1 else None
            calls = (
                [part.function_call for part in before.parts or () if part.function_call]
                if before
                else []
            )
            return _after_tool(responses, calls)
        text = _text(last)
        tools = _tool_names(request)
        if request.attachments and KEEP_REQUEST.search(text):
            return _files_kept(request)
        if "create_memory" in tools and (match := _REMEMBER.match(text)):
            return _call("create_memory", text=match["fact"], asked=True)
        if request.not_saved_reason and _REMEMBER.match(text):
            reply = f"I have not saved that: {request.not_saved_reason}."
            if request.not_saved_reason == CREATION_OFF:
                reply += " " + CREATION_OFF_KEPT
            return reply
        if "forget_memory" in tools and (match := FORGET_REQUEST.match(text)):
            return _call("forget_memory", about=match["about"], all=bool(match["all"]))
        if "load_memory" in tools and (match := _RECALL.search(text)):
            return _call("load_memory", query=(match["topic"] or text).strip())
        if "search_past_conversations" in tools and (match := _WHERE_SAID.search(text)):
            return _call("search_past_conversations", query=match["what"].strip())
        if "set_state" in tools and (match := _MY_NAME.search(text)):
            return _call("set_state", key="user:name", value=match["name"])
        if "set_state" in tools and (match := _SET.match(text)):
            return _call("set_state", key=match["key"], value=match["value"])
        if request.attachments and _ABOUT_FILES.search(text):
            quoted = _files_quoted(request, last)
            if quoted:
                return quoted
        if request.attachments:
            received = _attachments_received(request.attachments)
            return received + " " + _reply(request, text) if text.strip() else received
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
