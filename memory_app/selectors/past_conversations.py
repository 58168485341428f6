"""Search of a person's past conversations: their own stored turns, a second source beside
memories, never stored as memories.

The documents are the user-authored events of the user's chats in an app, as the session store
holds them now: not rewound, in a chat that is not temporary. The database is the index: its
full-text index (sessions_app migrations 0008, 0012 and 0013, through
:func:`sessions_app.selectors.search.turn_windows`) finds the turns holding a word of the query
or of the words the query relates to, each word its most recent ``CANDIDATES_PER_WORD``
matches, and reads the ``WINDOWED_PER_WORD`` newest of them with the turns around them, in one
statement (the older ones alone). Only those are ranked here, in a
:class:`~memory_app.ranking.MemoryIndex` made for the search and dropped after it, as memories
are ranked (BM25 with stemming and query expansion, names and speakers,
neighbouring turns, priors), and each turn also by the question it answers when the turn
before it (the assistant's reply, or another speaker's turn) ends with one. BM25's document
frequencies are those of the turns read, exact for every word whose matches are all there;
its collection size is the person's whole history (:class:`~memory_app.ranking.BM25Index`).

With an embedder, the candidates' vectors stored once in the background (``TurnVector``, see
:mod:`memory_app.selectors.turn_vectors`) give the semantic score, read in one query; only the
query is embedded, and only when a candidate has a vector to compare it with. Where PostgreSQL
has pgvector, the person's turns nearest the query through the HNSW index join the candidates
(``SEMANTIC_CANDIDATES``), so a turn saying the same in other words is found too.

No process builds or keeps anything of a person's history, so any process answers anyone as
fast, and what a search reads grows with the turns its words match, not with the history. A
deleted or edited chat is gone from results at once: the database answers each search. The
turns chosen are read again at the end, so nothing deleted or rewound a moment ago is returned
even by a search racing the change.

Any door (the agent's tool and preload, the MCP server) calls
:func:`past_conversations_search`, which applies the person's choices itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from memory_app.embedding import SearchEmbedder, embedder_get
from memory_app.extraction.offline.sentences import sentences_split
from memory_app.models import MemorySettings
from memory_app.ranking import Embedder, MemoryIndex, Origin, tokenize
from memory_app.selectors.generation import content_text
from memory_app.selectors.search import (
    NAME_WEIGHT,
    NEIGHBOUR_WEIGHT,
    SPEAKER_WEIGHT,
    query_candidate_words,
)
from memory_app.selectors.turn_vectors import pgvector_enabled, turn_vectors_read, turns_nearest
from sessions_app.models import EventRecord, SessionRecord
from sessions_app.selectors.search import chats_ordered, turn_windows

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
# A turn that matches the question gains up to this much for the share of the question's words
# (each by its IDF) its chat holds: an answer spread over a chat ("my ankle injury" in one turn,
# the book read meanwhile in another) is found by the chat's words together. Chosen on the LoCoMo
# dev split, 0.05-0.3 measured (docs/benchmarks.md, "The words a chat holds together").
CHAT_WEIGHT = 0.1
# A turn gains up to this much for the share of the question's words (each by its IDF) it holds
# itself, in its words or the question it answers: the turn saying two parts of the question
# above one repeating a single part, which BM25's term-by-term sum can rank alike. Chosen on
# the LoCoMo dev split, the middle of 0.03-0.05, which rank alike there (docs/benchmarks.md,
# "The share of the question a turn holds").
COVERAGE_WEIGHT = 0.04
# The database's candidates (docs/benchmarks.md, "Past conversations searched by the
# database"): each word of the query, then each word it relates to, up to CANDIDATE_WORDS
# words (``query_candidate_words``), brings its CANDIDATES_PER_WORD most recent matching
# events, the WINDOWED_PER_WORD newest of them each with the events from WINDOW_BEFORE before
# it to WINDOW_AFTER after it (the question it answers, its neighbours, in a person's chat or a
# transcript of two speakers), the older ones alone: an answer spread over old chats keeps its
# older turns against the newest matches of a common word, at a third of the rows a windowed
# match costs (docs/benchmarks.md, "Multi-hop: how many candidates a word brings"). On
# PostgreSQL the words a query relates to are looked for among the person's newest events
# alone (``turn_windows``'s ``related_from``): an expansion reaching years back read all of a
# common word's matches, the slowest searches' time, and what was said long ago is what
# memories keep.
CANDIDATES_PER_WORD = 60
WINDOWED_PER_WORD = 15
WINDOW_BEFORE = 1
WINDOW_AFTER = 1
# With an embedder, the share of a turn's score that its meaning's likeness to the question's
# (cosine) makes, the rest its words' (BM25): chosen with MiniLM on the LoCoMo dev split,
# 0.2-0.6 measured (docs/benchmarks.md, "Words of the same kin, irregular plurals and the
# turns' vectors").
SEMANTIC_WEIGHT = 0.4
# Where PostgreSQL has pgvector, the person's turns nearest the query through the HNSW index of
# their stored vectors join the full-text candidates, up to this many.
SEMANTIC_CANDIDATES = 20


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
class _Candidates:
    """The user turns a search ranks, in the index made for it, with the question each
    answers (event pk -> question)."""

    index: MemoryIndex
    questions: dict[int, str]


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


def _indexed_prefix(*, speaker: str, said_at: datetime) -> str:
    """What a turn is found by beside its words: its date and speaker (a transcript names
    them), written before them."""
    who = f"{speaker}: " if speaker else ""
    return f"[{_date_words(said_at)}] {who}"


def _turn_prior(text: str, *, terms: int) -> float:
    """1 for a turn that says something (at least ``DETAIL_MIN_TERMS`` index terms, of which
    ``text`` has ``terms``, not questions alone), 0 for a greeting, a thanks or a question,
    which rarely hold what a person looks for in their past chats."""
    if terms < DETAIL_MIN_TERMS:
        return 0.0
    if not text.rstrip().endswith("?"):  # its last sentence says something
        return 1.0
    sentences = [s for s in sentences_split(text) if s.strip()]
    return 0.0 if all(s.rstrip().endswith("?") for s in sentences) else 1.0


def _speaker(metadata: object) -> str:
    speaker = metadata.get("speaker") if isinstance(metadata, dict) else None
    return " ".join(speaker.split()) if isinstance(speaker, str) else ""


def _question_asked(text: str) -> str:
    """The question ``text`` ends with ("Nice! Where are you flying?" -> "Where are you
    flying?"), or "" when it ends otherwise."""
    if not text.rstrip().endswith("?"):  # the last sentence ends where the text does
        return ""
    sentences = [s.strip() for s in sentences_split(text) if s.strip()]
    return sentences[-1] if sentences and sentences[-1].endswith("?") else ""


def _semantic_vectors(
    event_pks: list[int], *, embedder: Embedder
) -> tuple[np.ndarray | None, list[bool] | None]:
    """Each candidate turn's stored vector of ``embedder``, in order, with which turns have one,
    for the semantic score of the ranking (``MemoryIndex`` blends it with the lexical one);
    (None, None) while none has, the ranking then lexical. One query; a search never embeds
    the turns it ranks (``memory_app.services.embeddings`` did, once)."""
    stored = turn_vectors_read(event_ids=event_pks, embedder_name=embedder.name)
    if not stored:
        return None, None
    dimension = len(next(iter(stored.values())))
    matrix = np.zeros((len(event_pks), dimension), dtype=np.float32)
    present = []
    for row, pk in enumerate(event_pks):
        vector = stored.get(pk)
        present.append(vector is not None and len(vector) == dimension)
        if present[-1]:
            matrix[row] = vector
    return matrix, present


def _nearest_rows(
    *,
    app_name: str,
    user_pk: int,
    query_vector: np.ndarray,
    embedder: Embedder,
    session_key: str | None,
    known: set[int],
) -> list[tuple]:
    """Where the database has pgvector, the rows (as :func:`turn_windows` gives them) of the
    person's turns nearest the query that the full-text candidates lack: a turn saying the
    same in other words. Read in one more query; none without pgvector."""
    nearest = turns_nearest(
        app_name=app_name,
        user_pk=user_pk,
        query_vector=query_vector,
        embedder_name=embedder.name,
        limit=SEMANTIC_CANDIDATES,
        exclude_session_key=session_key,
    )
    missing = [pk for pk, _similarity in nearest or [] if pk not in known]
    if not missing:
        return []
    return list(
        EventRecord.objects.filter(pk__in=missing).values_list(
            "pk", "session_id", "sequence", "timestamp", "author", "content", "custom_metadata"
        )
    )


def _candidates_rank(rows: list[tuple], *, events: int, embedder: Embedder) -> _Candidates:
    """The user turns among ``rows`` (events in chat and sequence order, see
    :func:`turn_windows`) in an index of their own, each found also by the question it
    answers, neighbours of the turns said next to them."""
    pks, texts, terms, origins, priors, contexts = [], [], [], [], [], []
    questions: dict[int, str] = {}
    before: tuple[str, int, str, str, str] = ("", 0, "", "", "")  # chat, sequence, author, ...
    stretch = 0
    for pk, session_key, sequence, timestamp, author, content, metadata in rows:
        text = " ".join(content_text(content).split())
        if not text:
            continue
        speaker = _speaker(metadata)
        adjacent = before[0] == session_key and sequence - before[1] <= WINDOW_BEFORE
        if not adjacent:
            stretch += 1  # rows read apart are no one's neighbours
        asked_by_another = adjacent and before[2:4] != (author, speaker)
        question = _question_asked(before[4]) if asked_by_another else ""
        before = (session_key, sequence, author, speaker, text)
        if author != "user":
            continue
        said_at = datetime.fromtimestamp(timestamp, tz=UTC)
        prefix = _indexed_prefix(speaker=speaker, said_at=said_at)
        own_terms = tokenize(text)
        pks.append(pk)
        texts.append(prefix + text)
        terms.append(tokenize(prefix) + own_terms)  # a word never spans the prefix's end
        contexts.append(question)
        priors.append(_turn_prior(text, terms=len(own_terms)))
        origins.append(
            Origin(
                conversation=f"{session_key}/{stretch}",
                chat=session_key,
                position=sequence,
                speaker=speaker,
                whole_turn=True,
            )
            if priors[-1]
            else None
        )
        if question:
            questions[pk] = question
    index = MemoryIndex(embedder=embedder, documents=events)
    if pks:
        vectors, has_vector = _semantic_vectors(pks, embedder=embedder)
        index.add_many(
            doc_ids=pks,
            texts=texts,
            vectors=vectors,
            vector_mask=has_vector if has_vector is not None else [False] * len(pks),
            origins=origins,
            priors=priors,
            contexts=contexts,
            tokens=terms,
        )
    return _Candidates(index=index, questions=questions)


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
    words, own_words = query_candidate_words(query)
    windows = turn_windows(
        user_pk=user_pk,
        app_name=app_name,
        words=words,
        related_from=own_words,
        per_word=CANDIDATES_PER_WORD,
        before=WINDOW_BEFORE,
        after=WINDOW_AFTER,
        windowed=WINDOWED_PER_WORD,
        session_key=session_id,
    )
    rows, query_vector = windows.rows, None
    embedder = SearchEmbedder(embedder_get())
    if embedder.name != "none" and pgvector_enabled():
        encoded = embedder.encode([query])
        query_vector = None if encoded is None else encoded[0]
    if query_vector is not None:
        rows = rows + _nearest_rows(
            app_name=app_name,
            user_pk=user_pk,
            query_vector=query_vector,
            embedder=embedder,
            session_key=session_id,
            known={row[0] for row in rows},
        )
        rows = chats_ordered(rows)
    candidates = _candidates_rank(rows, events=windows.events, embedder=embedder)
    ranked = candidates.index.search(
        query=query,
        query_vector=query_vector,
        limit=limit,
        semantic_weight=SEMANTIC_WEIGHT,
        prior_weight=PRIOR_WEIGHT,
        expand=True,
        name_weight=NAME_WEIGHT,
        speaker_weight=SPEAKER_WEIGHT,
        neighbour_weight=NEIGHBOUR_WEIGHT,
        context_weight=QUESTION_WEIGHT,
        chat_weight=CHAT_WEIGHT,
        coverage_weight=COVERAGE_WEIGHT,
    )
    scores = {r.doc_id: r.score for r in ranked if r.score > 0}
    asked = {pk: candidates.questions[pk] for pk in scores if pk in candidates.questions}
    return past_turns_read(app_name=app_name, user_pk=user_pk, scores=scores, asked=asked)


def past_turns_read(
    *, app_name: str, user_pk: int, scores: dict[int, float], asked: dict[int, str] | None = None
) -> list[PastTurn]:
    """The turns of ``scores`` (event pk -> score) that are still there now, read fresh, in the
    given order: the user's, not rewound, not said while their memory creation was off
    (``memory_excluded``: consent reaches this door too), in a chat of the app that is not
    temporary; each with the question of ``asked`` (event pk -> question) it answers."""
    if not scores:
        return []
    rows = EventRecord.objects.filter(
        pk__in=list(scores),
        author="user",
        rewound=False,
        memory_excluded=False,
        session__user_id=user_pk,
        session__app_name=app_name,
        session__temporary=False,
        session__memory_only=False,
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
