"""Search of a person's past conversations: their own stored turns, a second source beside
memories, never stored as memories.

The documents are the user-authored events of the user's chats in an app, as the session store
holds them now: not rewound, in a chat that is not temporary. Each process keeps a
:class:`~memory_app.ranking.MemoryIndex` of them per (app, user, embedder), ranked as memories
are (BM25 with stemming and query expansion, names and speakers, neighbouring turns, MiniLM
when configured), and each turn also by the question it answers when the turn before it (the
assistant's reply, or another speaker's turn) ends with one. It is checked on every search
against the chats' ``last_sequence``: every append, rewind (an edit is one) bumps it in the
transaction that writes the events, and a deleted chat is gone from the list (a chat made
again under the same id has a new creation time, also checked), so a search never ranks a chat
by an old copy of it. The turns chosen are then read again from the database, so nothing
deleted or rewound a moment ago is returned even by a search racing the change.

Any door (the agent's tool and preload, later the MCP server) calls
:func:`past_conversations_search`, which applies the person's choices itself.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings

from memory_app.embedding import embedder_get
from memory_app.extraction.offline.sentences import sentences_split
from memory_app.models import MemorySettings
from memory_app.ranking import MemoryIndex, Origin, tokenize
from memory_app.selectors.generation import content_text
from memory_app.selectors.search import NAME_WEIGHT, NEIGHBOUR_WEIGHT, SPEAKER_WEIGHT
from sessions_app.models import EventRecord, SessionRecord

EXCERPT_CHARS = 300
# Fewer index terms than this and a turn says nothing worth finding again ("ok", "thanks!").
DETAIL_MIN_TERMS = 3
# A turn that says something (see _turn_prior) counts this much more than one that asks or
# greets, and only such turns are one another's neighbours (a question's neighbour bonus went
# to the question, not to the turns around the answer): chosen on the LoCoMo dev split
# (docs/benchmarks.md, "Past conversations (issue 26)").
PRIOR_WEIGHT = 0.1
# A turn is also found by the question it answers ("Where are you flying?" before "Lisbon, for
# a conference."), a match there counting this much of one in the turn's own words: 0.2-0.4
# measured alike on the LoCoMo dev split (docs/benchmarks.md, "Past conversations (issue 26)").
QUESTION_WEIGHT = 0.3


@dataclass(frozen=True)
class PastTurn:
    """A turn of a past chat that matched, with where it was said: the chat (id and title) and
    the event, and when; ``asked`` is the question it answers ("" when none), without which a
    short answer ("Lisbon, for a conference.") says little."""

    session_id: str
    event_id: str
    title: str
    said_at: datetime
    excerpt: str
    score: float
    speaker: str = ""
    asked: str = ""


@dataclass
class _PastIndex:
    """One user's indexed turns, valid for the chats' (``last_sequence``, creation time) in
    ``sessions``."""

    index: MemoryIndex
    sessions: dict[str, tuple] = field(default_factory=dict)
    turns: dict[int, str] = field(default_factory=dict)  # event pk -> its chat
    questions: dict[int, str] = field(default_factory=dict)  # event pk -> the question it answers
    by_session: dict[str, list[int]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


_indexes: OrderedDict[tuple[str, int, str], _PastIndex] = OrderedDict()
_indexes_lock = threading.Lock()


def past_conversations_allowed(*, user_pk: int, session_id: str | None = None) -> bool:
    """Whether replies to the user may search their past chats: memory use and "Reference past
    chats" both on (the default), and never from a temporary chat or another user's."""
    row = (
        MemorySettings.objects.filter(user_id=user_pk)
        .values_list("use_enabled", "past_chats_enabled")
        .first()
    )
    if row is not None and not all(row):
        return False
    if session_id is None:
        return True
    return SessionRecord.objects.filter(pk=session_id, user_id=user_pk, temporary=False).exists()


def _date_words(moment: datetime) -> str:
    return f"{moment.day} {moment:%B %Y}"


def _indexed_text(*, text: str, speaker: str, said_at: datetime) -> str:
    """What a turn is found by: its date and speaker (a transcript names them) and its words."""
    who = f"{speaker}: " if speaker else ""
    return f"[{_date_words(said_at)}] {who}{text}"


def _turn_prior(text: str) -> float:
    """1 for a turn that says something (at least ``DETAIL_MIN_TERMS`` index terms, not
    questions alone), 0 for a greeting, a thanks or a question, which rarely hold what a
    person looks for in their past chats."""
    if len(tokenize(text)) < DETAIL_MIN_TERMS:
        return 0.0
    sentences = [s for s in sentences_split(text) if s.strip()]
    return 0.0 if all(s.rstrip().endswith("?") for s in sentences) else 1.0


def _speaker(metadata: object) -> str:
    speaker = metadata.get("speaker") if isinstance(metadata, dict) else None
    return " ".join(speaker.split()) if isinstance(speaker, str) else ""


def _question_asked(text: str) -> str:
    """The question ``text`` ends with ("Nice! Where are you flying?" -> "Where are you
    flying?"), or "" when it ends otherwise."""
    sentences = [s.strip() for s in sentences_split(text) if s.strip()]
    return sentences[-1] if sentences and sentences[-1].endswith("?") else ""


def _turn_rows(session_ids: list[str]):
    """The events of the chats that hold words (the user's turns, and the replies and other
    speakers' turns they may answer), in order; compaction summaries are no one's turn."""
    return (
        EventRecord.objects.filter(session_id__in=session_ids, rewound=False, content__isnull=False)
        .exclude(author="system")
        .order_by("session_id", "sequence")
        .values_list(
            "pk", "session_id", "sequence", "timestamp", "author", "content", "custom_metadata"
        )
    )


def _refresh(entry: _PastIndex, *, current: dict[str, tuple], keep: str | None) -> None:
    """Bring ``entry`` to the chats of ``current``: chats gone (deleted, now temporary) are
    dropped, changed and new ones read again; ``keep`` (the chat searched from, left out of
    ``current``) stays as it was, to be filtered out at search time."""
    stale = [
        session_id
        for session_id, version in entry.sessions.items()
        if current.get(session_id) != version and session_id != keep
    ]
    fresh = [
        session_id
        for session_id, version in current.items()
        if entry.sessions.get(session_id) != version
    ]
    for session_id in {*stale, *fresh}:
        for pk in entry.by_session.pop(session_id, []):
            entry.index.remove(doc_id=pk)
            entry.turns.pop(pk, None)
            entry.questions.pop(pk, None)
        entry.sessions.pop(session_id, None)
    ids, texts, origins, priors, questions = [], [], [], [], []
    before: tuple[str, str, str, str] = ("", "", "", "")  # chat, author, speaker, text
    for start in range(0, len(fresh), 200):
        for pk, session_id, sequence, timestamp, author, content, metadata in _turn_rows(
            fresh[start : start + 200]
        ).iterator(chunk_size=2000):
            text = " ".join(content_text(content).split())
            if not text:
                continue
            speaker = _speaker(metadata)
            asked_by_another = before[0] == session_id and before[1:3] != (author, speaker)
            question = _question_asked(before[3]) if asked_by_another else ""
            before = (session_id, author, speaker, text)
            if author != "user":
                continue
            said_at = datetime.fromtimestamp(timestamp, tz=UTC)
            ids.append(pk)
            texts.append(_indexed_text(text=text, speaker=speaker, said_at=said_at))
            questions.append(question)
            priors.append(_turn_prior(text))
            origins.append(
                Origin(conversation=session_id, position=sequence, speaker=speaker, whole_turn=True)
                if priors[-1]
                else None
            )
            entry.turns[pk] = session_id
            if question:
                entry.questions[pk] = question
            entry.by_session.setdefault(session_id, []).append(pk)
    if ids:
        entry.index.add_many(
            doc_ids=ids, texts=texts, origins=origins, priors=priors, contexts=questions
        )
    for session_id in fresh:
        entry.sessions[session_id] = current[session_id]


def _index_get(*, app_name: str, user_pk: int) -> _PastIndex:
    """The process's index of the user's turns in the app, as last refreshed (new: empty);
    as many are kept as of memory indexes (``MEMORY_INDEX_CACHE_SIZE``)."""
    embedder = embedder_get()
    key = (app_name, user_pk, embedder.name)
    with _indexes_lock:
        entry = _indexes.get(key)
        if entry is None:
            entry = _PastIndex(index=MemoryIndex(embedder=embedder))
            _indexes[key] = entry
        _indexes.move_to_end(key)
        while len(_indexes) > settings.MEMORY_INDEX_CACHE_SIZE:
            _indexes.popitem(last=False)
    return entry


def past_index_cache_drop(*, user_pk: int) -> None:
    """Forget this process's index of the user's past turns, with the texts it holds."""
    with _indexes_lock:
        for key in [key for key in _indexes if key[1] == user_pk]:
            del _indexes[key]


def past_conversations_search(
    *,
    app_name: str,
    user_pk: int,
    query: str,
    session_id: str | None = None,
    limit: int = 5,
    choices_read: bool = False,
) -> list[PastTurn]:
    """The ``limit`` turns the user said in their past chats of the app most relevant to
    ``query``, best first, each with its chat's id and title, its event id and when it was said.

    ``session_id``: the chat searched from, whose turns are left out (they are in its history
    already); the search answers nothing from a temporary chat. Nothing either when the user
    turned memory use or "Reference past chats" off; ``choices_read`` says the caller has just
    read those choices for this chat and they allow the search (a turn's permissions), so
    they are not read again. Only the user's own chats are read, as they stand now (rewound
    turns, deleted and temporary chats left out).
    """
    if limit <= 0 or not query.strip():
        return []
    if not choices_read and not past_conversations_allowed(user_pk=user_pk, session_id=session_id):
        return []
    current = {
        chat: (sequence, created_at)
        for chat, sequence, created_at in SessionRecord.objects.filter(
            user_id=user_pk, app_name=app_name, temporary=False
        )
        .exclude(pk=session_id or "")
        .values_list("pk", "last_sequence", "created_at")
    }
    if not current:
        return []
    entry = _index_get(app_name=app_name, user_pk=user_pk)
    with entry.lock:
        _refresh(entry, current=current, keep=session_id)
        hidden = len(entry.by_session.get(session_id or "", []))
        ranked = entry.index.search(
            query=query,
            limit=limit + hidden,
            prior_weight=PRIOR_WEIGHT,
            expand=True,
            name_weight=NAME_WEIGHT,
            speaker_weight=SPEAKER_WEIGHT,
            neighbour_weight=NEIGHBOUR_WEIGHT,
            context_weight=QUESTION_WEIGHT,
        )
        chosen = [(r.doc_id, r.score) for r in ranked if entry.turns[r.doc_id] in current][:limit]
        asked = {pk: entry.questions[pk] for pk, _score in chosen if pk in entry.questions}
    return past_turns_read(app_name=app_name, user_pk=user_pk, scores=dict(chosen), asked=asked)


def past_turns_read(
    *, app_name: str, user_pk: int, scores: dict[int, float], asked: dict[int, str] | None = None
) -> list[PastTurn]:
    """The turns of ``scores`` (event pk -> score) that are still there now, read fresh, in the
    given order: the user's, not rewound, in a chat of the app that is not temporary; each with
    the question of ``asked`` (event pk -> question) it answers."""
    if not scores:
        return []
    rows = EventRecord.objects.filter(
        pk__in=list(scores),
        author="user",
        rewound=False,
        session__user_id=user_pk,
        session__app_name=app_name,
        session__temporary=False,
    ).values_list(
        "pk",
        "session__session_id",
        "event_id",
        "timestamp",
        "content",
        "custom_metadata",
        "session__title",
    )
    found = {}
    for pk, session_id, event_id, timestamp, content, metadata, title in rows:
        text = " ".join(content_text(content).split())
        if len(text) > EXCERPT_CHARS:
            text = text[: EXCERPT_CHARS - 1].rstrip() + "…"
        found[pk] = PastTurn(
            session_id=session_id,
            event_id=event_id,
            title=title,
            said_at=datetime.fromtimestamp(timestamp, tz=UTC),
            excerpt=text,
            score=scores[pk],
            speaker=_speaker(metadata),
            asked=(asked or {}).get(pk, ""),
        )
    return [found[pk] for pk in scores if pk in found]
