"""The path converter of every id in the project's URLs, HTTP and WebSocket alike.

``<id:name>`` matches what ``<str:name>`` does (any text up to the next ``/``) except a NUL
character or a lone surrogate, which no database can hold: a path naming one matches no route
and is answered 404, as any unknown id is, before a view or consumer looks it up.
"""

from __future__ import annotations

from django.urls.converters import StringConverter


class IdConverter(StringConverter):
    regex = "[^/\\x00\\ud800-\\udfff]+"
