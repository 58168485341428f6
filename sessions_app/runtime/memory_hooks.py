"""The seam through which long-term memory plugs into the runner.

The runner knows only this protocol; ``memory_app`` registers its provider in
its ``AppConfig.ready``. Without one, agents simply have no long-term memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sessions_app.runtime.llm import MemorySnippet
from sessions_app.runtime.tools import Tool
from sessions_app.types import Session


@dataclass(frozen=True)
class MemoryPermissions:
    """Whether this turn may read memories into the prompt and create new ones."""

    use: bool
    create: bool


class MemoryProvider(Protocol):
    async def permissions(self, *, session: Session) -> MemoryPermissions: ...

    async def preload(self, *, session: Session, query: str, limit: int) -> list[MemorySnippet]: ...

    def tools(self) -> list[Tool]:
        """``load_memory`` and ``create_memory``; the runner offers them only when allowed."""
        ...

    async def turn_completed(self, *, session: Session, invocation_id: str) -> None:
        """Called after a turn is stored; may enqueue memory generation, never waits for it."""
        ...


class NoMemoryProvider:
    async def permissions(self, *, session: Session) -> MemoryPermissions:
        return MemoryPermissions(use=False, create=False)

    async def preload(self, *, session: Session, query: str, limit: int) -> list[MemorySnippet]:
        return []

    def tools(self) -> list[Tool]:
        return []

    async def turn_completed(self, *, session: Session, invocation_id: str) -> None:
        return None


_provider: MemoryProvider = NoMemoryProvider()


def memory_provider_register(provider: MemoryProvider) -> None:
    global _provider
    _provider = provider


def memory_provider_get() -> MemoryProvider:
    return _provider
