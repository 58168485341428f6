"""The seam through which long-term memory plugs into the runner.

The runner knows only this protocol; ``memory_app`` registers its provider in
its ``AppConfig.ready``. Without one, agents simply have no long-term memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from agents_app.runtime.tools import Tool
from core.async_database import NOTHING_READ, StoreRead
from core.llm import MemorySnippet, PastConversationSnippet
from sessions_app.types import Session

PROFILE_PREFIX = "user:"


CREATION_OFF = "creating memories is turned off in your Settings"
# What a chat keeps while its person has memory creation off, said whenever it saves nothing.
CREATION_OFF_KEPT = (
    "This chat keeps your messages in its history until you delete it, but nothing you say "
    "while creation is off becomes a memory, and your other chats never find it when they "
    "search your past conversations. Memories saved before stay until you delete them."
)


@dataclass(frozen=True)
class MemoryPermissions:
    """Whether this turn may read memories into the prompt and create new ones.

    ``user:`` state (the name the agent saved, any profile key) is memory from the person's
    side too: it is read only when memories may be used and written only when they may be
    created, so a temporary chat neither sees nor changes it.
    """

    use: bool
    create: bool
    temporary: bool = False
    governs_profile: bool = True  # False without a memory provider: ``user:`` state is free
    past: bool = False  # "Reference past chats": search the user's own earlier turns

    def not_saved_reason(self) -> str:
        """Why nothing said in this chat is kept, in words for the user ("" when it is)."""
        if not self.governs_profile:
            return ""
        if self.temporary:
            return "this is a temporary chat, which keeps nothing about you"
        if not self.create:
            return CREATION_OFF
        return ""

    def visible_state(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """``state`` as this turn may read it: without ``user:`` keys unless memories may be
        used."""
        if self.use or not self.governs_profile:
            return dict(state)
        return {key: value for key, value in state.items() if not key.startswith(PROFILE_PREFIX)}


class MemoryProvider(Protocol):
    async def permissions(self, *, session: Session) -> MemoryPermissions: ...

    def permissions_read(self, *, app_name: str, user_id: str, session_id: str) -> StoreRead:
        """The read behind ``permissions``, for a caller to join with reads of its own (a turn
        reads them with its session, in one round trip); its answer goes to
        ``permissions_taken``."""
        ...

    def permissions_taken(self, *, session: Session, answer: Any) -> MemoryPermissions:
        """``permissions`` from the answer of ``permissions_read``, read a moment ago for this
        turn, in the task that runs the turn."""
        ...

    async def preload(self, *, session: Session, query: str, limit: int) -> list[MemorySnippet]: ...

    async def preload_past(
        self, *, session: Session, query: str, limit: int
    ) -> list[PastConversationSnippet]:
        """The user's turns of their other chats most relevant to ``query`` (past conversations),
        for a section of the system instruction of their own."""
        ...

    async def app_guidance(self, *, session: Session) -> list[str]:
        """The app's guidance for its agent (procedural memory, written by its staff), which
        the system instruction carries as instructions."""
        ...

    def tools(self) -> list[Tool]:
        """``load_memory``, ``create_memory`` and ``search_past_conversations``; the runner
        offers each only when allowed."""
        ...

    def turn_trigger_read(
        self, *, app_name: str, user_id: str, session_id: str, invocation_id: str
    ) -> StoreRead:
        """What the turn triggers read of a stored turn, for the runner to make in the round
        trip that stores its final event; its answer goes to ``turn_completed``."""
        ...

    async def turn_completed(
        self, *, session: Session, invocation_id: str, facts: Any = None
    ) -> None:
        """Called after a turn is stored; may enqueue memory generation, never waits for it.
        ``facts``: the answer of ``turn_trigger_read`` made with the final event (None: read
        them here)."""
        ...

    async def turn_trigger_check(
        self, *, app_name: str, user_id: str, session_id: str, invocation_id: str
    ) -> Any:
        """The first half of ``turn_completed``: which trigger is due for the turn, if any
        (None: none). It reads nothing of the turn's last event, so it may run while that
        event is being stored."""
        ...

    async def turn_trigger_queue(self, *, session: Session, trigger: Any) -> None:
        """The second half of ``turn_completed``, once the turn is stored: enqueue the
        generation ``trigger`` (from ``turn_trigger_check``) calls for."""
        ...

    async def session_opened(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """The user opened a chat on the session (a socket connected): they are in it, and
        out of their other chats."""
        ...

    async def session_left(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """A chat socket of the session closed: the user may have left it."""
        ...


class NoMemoryProvider:
    async def permissions(self, *, session: Session) -> MemoryPermissions:
        return MemoryPermissions(use=False, create=False, governs_profile=False)

    def permissions_read(self, *, app_name: str, user_id: str, session_id: str) -> StoreRead:
        return NOTHING_READ

    def permissions_taken(self, *, session: Session, answer: Any) -> MemoryPermissions:
        return MemoryPermissions(use=False, create=False, governs_profile=False)

    async def preload(self, *, session: Session, query: str, limit: int) -> list[MemorySnippet]:
        return []

    async def preload_past(
        self, *, session: Session, query: str, limit: int
    ) -> list[PastConversationSnippet]:
        return []

    async def app_guidance(self, *, session: Session) -> list[str]:
        return []

    def tools(self) -> list[Tool]:
        return []

    def turn_trigger_read(
        self, *, app_name: str, user_id: str, session_id: str, invocation_id: str
    ) -> StoreRead:
        return NOTHING_READ

    async def turn_completed(
        self, *, session: Session, invocation_id: str, facts: Any = None
    ) -> None:
        return None

    async def turn_trigger_check(
        self, *, app_name: str, user_id: str, session_id: str, invocation_id: str
    ) -> Any:
        return None

    async def turn_trigger_queue(self, *, session: Session, trigger: Any) -> None:
        return None

    async def session_opened(self, *, app_name: str, user_id: str, session_id: str) -> None:
        return None

    async def session_left(self, *, app_name: str, user_id: str, session_id: str) -> None:
        return None


_provider: MemoryProvider = NoMemoryProvider()


def memory_provider_register(provider: MemoryProvider) -> None:
    global _provider
    _provider = provider


def memory_provider_get() -> MemoryProvider:
    return _provider
