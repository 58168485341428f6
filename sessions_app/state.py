"""State scoping by key prefix, exactly as ADK's ``State`` documents it.

No prefix: the session. ``user:``: every session of the user within the app.
``app:``: every session of the app. ``temp:``: the current invocation only,
never stored. Stored scopes keep their keys without the prefix; the merged
view puts it back.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from core.sizes import size_and_limit_words
from sessions_app.errors import InvalidStateError

APP_PREFIX = "app:"
USER_PREFIX = "user:"
TEMP_PREFIX = "temp:"
PREFIXES = (APP_PREFIX, USER_PREFIX, TEMP_PREFIX)


@dataclass
class ScopedState:
    """A state mapping split by scope, keys stripped of their prefix."""

    session: dict[str, Any] = field(default_factory=dict)
    user: dict[str, Any] = field(default_factory=dict)
    app: dict[str, Any] = field(default_factory=dict)
    temp: dict[str, Any] = field(default_factory=dict)

    def stored_delta(self) -> dict[str, Any]:
        """The prefixed mapping of every scope that is persisted (temp left out)."""
        merged = dict(self.session)
        merged.update({USER_PREFIX + key: value for key, value in self.user.items()})
        merged.update({APP_PREFIX + key: value for key, value in self.app.items()})
        return merged


def state_key_validate(key: Any) -> None:
    """Refuse keys ADK would store wrongly or silently in another scope.

    A key must be a non-empty string of bounded length; a scope prefix needs a
    name after it; a prefix written in another case (``User:x``) is refused
    because it would land in session scope, which is never what was meant.
    """
    if not isinstance(key, str):
        raise InvalidStateError(f"State keys must be strings, got {type(key).__name__}: {key!r}.")
    if not key:
        raise InvalidStateError("State keys must not be empty.")
    if "\x00" in key:
        raise InvalidStateError("State keys cannot contain NUL characters.")
    if len(key) > settings.MAX_STATE_KEY_LENGTH:
        raise InvalidStateError(
            f"State key {key[:40]!r}... is longer than {settings.MAX_STATE_KEY_LENGTH} characters."
        )
    for prefix in PREFIXES:
        if key == prefix:
            raise InvalidStateError(f"State key {key!r} has a scope prefix but no name.")
        head = key[: len(prefix)]
        if head != prefix and head.lower() == prefix:
            raise InvalidStateError(
                f"State key {key!r} looks like the {prefix!r} scope in the wrong case; "
                f"scope prefixes are lower-case: {', '.join(PREFIXES)}."
            )


def state_value_validate(key: str, value: Any) -> None:
    """Refuse values that are not plain JSON or that exceed the size limit."""
    try:
        encoded = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidStateError(
            f"State value of {key!r} is not JSON-serialisable ({type(value).__name__}): {error}."
        ) from None
    if "\\u0000" in encoded:
        raise InvalidStateError(f"State value of {key!r} contains a NUL character.")
    if len(encoded.encode()) > settings.MAX_STATE_VALUE_BYTES:
        said, allowed = size_and_limit_words(len(encoded.encode()), settings.MAX_STATE_VALUE_BYTES)
        raise InvalidStateError(f"State value of {key!r} is {said}; the limit is {allowed}.")


def state_split(state: dict[str, Any] | None) -> ScopedState:
    """Validate a prefixed state mapping and split it by scope."""
    scoped = ScopedState()
    if not state:
        return scoped
    if not isinstance(state, dict):
        raise InvalidStateError(f"State must be a JSON object, got {type(state).__name__}.")
    for key, value in state.items():
        state_key_validate(key)
        if key.startswith(TEMP_PREFIX):
            scoped.temp[key[len(TEMP_PREFIX) :]] = value
            continue
        state_value_validate(key, value)
        if key.startswith(APP_PREFIX):
            scoped.app[key[len(APP_PREFIX) :]] = value
        elif key.startswith(USER_PREFIX):
            scoped.user[key[len(USER_PREFIX) :]] = value
        else:
            scoped.session[key] = value
    return scoped


def state_merge(
    *, session: dict[str, Any], user: dict[str, Any], app: dict[str, Any]
) -> dict[str, Any]:
    """The merged view ``get_session`` returns: scoped keys re-prefixed."""
    merged = dict(session)
    for key, value in app.items():
        merged[APP_PREFIX + key] = value
    for key, value in user.items():
        merged[USER_PREFIX + key] = value
    return merged


def output_key_state_delta(*, output_key: str | None, text: str) -> dict[str, Any]:
    """The state delta that saves an agent's final text under its ``output_key``.

    Empty when the agent has no output key; the key may carry a scope prefix
    like any other.
    """
    if not output_key:
        return {}
    state_key_validate(output_key)
    return {output_key: text}
