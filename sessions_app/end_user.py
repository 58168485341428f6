"""What an end user may write into the session store, whatever door they come through.

An end user is a person signed in with a session cookie or a password: the owner of the
sessions, never the app. ``app:`` state is shared by every user of an app (and templated into
its agent's instruction), so it is written only by the agent's own code, staff holding
``sessions_app.change_app_state`` in the console, and the app's service accounts; an end user's
``app:`` key is refused, named in the error, never dropped silently. An event an end user
appends is what they said: authored ``user``, in the ``user`` role, with no tool call and none
of the actions only an agent takes (a compaction summary stands in for history in the prompt;
a transfer or an escalation steers the agents); no tool call and no tool result either (the model
takes a ``function_response`` as what its tool answered, so only the runtime and the app's service
accounts store one), and no id of the namespaces the server names chat turns' events in.

The REST API, the forms and the chat socket call these checks before anything is written; the
write-effect matrix (tests/access_app/test_write_effect_matrix.py) proves each door does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessions_app.events import SERVER_EVENT_ID_PREFIXES, Event
from sessions_app.state import APP_PREFIX

END_USER_AUTHOR = "user"
END_USER_ROLE = "user"
AGENT_ONLY_ACTIONS = ("compaction", "transfer_to_agent", "escalate")
# The parts only the runtime (or the app's service accounts) stores, and why.
TOOL_PARTS = {
    "function_call": "Only an agent calls tools: no function_call parts.",
    "function_response": "Only an agent's tools answer its calls: no function_response parts.",
}


def app_keys_refusal(state: Mapping[str, Any] | None) -> str | None:
    """Why an end user may not write ``state`` (its ``app:`` keys named), or None."""
    if not isinstance(state, Mapping):
        return None
    app_keys = sorted(key for key in state if isinstance(key, str) and key.startswith(APP_PREFIX))
    if not app_keys:
        return None
    named = ", ".join(repr(key) for key in app_keys[:5])
    more = f" and {len(app_keys) - 5} more" if len(app_keys) > 5 else ""
    return (
        f"{named}{more}: `app:` keys are shared by every user of the app; only the app's own "
        "agent, its service accounts and staff write them."
    )


def event_refusals(event: Event) -> dict[str, list[str]]:
    """Why an end user may not append ``event``, keyed by field (empty when they may)."""
    problems: dict[str, list[str]] = {}
    if event.author != END_USER_AUTHOR:
        problems["author"] = [
            f"Events you append are authored {END_USER_AUTHOR!r}; got {event.author[:60]!r}."
        ]
    if event.content is not None:
        if event.content.role not in (None, END_USER_ROLE):
            problems["content.role"] = [
                f"Events you append are in the {END_USER_ROLE!r} role; "
                f"got {str(event.content.role)[:60]!r}."
            ]
        parts = event.content.parts or ()
        tool_parts = [
            message
            for kind, message in TOOL_PARTS.items()
            if any(getattr(part, kind) for part in parts)
        ]
        if tool_parts:
            problems["content.parts"] = tool_parts
    if event.id.startswith(SERVER_EVENT_ID_PREFIXES):
        named = " or ".join(repr(prefix) for prefix in SERVER_EVENT_ID_PREFIXES)
        problems["id"] = [
            f"Ids starting {named} are made by the server for chat turns; "
            "choose another id or leave it out."
        ]
    refusal = app_keys_refusal(event.actions.state_delta)
    if refusal:
        problems["actions.state_delta"] = [refusal]
    for name in AGENT_ONLY_ACTIONS:
        if getattr(event.actions, name) is not None:
            problems[f"actions.{name}"] = [f"Only an agent's events carry {name}."]
    return problems
