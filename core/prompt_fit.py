"""Prompts that fit the model: a request's messages trimmed to the model's context window, the
oldest history first, and a message that cannot fit refused in words a person understands.

Tokens are estimated from characters (no tokenizer of every server's model is at hand): a
conservative three characters a token, so that an estimate errs towards trimming, and the
refusal says "about".
"""

from __future__ import annotations

import json
import re
from typing import Any

from core.llm import ModelError

CHARS_PER_TOKEN = 3
# What a message costs beyond its text (its role and the template's markers), and an image.
MESSAGE_OVERHEAD_TOKENS = 4
IMAGE_TOKENS = 256
# The least room an answer needs: a prompt leaving less is refused, not sent to be cut short.
MIN_ANSWER_TOKENS = 64
# llama-cpp-python's (OpenAI's) refusal of a request over the context window.
_CONTEXT_EXCEEDED = re.compile(
    r"maximum context length is (?P<context>\d+) tokens.*?requested (?P<requested>\d+) tokens",
    re.IGNORECASE | re.DOTALL,
)


def message_tokens(message: dict[str, Any]) -> int:
    """About how many tokens ``message`` (a Chat Completions message) takes."""
    content = message.get("content")
    if isinstance(content, list):
        chars = sum(len(item.get("text", "")) for item in content)
        images = sum(1 for item in content if item.get("type") == "image_url")
    else:
        chars, images = len(content or ""), 0
    if message.get("tool_calls"):
        chars += len(json.dumps(message["tool_calls"]))
    return MESSAGE_OVERHEAD_TOKENS + -(-chars // CHARS_PER_TOKEN) + images * IMAGE_TOKENS


def too_long_error(*, needed: int, context: int) -> ModelError:
    """The refusal of a message the model cannot read, in a sentence for the person."""
    return ModelError(
        f"Your message is longer than this model can read "
        f"(about {needed:,} of {context:,} tokens).",
        code="message_too_long",
    )


def context_exceeded_error(message: str) -> ModelError | None:
    """The refusal for a server's own "maximum context length" error (None for another)."""
    found = _CONTEXT_EXCEEDED.search(message or "")
    if found is None:
        return None
    return too_long_error(needed=int(found["requested"]), context=int(found["context"]))


def messages_fit(
    messages: list[dict[str, Any]], *, context_tokens: int, max_tokens: int
) -> tuple[list[dict[str, Any]], int]:
    """``messages`` trimmed to leave room for an answer in ``context_tokens``, and the room
    left (at most ``max_tokens``).

    The system message and everything from the newest user message on (the message being
    answered and this turn's tool steps) are kept; older history goes first, and what is
    kept starts at a user message, so that no tool result loses the call it answers. A
    prompt that does not fit even so raises ``message_too_long``.
    """
    head = messages[:1] if messages and messages[0]["role"] == "system" else []
    rest = messages[len(head) :]
    newest = max(
        (index for index, message in enumerate(rest) if message["role"] == "user"), default=0
    )
    history, current = rest[:newest], rest[newest:]
    fixed = sum(message_tokens(message) for message in head + current)
    least = min(max_tokens, MIN_ANSWER_TOKENS)
    if fixed + least > context_tokens:
        raise too_long_error(needed=fixed + least, context=context_tokens)
    costs = [message_tokens(message) for message in history]
    start = 0
    while start < len(history) and fixed + sum(costs[start:]) + least > context_tokens:
        start += 1
        while start < len(history) and history[start]["role"] != "user":
            start += 1
    kept = history[start:]
    used = fixed + sum(costs[start:])
    return [*head, *kept, *current], min(max_tokens, context_tokens - used)
