"""Whether what is said may be remembered, decided when it is said: on the event's append.

Long-term memory is a layer above this one; when it starts it registers the condition that
holds while a user lets memories be created from their chats (``memory_consent_register``): an
SQL boolean expression of the user's pk. An event stored while the condition does not hold, or
in a temporary chat, is stored with ``memory_excluded`` set, in the same statement that stores
it, and no memory job or trigger ever reads it, whatever the user's choice is by then. Without
a registration, every event of a chat that is not temporary may be remembered.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConsentCondition:
    """``sql``: a boolean SQL expression, true while the user whose pk is its one ``%s``
    parameter allows memories to be created from what they say."""

    sql: str


_ALWAYS = ConsentCondition(sql="CAST(%s AS bigint) IS NOT NULL")
_registered: ConsentCondition | None = None


def memory_consent_register(condition: ConsentCondition) -> None:
    """Set the condition appends mark events by (long-term memory calls this when it starts)."""
    global _registered
    _registered = condition


def memory_consent_get() -> ConsentCondition:
    """The registered condition, or one that always holds."""
    return _registered or _ALWAYS
