"""The path converters of the project's URLs, HTTP and WebSocket alike.

``<id:name>`` matches what ``<str:name>`` does (any text up to the next ``/``) except a NUL
character or a lone surrogate, which no database can hold: a path naming one matches no route
and is answered 404, as any unknown id is, before a view or consumer looks it up.

``<key:name>`` is an id an API client chose (ADK's app, user and session ids, artifact file
names): any text, ``/`` and ``%`` included, so the segment carries it percent-encoded once
more than the URL itself is. An ASGI or WSGI server decodes the path once (``%2F`` would
become a separator), the route then matches the still-encoded segment, and the converter
decodes it. An id of letters, digits and ``. _ : @ -`` reads the same either way.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from django.urls.converters import StringConverter

_UNSTORABLE = re.compile("[\\x00\\ud800-\\udfff]")


class IdConverter(StringConverter):
    regex = "[^/\\x00\\ud800-\\udfff]+"


class KeyConverter(StringConverter):
    regex = "[^/\\x00\\ud800-\\udfff]+"

    def to_python(self, value: str) -> str:
        decoded = unquote(value, errors="strict")
        if _UNSTORABLE.search(decoded):
            raise ValueError("no database holds a NUL character or a lone surrogate")
        return decoded

    def to_url(self, value: str) -> str:
        return quote(value, safe="")
