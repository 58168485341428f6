"""An app's PII redaction applied to an event before it is stored.

Every string a person or a model wrote in the event is scrubbed: the text of its content
parts, the arguments of function calls and the results of function responses, the values of
its state delta, and its error message. Ids, authors and keys are left as they are: they name
things, and a changed id would break the links between events.
"""

from __future__ import annotations

from typing import Any

from memory_app.safety import pii_scrub
from sessions_app.events import Event


def _scrubbed(value: Any) -> Any:
    if isinstance(value, str):
        return pii_scrub(value)
    if isinstance(value, dict):
        return {key: _scrubbed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrubbed(item) for item in value]
    return value


def event_redact(event: Event) -> Event:
    """Scrub ``event`` in place (see the module); returns it."""
    for part in (event.content.parts or []) if event.content else []:
        if part.text:
            part.text = pii_scrub(part.text)
        if part.function_call and part.function_call.args:
            part.function_call.args = _scrubbed(part.function_call.args)
        if part.function_response and part.function_response.response:
            part.function_response.response = _scrubbed(part.function_response.response)
    event.actions.state_delta = _scrubbed(event.actions.state_delta)
    if event.error_message:
        event.error_message = pii_scrub(event.error_message)
    return event
