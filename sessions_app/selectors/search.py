"""Search across one user's chats: their titles and the text of their messages.

Messages are found by the database's full-text search over the events' text parts
(migration 0008): PostgreSQL's ``jsonb_to_tsvector`` through a GIN expression index, SQLite's
FTS5 table on the embedded default. Both use the words as they are (no stemming, the
``simple`` configuration and FTS5's ``unicode61``), each word of the query matching as a
prefix and all of them required, so the two databases find the same messages. Titles, a
user's few hundred short strings at most, are matched word by word, case-insensitively.

Only the user's own sessions of the app are searched, and only the history as it stands:
events a rewind took out are left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from django.db import connection
from django.db.models import Q

from sessions_app.models import SessionRecord

MAX_QUERY_CHARS = 200
MAX_QUERY_WORDS = 12
MESSAGE_HITS = 20
TITLE_HITS = 10
SNIPPET_BEFORE = 60
SNIPPET_CHARS = 180
WORD = re.compile(r"\w+")

_PG_TSVECTOR = (
    "jsonb_to_tsvector('simple'::regconfig, "
    "jsonb_path_query_array(event.content::jsonb, '$.parts[*].text'), '[\"string\"]')"
)
_PG_MESSAGES = (
    "SELECT event.session_id, event.event_id, event.author, event.timestamp, "
    "event.content::text, session.title FROM sessions_app_eventrecord AS event "
    "JOIN sessions_app_sessionrecord AS session ON session.id = event.session_id "
    f"WHERE event.content IS NOT NULL AND {_PG_TSVECTOR} @@ to_tsquery('simple', %s) "
    "AND session.user_id = %s AND session.app_name = %s AND NOT event.rewound "
    "ORDER BY event.timestamp DESC LIMIT %s"
)
_SQLITE_MESSAGES = (
    "SELECT event.session_id, event.event_id, event.author, event.timestamp, "
    "event.content, session.title FROM sessions_app_event_search AS found "
    "JOIN sessions_app_eventrecord AS event ON event.id = found.rowid "
    "JOIN sessions_app_sessionrecord AS session ON session.id = event.session_id "
    "WHERE sessions_app_event_search MATCH %s "
    "AND session.user_id = %s AND session.app_name = %s AND NOT event.rewound "
    "ORDER BY event.timestamp DESC LIMIT %s"
)


@dataclass(frozen=True)
class SearchHit:
    """A chat that matched: by its title (``event_id`` None) or by one of its messages."""

    session_id: str
    title: str
    event_id: str | None
    author: str
    snippet: str
    timestamp: float


def search_words(query: str) -> list[str]:
    """The words of a query as they are searched: letters and digits, lower-cased, at most
    ``MAX_QUERY_WORDS``; the operators of either database's query syntax never get through."""
    return [word.lower() for word in WORD.findall(query)][:MAX_QUERY_WORDS]


def _text(content: object) -> str:
    if isinstance(content, str):
        content = json.loads(content)
    if not isinstance(content, dict):
        return ""
    parts = content.get("parts") or []
    return " ".join(
        part["text"]
        for part in parts
        if isinstance(part, dict) and isinstance(part.get("text"), str) and not part.get("thought")
    )


def _snippet(text: str, words: list[str]) -> str:
    """The part of ``text`` around the first word found, on one line."""
    flat = " ".join(text.split())
    lowered = flat.lower()
    found = [index for index in (lowered.find(word) for word in words) if index >= 0]
    start = max(0, min(found, default=0) - SNIPPET_BEFORE)
    piece = flat[start : start + SNIPPET_CHARS]
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(flat) else "")


def _message_rows(*, words: list[str], user_pk: int, app_name: str) -> list[tuple]:
    if connection.vendor == "postgresql":
        sql, match = _PG_MESSAGES, " & ".join(f"{word}:*" for word in words)
    else:
        sql, match = _SQLITE_MESSAGES, " ".join(f'"{word}"*' for word in words)
    with connection.cursor() as cursor:
        cursor.execute(sql, [match, user_pk, app_name, MESSAGE_HITS])
        return cursor.fetchall()


def chats_search(*, user_pk: int, app_name: str, query: str) -> list[SearchHit]:
    """The user's chats of ``app_name`` whose title or messages hold every word of ``query``
    (as word prefixes): title hits first, most recently updated first, then message hits,
    newest first. An empty list for a query with no words."""
    words = search_words(query)
    if not words:
        return []
    title_filter = Q(user_id=user_pk, app_name=app_name)
    for word in words:
        title_filter &= Q(title__icontains=word)
    titled = SessionRecord.objects.filter(title_filter).order_by("-last_update_time")[:TITLE_HITS]
    hits = [
        SearchHit(
            session_id=session.id,
            title=session.title,
            event_id=None,
            author="",
            snippet=session.title,
            timestamp=session.last_update_time,
        )
        for session in titled
    ]
    for session_id, event_id, author, timestamp, content, title in _message_rows(
        words=words, user_pk=user_pk, app_name=app_name
    ):
        hits.append(
            SearchHit(
                session_id=session_id,
                title=title,
                event_id=event_id,
                author=author,
                snippet=_snippet(_text(content), words),
                timestamp=timestamp,
            )
        )
    return hits
