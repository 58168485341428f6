"""Search across one user's chats: their titles and the text of their messages.

Messages are found by the database's full-text search over the events' text parts: PostgreSQL's
stored ``search_vector`` column (``jsonb_to_tsvector``, migration 0012), SQLite's FTS5 table
(migration 0008) on the embedded default. On PostgreSQL each event carries its session's owner
(user and app, migration 0013), so a user's newest matches of a word are read from that user's
rows alone, in two steps (``_PG_NEWEST``): among their newest events when enough of those
match, else from all their matches through the GIN index over (owner, words). Both index the
words as they are (the ``simple`` configuration and FTS5's ``unicode61``); each word of the
query is reduced to its English stem (snowballstemmer, the same on both databases) and matches
the words starting with it, all of them required, so "winery" finds "wineries" and "walked"
finds "walking" on both. Titles, a user's few hundred short strings at most, are matched the
same way in Python.

Results come one per chat (its title if it matched, else its newest matching message), with
the character ranges of the words that matched, for the page to highlight.

Only the user's own sessions of the app are searched, and only the history as it stands:
events a rewind took out are left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cache

import snowballstemmer
from django.db import connection, transaction

from sessions_app.models import SessionRecord

MAX_QUERY_CHARS = 200
MAX_QUERY_WORDS = 12
MESSAGE_HITS = 20
TITLE_HITS = 10
SNIPPET_BEFORE = 60
SNIPPET_CHARS = 180
WORD = re.compile(r"\w+")

_PG_MESSAGES = (
    "WITH {newest} SELECT session.session_id, event.event_id, event.author, event.timestamp, "
    "event.content::text, session.title FROM newest "
    "JOIN sessions_app_eventrecord AS event ON event.id = newest.id "
    'JOIN sessions_app_sessionrecord AS session ON session."key" = event.session_id '
    "ORDER BY event.timestamp DESC, event.id DESC LIMIT %(hits)s"
)
_SQLITE_MESSAGES = (
    "SELECT session.session_id, event.event_id, event.author, event.timestamp, "
    "event.content, session.title FROM sessions_app_event_search AS found "
    "JOIN sessions_app_eventrecord AS event ON event.id = found.rowid "
    'JOIN sessions_app_sessionrecord AS session ON session."key" = event.session_id '
    "WHERE sessions_app_event_search MATCH %s "
    "AND session.user_id = %s AND session.app_name = %s AND NOT event.rewound "
    "AND NOT session.memory_only AND NOT session.temporary "
    "ORDER BY event.timestamp DESC LIMIT %s"
)


@dataclass(frozen=True)
class SearchHit:
    """A chat that matched: by its title (``event_id`` None) or by one of its messages.

    ``title_marks`` and ``snippet_marks`` are the [start, end) character ranges of the matching
    words in ``title`` and ``snippet``."""

    session_id: str
    title: str
    event_id: str | None
    author: str
    snippet: str
    timestamp: float
    title_marks: list[tuple[int, int]] = field(default_factory=list)
    snippet_marks: list[tuple[int, int]] = field(default_factory=list)


@cache
def _stemmer():
    return snowballstemmer.stemmer("english")


def search_words(query: str) -> list[tuple[str, ...]]:
    """The words of a query as they are searched, each as its forms: the word lower-cased and,
    when it differs, its English stem (letters and digits only, at most ``MAX_QUERY_WORDS``
    words; the operators of either database's query syntax never get through)."""
    words = [word.lower() for word in WORD.findall(query)][:MAX_QUERY_WORDS]
    stems = _stemmer().stemWords(words)
    return [
        (word, stem) if stem and stem != word else (word,)
        for word, stem in zip(words, stems, strict=True)
    ]


def _starts_with_a_form(word: str, words: list[tuple[str, ...]]) -> bool:
    return any(word.startswith(form) for forms in words for form in forms)


def word_marks(text: str, words: list[tuple[str, ...]]) -> list[tuple[int, int]]:
    """The ranges of the words of ``text`` that start with a form of a query word."""
    return [
        match.span()
        for match in WORD.finditer(text)
        if _starts_with_a_form(match.group().lower(), words)
    ]


def _holds_all(text: str, words: list[tuple[str, ...]]) -> bool:
    found = {word.lower() for word in WORD.findall(text)}
    return all(any(word.startswith(form) for word in found for form in forms) for forms in words)


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


def _snippet(text: str, words: list[tuple[str, ...]]) -> str:
    """The part of ``text`` around the first word found, on one line."""
    flat = " ".join(text.split())
    found = [start for start, _end in word_marks(flat, words)[:1]]
    start = max(0, min(found, default=0) - SNIPPET_BEFORE)
    piece = flat[start : start + SNIPPET_CHARS]
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(flat) else "")


# A query (``to_tsquery('simple', ...)`` text) as the entries of an owner's words index
# (``sessions_app_owner_words``, migration 0014) name its words: each prefixed with the owner,
# phrases made plain conjunctions (the index keeps no positions). Memories are indexed so too.
PG_OWNED_QUERY = (
    "regexp_replace(regexp_replace(to_tsquery('simple', {query})::text, '<[^>]*>', '&', 'g'), "
    "'''([^'']+)''', '''' || {owner} || '_\\1''', 'g')::tsquery"
)


# One user's newest events of an app holding each of some words (tsqueries), in two steps
# (docs/benchmarks.md, "The owner on each event"). First among the user's ``RECENT_EVENTS``
# newest events, read once for all the words through ``event_owner_recent``: a word that
# ``per_word`` of them hold has its newest matches there. Only for the other words are all
# the user's matches read, through ``event_owner_words`` (migration 0013), a GIN index whose
# entries are the words prefixed with the event's user, so that other people's entries of a
# word are never read; each match is checked again against the event's own words
# (``search_vector``), whose positions the index's entries lack (so a word the parser splits,
# "tea_time", a phrase, is looked up there as all of its parts). Both steps keep what is
# searched: the text events, not rewound, of the chats not ``hidden`` (temporary, memory-only,
# or the one searched from) and, unless ``summaries``, not compaction summaries.
RECENT_EVENTS = 2000
_PG_NEWEST = (
    'hidden AS (SELECT session."key" FROM sessions_app_sessionrecord AS session '
    "WHERE session.user_id = %(user)s AND session.app_name = %(app)s "
    'AND (session.temporary OR session.memory_only OR session."key" = %(searched_from)s)), '
    "words AS (SELECT word.number, to_tsquery('simple', word.query) AS plain, "
    + PG_OWNED_QUERY.format(query="word.query", owner="%(user)s")
    + " AS owned "
    "FROM unnest(%(queries)s::text[]) WITH ORDINALITY AS word(query, number)), "
    "recent AS MATERIALIZED (SELECT newest.id, newest.timestamp, newest.search_vector FROM ("
    "SELECT event.id, event.timestamp, event.search_vector, event.rewound, event.author, "
    "event.session_id FROM sessions_app_eventrecord AS event "
    "WHERE event.user_id = %(user)s AND event.app_name = %(app)s AND event.content IS NOT NULL "
    "ORDER BY event.timestamp DESC, event.id DESC LIMIT %(recent)s) AS newest "
    "WHERE {newest_kept} AND newest.search_vector @@ to_tsquery('simple', %(any_word)s)), "
    "first_step AS MATERIALIZED (SELECT words.number, found.id, found.timestamp FROM words "
    "CROSS JOIN LATERAL (SELECT recent.id, recent.timestamp FROM recent "
    "WHERE recent.search_vector @@ words.plain "
    "ORDER BY recent.timestamp DESC, recent.id DESC LIMIT %(per_word)s) AS found), "
    "second_step AS (SELECT words.number, found.id, found.timestamp FROM words "
    "CROSS JOIN LATERAL (SELECT matched.id, matched.timestamp "
    "FROM (SELECT event.id, event.timestamp "
    "FROM sessions_app_eventrecord AS event "
    "WHERE sessions_app_owner_words(event.user_id, event.search_vector) @@ words.owned "
    "AND event.search_vector @@ words.plain AND event.user_id = %(user)s "
    "AND event.app_name = %(app)s AND event.content IS NOT NULL AND {event_kept} "
    "OFFSET 0) AS matched "
    "ORDER BY matched.timestamp DESC, matched.id DESC LIMIT %(per_word)s) AS found "
    "WHERE words.number <= %(reaching_back)s "
    "AND (SELECT count(*) FROM first_step WHERE first_step.number = words.number) "
    "< %(exact)s), "
    "newest AS (SELECT placed.id, min(placed.place) AS place FROM (SELECT step.id, "
    "row_number() OVER (PARTITION BY step.number ORDER BY step.timestamp DESC, step.id DESC) "
    "AS place FROM (SELECT * FROM first_step UNION SELECT * FROM second_step) AS step) "
    "AS placed GROUP BY placed.id)"
)


def _pg_kept(event: str, *, summaries: bool) -> str:
    kept = f'NOT {event}.rewound AND {event}.session_id NOT IN (SELECT hidden."key" FROM hidden)'
    return kept if summaries else f"{kept} AND {event}.author <> 'system'"


def _pg_newest(
    *,
    user_pk: int,
    app_name: str,
    queries: list[str],
    per_word: int,
    summaries: bool,
    searched_from: str | None = None,
    exact: int | None = None,
    reaching_back: int | None = None,
) -> tuple[str, dict[str, object]]:
    """The CTEs ending with ``newest``: the ids of the user's ``per_word`` newest events of
    the app holding each of ``queries`` (``to_tsquery`` texts), each with its ``place``, the
    best of its ranks (1 for a word's newest match) among the matches of a word, and their
    named parameters.
    Compaction summaries (author ``system``) are among them only with ``summaries``; the
    chat ``searched_from`` never is. ``exact`` (default ``per_word``): how many of a word's
    newest matches must be its newest in the whole history; a word the newest events hold
    that often takes the rest of its ``per_word`` from them too, without reading all of its
    matches through the second step (a search's time grows with those reads).
    ``reaching_back`` (default all): only the first that many of ``queries`` are looked for
    beyond the newest events; the others (words a query relates to, not its own) among the
    newest alone.

    The statement is the same whatever the number of words, so it is planned once per search
    (the second step's ``OFFSET 0`` keeps the planner from walking a user's whole history
    newest first for a rare word: the first step did that, over the newest events only)."""
    sql = _PG_NEWEST.format(
        newest_kept=_pg_kept("newest", summaries=summaries),
        event_kept=_pg_kept("event", summaries=summaries),
    )
    params: dict[str, object] = {
        "user": user_pk,
        "app": app_name,
        "searched_from": searched_from or "",
        "queries": queries,
        "any_word": " | ".join(f"({query})" for query in queries),
        "recent": RECENT_EVENTS,
        "per_word": per_word,
        "exact": per_word if exact is None else min(exact, per_word),
        "reaching_back": len(queries) if reaching_back is None else reaching_back,
    }
    return sql, params


def _pg_rows(sql: str, params: dict[str, object]) -> list[tuple]:
    """The rows of a search statement (``_pg_newest``), PostgreSQL's JIT compilation off for it.

    The second step's estimate for a word's matches is the planner's default share of a table
    (it cannot know the word when planning the lateral join), so on a large table the plan's
    estimated cost passes ``jit_above_cost`` and PostgreSQL compiles it: 60-80 ms here for a
    statement that runs in 25 (4.2 million events, docs/benchmarks.md). ``SET LOCAL`` lasts
    to the end of the transaction: this statement's own, or the caller's when it has one."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL jit = off")
        cursor.execute(sql, params)
        return cursor.fetchall()


def _message_rows(*, words: list[tuple[str, ...]], user_pk: int, app_name: str) -> list[tuple]:
    if connection.vendor == "postgresql":
        match = " & ".join("(" + " | ".join(f"{form}:*" for form in forms) + ")" for forms in words)
        newest, params = _pg_newest(
            user_pk=user_pk,
            app_name=app_name,
            queries=[match],
            per_word=MESSAGE_HITS,
            summaries=True,
        )
        params["hits"] = MESSAGE_HITS
        return _pg_rows(_PG_MESSAGES.format(newest=newest), params)
    match = " AND ".join("(" + " OR ".join(f'"{form}"*' for form in forms) + ")" for forms in words)
    with connection.cursor() as cursor:
        cursor.execute(_SQLITE_MESSAGES, [match, user_pk, app_name, MESSAGE_HITS])
        return cursor.fetchall()


def chats_search(*, user_pk: int, app_name: str, query: str) -> list[SearchHit]:
    """The user's chats of ``app_name`` (temporary ones left out: reachable by their link
    only) whose title or messages hold every word of ``query``
    (by their stems), one hit per chat: chats whose title matches first, most recently updated
    first, then chats by their newest matching message. An empty list for a query with no
    words."""
    words = search_words(query)
    if not words:
        return []
    hits: dict[str, SearchHit] = {}
    sessions = SessionRecord.objects.filter(
        user_id=user_pk, app_name=app_name, memory_only=False, temporary=False
    ).exclude(title="")
    sessions = sessions.order_by("-last_update_time").only(
        "session_id", "title", "last_update_time"
    )
    for session in sessions:
        if len(hits) < TITLE_HITS and _holds_all(session.title, words):
            hits[session.session_id] = SearchHit(
                session_id=session.session_id,
                title=session.title,
                event_id=None,
                author="",
                snippet="",
                timestamp=session.last_update_time,
                title_marks=word_marks(session.title, words),
            )
    for session_id, event_id, author, timestamp, content, title in _message_rows(
        words=words, user_pk=user_pk, app_name=app_name
    ):
        if session_id in hits:
            continue
        snippet = _snippet(_text(content), words)
        hits[session_id] = SearchHit(
            session_id=session_id,
            title=title,
            event_id=event_id,
            author=author,
            snippet=snippet,
            timestamp=timestamp,
            title_marks=word_marks(title, words),
            snippet_marks=word_marks(snippet, words),
        )
    return list(hits.values())


_PG_MATCHES = (
    "SELECT event.session_id, event.sequence, newest.place FROM newest "
    "JOIN sessions_app_eventrecord AS event ON event.id = newest.id"
)
_SQLITE_WORD_MATCHES = (
    "SELECT event.session_id, event.sequence, "
    "row_number() OVER (ORDER BY event.timestamp DESC, event.id DESC) AS place "
    "FROM sessions_app_event_search AS found "
    "JOIN sessions_app_eventrecord AS event ON event.id = found.rowid "
    'JOIN sessions_app_sessionrecord AS session ON session."key" = event.session_id '
    "WHERE sessions_app_event_search MATCH %s "
    "AND session.user_id = %s AND session.app_name = %s AND NOT session.temporary "
    "AND NOT session.memory_only "
    "AND session.\"key\" <> %s AND NOT event.rewound AND event.author <> 'system' "
    "ORDER BY event.timestamp DESC, event.id DESC LIMIT %s"
)
_TURN_WINDOWS = (
    "WITH {ctes}found AS ({matches}), shift(step) AS (VALUES {steps}), "
    "spots AS (SELECT DISTINCT found.session_id, found.sequence + shift.step AS sequence "
    "FROM found CROSS JOIN shift WHERE shift.step = 0 OR found.place <= {windowed}) "
    "SELECT event.id, event.session_id, event.sequence, event.timestamp, event.author, "
    "{content}, {metadata}, "
    "(SELECT coalesce(sum(session.last_sequence), 0) FROM sessions_app_sessionrecord AS session "
    "WHERE session.user_id = {user} AND session.app_name = {app} AND NOT session.temporary "
    "AND NOT session.memory_only) "
    "FROM spots JOIN sessions_app_eventrecord AS event "
    "ON event.session_id = spots.session_id AND event.sequence = spots.sequence "
    "WHERE event.content IS NOT NULL AND NOT event.rewound AND event.author <> 'system'"
)


@dataclass(frozen=True)
class TurnWindows:
    """Events around the matches of a search in one user's chats (see :func:`turn_windows`):
    rows of (event pk, session key, sequence, timestamp, author, content, custom metadata),
    in chat and sequence order, the chats in the order of their first row (``chats_ordered``),
    and ``events``, how many events the chats searched hold (the size of the collection the
    rows were drawn from)."""

    rows: list[tuple]
    events: int


def word_match(forms: tuple[str, ...], vendor: str) -> str:
    """A word's match in a database's full-text syntax: any of its forms, as a prefix."""
    if vendor == "postgresql":
        return " | ".join(f"{form}:*" for form in forms)
    return " OR ".join(f'"{form}"*' for form in forms)


def turn_windows(
    *,
    user_pk: int,
    app_name: str,
    words: list[tuple[str, ...]],
    per_word: int,
    before: int,
    after: int,
    windowed: int | None = None,
    session_key: str | None = None,
    related_from: int | None = None,
) -> TurnWindows:
    """The user's events of the app around those holding one of ``words`` (each word as its
    forms, any of which matches the words starting with it), in one statement through the
    full-text index (module docstring).

    Each word brings its ``per_word`` most recent matching events, so a rare word's matches are
    all there and a common one's bounded; each match brings the events from ``before`` before
    it to ``after`` after it in its chat (what it answers, its neighbours); with ``windowed``,
    only a word's ``windowed`` newest matches do, the older ones up to ``per_word`` come alone
    (an old match is found for its own words at a third of the rows). On PostgreSQL a word
    that the person's newest events hold ``windowed`` times takes its older matches from
    those events alone (``_pg_newest``'s ``exact``): its newest matches, the ones read with
    their neighbours, are exact either way; and the words from ``related_from`` on (those a
    query relates to, after its own) are looked for among those newest events alone, so that
    an expansion never makes a search read all of a word's matches. Only the text events
    of the user's chats of the app as they stand are read: not temporary, not the chat
    ``session_key`` (the one searched from), not rewound, not compaction summaries. What is read
    grows with the words and ``per_word``, never with the history.

    Forms must be letters and digits only (as ``search_words`` and ``tokenize`` make them): they
    are written into each database's match syntax.
    """
    words = [forms for forms in words if forms]
    if not words:
        return TurnWindows(rows=[], events=0)
    steps = ", ".join(f"({step})" for step in range(-before, after + 1))
    windowed = per_word if windowed is None else windowed
    params: list[object] | dict[str, object]
    if connection.vendor == "postgresql":
        newest, params = _pg_newest(
            user_pk=user_pk,
            app_name=app_name,
            queries=[word_match(forms, "postgresql") for forms in words],
            per_word=per_word,
            summaries=False,
            searched_from=session_key,
            exact=windowed,
            reaching_back=related_from,
        )
        sql = _TURN_WINDOWS.format(
            ctes=f"{newest}, ",
            matches=_PG_MATCHES,
            steps=steps,
            windowed="%(windowed)s",
            content="event.content::text",
            metadata="event.custom_metadata::text",
            user="%(user)s",
            app="%(app)s",
        )
        params["windowed"] = windowed
        fetched = _pg_rows(sql, params)
    else:
        params = []
        for forms in words:
            params += [word_match(forms, "sqlite"), user_pk, app_name, session_key or "", per_word]
        params += [windowed, user_pk, app_name]
        sql = _TURN_WINDOWS.format(
            ctes="",
            matches=" UNION ALL ".join(
                f"SELECT * FROM ({_SQLITE_WORD_MATCHES}) AS word_{number}"
                for number in range(len(words))
            ),
            steps=steps,
            windowed="%s",
            content="event.content",
            metadata="event.custom_metadata",
            user="%s",
            app="%s",
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            fetched = cursor.fetchall()
    rows = [
        (pk, key, sequence, timestamp, author, _json(content), _json(metadata))
        for pk, key, sequence, timestamp, author, content, metadata, _events in fetched
    ]
    return TurnWindows(rows=chats_ordered(rows), events=int(fetched[0][-1]) if fetched else 0)


def chats_ordered(rows: list[tuple]) -> list[tuple]:
    """``rows`` as :class:`TurnWindows` holds them, in chat and sequence order, the chats in the
    order of their first row's time, then of their key. A ranking that breaks ties by a row's
    place then ranks the same rows alike in every database holding them: chat keys are
    random, so ordered by key alone, two copies of one history ranked differently."""
    began: dict[str, float] = {}
    for _pk, key, _sequence, timestamp, *_rest in rows:
        began[key] = min(began.get(key, timestamp), timestamp)
    return sorted(rows, key=lambda row: (began[row[1]], row[1], row[2]))


def _json(value: object) -> object:
    return json.loads(value) if isinstance(value, str) else value
