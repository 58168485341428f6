"""Instruction templating from session state, with ADK's rules.

``{key}`` inserts a state value and fails clearly when it is missing, ``{key?}``
inserts it or nothing, scoped names (``{user:name}``, ``{app:x}``,
``{temp:y}``) read their scope. Braces around anything that is not a state
name (JSON examples in an instruction, say) are left as written. A callable
instruction provider builds the text itself and is not templated.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sessions_app.state import PREFIXES

_PLACEHOLDER = re.compile(r"{+[^{}]*}+")


class MissingStateKeyError(KeyError):
    """A required ``{key}`` of an instruction has no value in state."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key

    def __str__(self) -> str:
        return (
            f"Instruction needs state key {self.key!r}, which is not set; "
            f"write {{{self.key}?}} to make it optional."
        )


@dataclass(frozen=True)
class ReadonlyContext:
    """What an instruction provider may read: the merged state and who is asking."""

    state: Mapping[str, Any] = field(default_factory=dict)
    invocation_id: str = ""
    agent_name: str = ""
    session_id: str = ""
    user_id: str = ""


InstructionProvider = Callable[[ReadonlyContext], str | Awaitable[str]]


def _is_state_name(name: str) -> bool:
    for prefix in PREFIXES:
        if name.startswith(prefix):
            return name[len(prefix) :].isidentifier()
    return name.isidentifier()


def instruction_inject_state(template: str, state: Mapping[str, Any]) -> str:
    """``template`` with every state placeholder replaced by its value."""

    def replace(match: re.Match) -> str:
        name = match.group().lstrip("{").rstrip("}").strip()
        optional = name.endswith("?")
        if optional:
            name = name[:-1]
        if not _is_state_name(name):
            return match.group()
        if name in state:
            return str(state[name])
        if optional:
            return ""
        raise MissingStateKeyError(name)

    return _PLACEHOLDER.sub(replace, template)


async def instruction_resolve(
    *, instruction: str | InstructionProvider, context: ReadonlyContext
) -> str:
    """The system instruction text for one model call.

    A string is templated from ``context.state``; a provider is called with a
    read-only view of the context and its result used as it is.
    """
    if callable(instruction):
        readonly = ReadonlyContext(
            state=MappingProxyType(dict(context.state)),
            invocation_id=context.invocation_id,
            agent_name=context.agent_name,
            session_id=context.session_id,
            user_id=context.user_id,
        )
        result = instruction(readonly)
        if inspect.isawaitable(result):
            result = await result
        return result
    return instruction_inject_state(instruction, context.state)
