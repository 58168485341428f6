"""Facts said to hold for this conversation only ("for this trip I'm vegetarian", "in this
chat, call me Doc"): the offline rules keep them as session-scope memories, which are recalled
in that conversation alone and go with it."""

from __future__ import annotations

import re

SESSION_ONLY = re.compile(
    r"(?:,\s*)?\b(?:just\s+|only\s+)?(?:for|during|in)\s+(?:this|the)\s+"
    r"(?:trip|chat|conversation|session|visit|journey|holiday|vacation)(?:\s+only)?\b[,:]?\s*",
    re.I,
)


def session_only_split(sentence: str) -> tuple[str, bool]:
    """``sentence`` without its "for this trip" marker, and whether it had one (a marker
    alone leaves nothing: the sentence split cut it from the statement it opens)."""
    stripped, found = SESSION_ONLY.subn(" ", sentence, count=1)
    if not found:
        return sentence, False
    stripped = " ".join(stripped.split())
    stripped = re.sub(r"\s+([.!?;,])", r"\1", stripped).lstrip(" ,")
    return stripped[:1].upper() + stripped[1:], True
