"""Evaluation of long-term memory: LoCoMo retrieval recall here, generation against a golden set
in :mod:`memory_app.golden_eval`, which stores its chats with :func:`session_ingest`.

Both run the real pipeline: conversations go into the session store
(``sessions_app.services``), a generation job turns each session into memories with the
configured model (that of ``LLM_PROVIDER`` when configured, the offline rules of
:mod:`memory_app.extraction` otherwise) and embedder, and LoCoMo questions go through
:func:`memory_search`.

Both write to the configured database, under their own app name (``locomo-eval``,
``golden-eval``) and for users created for the run (one per conversation, named
``<app>-<id>-<random>``), and delete those users, with their sessions and memories, at the
end unless asked to keep them. Run them against a development database, not production.

LoCoMo (``/work/shared/data/locomo/README.md``): each turn becomes a user-authored event whose
text is the turn (with ``[shares <caption>]`` for an image), whose ``custom_metadata`` holds
the speaker and the dialog id, and whose timestamp is the session's date (one second apart per
turn, to keep their order). Both speakers are authored "user": the benchmark asks about both,
and extraction reads user turns only. With an embedder, each chat's turns and memories are
embedded before the questions are asked, as the background does seconds after a chat. Evidence
recall@K is the fraction of a question's evidence dialog ids found among the top K results,
averaged over the questions of categories 1-4 with evidence, for three sources: memories alone
(their source events), past conversations alone (:func:`past_conversations_search`, the turns
themselves), and both, what the agent can reach. Both is the list of turns the agent is given:
the past turns in the order past-conversation search ranks them (the preload's and the tool's
past-conversations section), then the turns the memories were made from that the past turns do
not already hold, in the memories' order (the memories' section, apart: a memory never moves a
past turn). Memories are facts drawn from a few turns, not the turns: letting them vote on the
past turns' order (reciprocal-rank fusion with a weight, or scores added) lowered recall@5 on
the LoCoMo dev split at every weight tried (docs/benchmarks.md, "Past conversations (issue
26)").
"""

from __future__ import annotations

import json
import math
import statistics
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from google.genai import types

from memory_app import selectors
from memory_app.embedding import embedder_get
from memory_app.extraction import memory_model_configured
from memory_app.models import GenerationJob, Memory, MemoryStatus
from memory_app.services import (
    embeddings_compute,
    memory_job_request,
    memory_job_run,
    memory_settings_update,
)
from sessions_app import services as session_services
from sessions_app.events import Event, new_invocation_id
from sessions_app.models import EventRecord, SessionRecord
from sessions_app.selectors import session_key_get

LOCOMO_APP = "locomo-eval"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SOURCES = ("both", "memories", "past")

Progress = Callable[[str], None]


def silent(_message: str) -> None:
    return None


# --- LoCoMo ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocomoTurn:
    dia_id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class LocomoSession:
    date: datetime
    turns: list[LocomoTurn]


@dataclass(frozen=True)
class LocomoQuestion:
    question: str
    category: int
    evidence: tuple[str, ...]
    answer: str = ""


@dataclass(frozen=True)
class LocomoConversation:
    sample_id: str
    sessions: list[LocomoSession]
    questions: list[LocomoQuestion] = field(default_factory=list)


def locomo_date_parse(*, text: str) -> datetime:
    """LoCoMo's session date ("1:56 pm on 8 May, 2023") as an aware UTC datetime."""
    return datetime.strptime(" ".join(text.split()), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def locomo_load(*, path: Path) -> list[LocomoConversation]:
    """The conversations of a LoCoMo JSON file, sessions in order, with the questions that are
    scored (categories 1-4, non-empty evidence); evidence ids are kept as written."""
    conversations = []
    for sample in json.loads(Path(path).read_text()):
        conv = sample["conversation"]
        sessions = []
        n = 1
        while f"session_{n}" in conv:
            turns = [
                LocomoTurn(
                    dia_id=turn["dia_id"],
                    speaker=turn["speaker"],
                    text=turn["text"]
                    + (f" [shares {turn['blip_caption']}]" if turn.get("blip_caption") else ""),
                )
                for turn in conv[f"session_{n}"]
            ]
            date = locomo_date_parse(text=conv[f"session_{n}_date_time"])
            sessions.append(LocomoSession(date=date, turns=turns))
            n += 1
        questions = [
            LocomoQuestion(
                question=qa["question"],
                category=qa["category"],
                evidence=tuple(qa["evidence"]),
                answer=str(qa.get("answer", "")),
            )
            for qa in sample["qa"]
            if qa.get("category") in CATEGORIES and qa.get("evidence")
        ]
        conversations.append(
            LocomoConversation(
                sample_id=sample["sample_id"], sessions=sessions, questions=questions
            )
        )
    return conversations


def user_create(*, app_name: str, label: str):
    username = f"{app_name}-{label}-{uuid.uuid4().hex[:8]}"[:150]
    return get_user_model().objects.create_user(username=username)


def _memories_generate(*, app_name: str, user_pk: int, session_id: str) -> None:
    """Run generation jobs for the session in this process until none is left queued (a long
    session is processed in several jobs of ``MEMORY_JOB_MAX_EVENTS`` events)."""
    job = memory_job_request(
        app_name=app_name,
        user_pk=user_pk,
        session_id=session_id,
        trigger=GenerationJob.Trigger.SESSION_END,
        enqueue=False,
    )
    while job is not None:
        memory_job_run(job_id=str(job.id))
        job = GenerationJob.objects.filter(
            session_id=session_id, status=GenerationJob.Status.QUEUED
        ).first()


def session_ingest(
    *,
    app_name: str,
    user_pk: int,
    turns: Sequence[tuple[str, str, dict[str, Any]]],
    start: float,
    create: bool = True,
    temporary: bool = False,
    generate: bool = True,
) -> str:
    """Store ``(author, text, custom_metadata)`` turns as one session, one second apart from
    ``start``, then (when ``generate``) turn it into memories; returns the session's key.

    ``create=False``: the turns are said while the user has memory creation off, which is
    turned back on before the memories are generated (what was said then must stay out);
    ``temporary``: the session is a temporary chat."""
    session = session_services.session_create(app_name=app_name, user_id=str(user_pk))
    if temporary:
        SessionRecord.objects.filter(
            session_id=session.id, app_name=app_name, user_id=user_pk
        ).update(temporary=True)
    memory_settings_update(user_pk=user_pk, create_enabled=create)
    for offset, (author, text, metadata) in enumerate(turns):
        role = "user" if author == "user" else "model"
        session_services.event_append(
            session=session,
            event=Event(
                invocation_id=new_invocation_id(),
                author=author,
                content=types.Content(role=role, parts=[types.Part(text=text)]),
                timestamp=start + offset,
                custom_metadata=metadata or None,
            ),
        )
    if not create:
        memory_settings_update(user_pk=user_pk, create_enabled=True)
    key = session_key_get(app_name=app_name, user_pk=user_pk, session_id=session.id)
    if generate:
        _memories_generate(app_name=app_name, user_pk=user_pk, session_id=key)
    # The vectors a chat's turns and memories get in the background seconds after they are
    # stored, here before a question is asked: searched without them, an embedder's figures
    # would be the lexical ones, not what the agent reaches.
    embeddings_compute(
        memory_ids=[
            str(pk)
            for pk in Memory.objects.filter(user_id=user_pk, app_name=app_name).values_list(
                "pk", flat=True
            )
        ],
        session_key=key,
    )
    return key


def locomo_ingest(
    *,
    app_name: str,
    user_pk: int,
    conversation: LocomoConversation,
    progress: Progress = silent,
    generate: bool = True,
) -> dict[str, str]:
    """Store each session of the conversation and (when ``generate``) its memories; returns the
    dialog id of each stored event, read back from the events' ``custom_metadata``."""
    session_ids = []
    for number, session in enumerate(conversation.sessions, start=1):
        progress(f"{conversation.sample_id}: session {number}/{len(conversation.sessions)}")
        turns = [
            ("user", turn.text, {"speaker": turn.speaker, "dia_id": turn.dia_id})
            for turn in session.turns
        ]
        session_ids.append(
            session_ingest(
                app_name=app_name,
                user_pk=user_pk,
                turns=turns,
                start=session.date.timestamp(),
                generate=generate,
            )
        )
    records = EventRecord.objects.filter(session_id__in=session_ids).values_list(
        "event_id", "custom_metadata"
    )
    return {event_id: (meta or {}).get("dia_id", "") for event_id, meta in records}


def _percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(1, math.ceil(fraction * len(ordered))) - 1]


def evidence_fuse(
    *,
    memories: Sequence[tuple[float, set[str | None]]],
    past: Sequence[tuple[float, set[str | None]]],
) -> list[set[str | None]]:
    """The turns (dialog ids) of both ``(score, dialog ids)`` lists, best first: the past
    turns in their order, then each memory's turns not already there, in the memories' order
    (see the module docstring)."""
    seen: set[str] = set()
    fused: list[set[str | None]] = []
    for _score, dias in [*past, *memories]:
        new = dias - seen - {None}
        if new:
            seen |= new
            fused.append(new)
    return fused


def _evidence_found(
    *, app_name: str, user_pk: int, query: str, limit: int, dia_of: dict[str, str], sources
) -> dict[str, list[set[str | None]]]:
    """Per source, the dialog ids each result holds, best first (see the module docstring)."""
    ranked: dict[str, list[tuple[float, set[str | None]]]] = {}
    if {"memories", "both"} & set(sources):
        found = selectors.memory_search(
            app_name=app_name, user_pk=user_pk, query=query, limit=limit
        )
        ranked["memories"] = [(m.score, {dia_of.get(s.event_id) for s in m.sources}) for m in found]
    if {"past", "both"} & set(sources):
        turns = selectors.past_conversations_search(
            app_name=app_name, user_pk=user_pk, query=query, limit=limit
        )
        ranked["past"] = [(t.score, {dia_of.get(t.event_id)}) for t in turns]
    found_dias = {source: [dias for _score, dias in ranked[source]] for source in ranked}
    if "both" in sources:
        found_dias["both"] = evidence_fuse(memories=ranked["memories"], past=ranked["past"])
    return {source: found_dias[source] for source in sources}


def _recalls(hits: dict[int, list[tuple[int, float]]], ks: Sequence[int]) -> dict[str, Any]:
    """``recall@K`` and ``recall_by_category`` of (category, recall) pairs per K."""
    result: dict[str, Any] = {
        f"recall@{k}": round(statistics.fmean(r for _c, r in hits[k]), 4) if hits[k] else 0.0
        for k in ks
    }
    result["recall_by_category"] = {
        f"recall@{k}": {
            CATEGORIES[category]: round(statistics.fmean(r for c, r in hits[k] if c == category), 4)
            for category in sorted({c for c, _r in hits[k]})
        }
        for k in ks
    }
    return result


def locomo_evaluate(
    *,
    path: Path,
    ks: Sequence[int] = (5, 10),
    app_name: str = LOCOMO_APP,
    conversations_limit: int | None = None,
    keep: bool = False,
    sources: Sequence[str] = SOURCES,
    progress: Progress = silent,
) -> dict[str, Any]:
    """Evidence recall@K over LoCoMo conversations, through the pipeline, for each of
    ``sources`` (``SOURCES``: both, memories, past; see the module docstring).

    Returns ``questions``; ``recall@K`` and ``recall_by_category`` (K -> category -> recall) of
    the first source; ``by_source`` (source -> the same two); ``search_ms_p50``/``p95`` (wall
    time of the searches of a question, the first search of each user building its indexes
    included); and what produced the memories: ``extraction``, ``embedder``, ``memories``. With
    memories in no source, no memory is generated. The run's users are deleted unless ``keep``.
    """
    ks = sorted(set(ks))
    sources = [source for source in SOURCES if source in sources]
    if not sources:
        raise ValueError(f"sources: one or more of {', '.join(SOURCES)}")
    generate = sources != ["past"]
    conversations = locomo_load(path=path)[:conversations_limit]
    hits = {source: {k: [] for k in ks} for source in sources}
    timings: list[float] = []
    users = []
    memories = 0
    total = sum(len(c.questions) for c in conversations)
    try:
        for conversation in conversations:
            user = user_create(app_name=app_name, label=conversation.sample_id)
            users.append(user)
            dia_of = locomo_ingest(
                app_name=app_name,
                user_pk=user.pk,
                conversation=conversation,
                progress=progress,
                generate=generate,
            )
            memories += Memory.objects.filter(user=user, status=MemoryStatus.ACTIVE).count()
            for question in conversation.questions:
                progress(f"questions {len(timings) + 1}/{total}")
                started = time.perf_counter()
                found = _evidence_found(
                    app_name=app_name,
                    user_pk=user.pk,
                    query=question.question,
                    limit=ks[-1],
                    dia_of=dia_of,
                    sources=sources,
                )
                timings.append((time.perf_counter() - started) * 1000)
                evidence = set(question.evidence)
                for source, results in found.items():
                    for k in ks:
                        dias = set().union(*results[:k])
                        recall = len(evidence & dias) / len(evidence)
                        hits[source][k].append((question.category, recall))
    finally:
        if not keep:
            for user in users:
                user.delete()
    by_source = {source: _recalls(hits[source], ks) for source in sources}
    return {
        "conversations": len(conversations),
        "questions": len(timings),
        "memories": memories,
        "extraction": "gemini" if memory_model_configured() else "offline",
        "embedder": embedder_get().name,
        "sources": sources,
        **by_source[sources[0]],
        "by_source": by_source,
        "search_ms_p50": round(_percentile(timings, 0.50), 2),
        "search_ms_p95": round(_percentile(timings, 0.95), 2),
    }
