"""An app's PII redaction applied to what is stored: events, values, artifact names.

Every string a person or a model wrote in an event is scrubbed: the text of its content
parts, the arguments of function calls and the results of function responses, the values of
its state delta, and its error message. Ids, authors and keys are left as they are: they name
things, and a changed id would break the links between events. A session's title and
initial state are scrubbed as values; an artifact's name keeps its ``user:`` prefix and its
extension, which say whose it is and what kind of file.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from memory_app.safety import pii_scrub
from sessions_app.artifact_files import USER_PREFIX
from sessions_app.events import Event


def value_redact(value: Any) -> Any:
    """``value`` with every string in it scrubbed, at any depth of lists and dicts; keys and
    other values stay."""
    if isinstance(value, str):
        return pii_scrub(value)
    if isinstance(value, dict):
        return {key: value_redact(item) for key, item in value.items()}
    if isinstance(value, list):
        return [value_redact(item) for item in value]
    return value


def filename_redact(filename: str) -> str:
    """``filename`` scrubbed with its ``user:`` prefix and extension kept:
    "user:ada@lovelace.example.pdf" becomes "user:[email].pdf" (the e-mail's placeholder
    would otherwise take the extension with it)."""
    owner = USER_PREFIX if filename.startswith(USER_PREFIX) else ""
    name = filename.removeprefix(owner)
    scrubbed = pii_scrub(name)
    suffix = PurePath(name).suffix
    if scrubbed != name and suffix and not scrubbed.endswith(suffix):
        scrubbed += suffix
    return owner + scrubbed


def event_redact(event: Event) -> Event:
    """Scrub ``event`` in place (see the module); returns it."""
    for part in (event.content.parts or []) if event.content else []:
        if part.text:
            part.text = pii_scrub(part.text)
        if part.function_call and part.function_call.args:
            part.function_call.args = value_redact(part.function_call.args)
        if part.function_response and part.function_response.response:
            part.function_response.response = value_redact(part.function_response.response)
    event.actions.state_delta = value_redact(event.actions.state_delta)
    if event.error_message:
        event.error_message = pii_scrub(event.error_message)
    return event
