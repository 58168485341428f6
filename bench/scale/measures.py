"""What each step times, on the subjects (``bench.scale.subjects``), through the product's own
entry points, in this one process tuned as servers are.

Latencies (p50 / p95, nearest rank, warm-up calls not counted):

- append: ``SessionService.append_event`` of a chat event with a state delta (session, ``user:``
  and ``temp:`` keys), 1,000 into a new session of the subject user;
- last 20: ``get_session`` of the last 20 events of the 2,000-event session;
- all 2,000: ``get_session`` of that whole session (each result freed before the next read);
- list page: ``list_sessions`` pages of 20 through the lister's 5,000 sessions;
- memory search: ``memory_search`` of the 10,000-memory user, index warm; and the same with
  the process's index dropped first (index build included);
- turn overhead: ``Runner.run_async`` as the chat consumer calls it, on the 1,000-event session,
  a model stub answering at once (its time subtracted), as ``bench.turn_overhead`` does;
- delete all data: ``user_data_delete`` of a user with 50 sessions of 20 events, their memories
  with sources and revisions, and their generation jobs;
- TTL cleanup: ``sessions_expire_idle`` of 200 sessions (10 events each, with memories and
  jobs) idle past the TTL, a round; also as sessions and events per second;
- generation: ``memory_job_run`` of a queued job over 20 new events (10 user messages stating
  facts) of a user with 100 memories, one after another as one worker runs them; also as jobs
  per minute.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

import psycopg

from bench.scale import fill
from bench.scale.subjects import APPEND_SESSION_TITLE, SUBJECT_APP, Subjects
from bench.workload import chat_turns, summary

# name -> (label, kind); "ms" figures have p50/p95, "rate" ones a throughput.
FIGURES = {
    "append": ("append_event", "ms"),
    "last20": ("get_session, last 20 of 2,000 events", "ms"),
    "all2000": ("get_session, all 2,000 events", "ms"),
    "list_page": ("list_sessions, a page of 20 (5,000 sessions)", "ms"),
    "search": ("memory search, 10,000 memories (index warm)", "ms"),
    "search_cold": ("memory search, the first five of the run", "ms"),
    "turn": ("chat turn, all but model time", "ms"),
    "delete_user": ("delete all data of a user (50 sessions)", "ms"),
    "ttl_round": ("TTL cleanup of 200 idle sessions", "ms"),
    "ttl_sessions": ("TTL cleanup, sessions per second", "rate"),
    "ttl_events": ("TTL cleanup, events per second", "rate"),
    "generation_job": ("memory generation job (20 events)", "ms"),
    "generation_rate": ("memory generation, jobs per minute per worker", "rate"),
}
FACT_MESSAGES = (
    "I live in Lisbon and I work as a nurse at the city hospital.",
    "My sister Ana loves hiking near the lake every weekend.",
    "I prefer green tea in the morning and I don't drink coffee anymore.",
    "I'm training for a marathon in October with my friend Rui.",
    "My favourite food is pasta with tomatoes from our garden.",
    "I have a project deadline on Friday for the quarterly report.",
    "I moved to Porto last year for a job at a bank.",
    "My daughter is called Sofia and she is seven.",
    "I am allergic to peanuts, please keep that in mind.",
    "I usually book trains instead of flights when I travel.",
)


def _ms(samples: list[float]) -> dict[str, float]:
    figures = summary(samples)
    return {"n": figures["n"], "p50_ms": figures["p50_ms"], "p95_ms": figures["p95_ms"]}


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


async def store_measure(subjects: Subjects, *, repeat: int) -> dict[str, dict]:
    """append, last 20, all 2,000 and list page, from one event loop, as an agent calls them."""
    from asgiref.sync import sync_to_async

    from sessions_app.events import Event, EventActions
    from sessions_app.models import SessionRecord
    from sessions_app.services import SessionService
    from sessions_app.types import GetSessionConfig

    service = SessionService()
    user_id = str(subjects.user_pk)
    figures: dict[str, dict] = {}

    async def read(count: int | None) -> float:
        started = time.perf_counter()
        session = await service.get_session(
            app_name=SUBJECT_APP,
            user_id=user_id,
            session_id=subjects.long_session_id,
            config=GetSessionConfig(num_recent_events=count),
        )
        elapsed = time.perf_counter() - started
        expected = count or fill.LONG_SESSION_EVENTS
        if len(session.events) != expected:
            raise RuntimeError(f"read {len(session.events)} events, expected {expected}")
        return elapsed

    samples = [await read(20) for _ in range(10 + repeat)][10:]
    figures["last20"] = _ms(samples)
    samples = [await read(None) for _ in range(3 + repeat // 5)][3:]
    figures["all2000"] = _ms(samples)

    pages, token, listed = [], None, 0
    while True:
        started = time.perf_counter()
        page = await service.list_sessions(
            app_name=SUBJECT_APP, user_id=str(subjects.lister_pk), page_token=token
        )
        pages.append(time.perf_counter() - started)
        listed += len(page.sessions)
        token = page.next_page_token
        if not token:
            break
    if listed != fill.LISTED_SESSIONS:
        raise RuntimeError(f"listed {listed} sessions, expected {fill.LISTED_SESSIONS}")
    figures["list_page"] = _ms(pages[5:])

    session = await service.create_session(app_name=SUBJECT_APP, user_id=user_id)
    await sync_to_async(SessionRecord.objects.filter(session_id=session.id).update)(
        title=APPEND_SESSION_TITLE
    )
    samples = []
    for turn in chat_turns(1000 + 20, seed=13):
        event = Event(
            invocation_id=turn.invocation_id,
            author=turn.author,
            content={"role": turn.role, "parts": [{"text": turn.text}]},
            actions=EventActions(state_delta=dict(turn.state_delta)),
        )
        started = time.perf_counter()
        await service.append_event(session, event)
        samples.append(time.perf_counter() - started)
    figures["append"] = _ms(samples[20:])
    await service.delete_session(app_name=SUBJECT_APP, user_id=user_id, session_id=session.id)
    return figures


def search_measure(subjects: Subjects, *, repeat: int) -> dict[str, dict]:
    from bench.turn_overhead import messages
    from memory_app.selectors import memory_search

    queries = messages(repeat + 10)

    def search(query: str) -> None:
        results = memory_search(app_name=SUBJECT_APP, user_pk=subjects.user_pk, query=query)
        if not results:
            raise RuntimeError(f"no memory found for {query!r}")

    first = [_timed(lambda query=query: search(query))[0] for query in queries[:5]]
    warm = [_timed(lambda query=query: search(query))[0] for query in queries]
    return {"search": _ms(warm[10:]), "search_cold": _ms(first)}


def turn_measure(subjects: Subjects, *, repeat: int) -> dict[str, dict]:
    from agents_app.runtime.agents import agent_for_app
    from agents_app.runtime.memory_hooks import memory_provider_get
    from agents_app.runtime.runner import Runner
    from bench.turn_overhead import (
        TOTAL,
        InstantModel,
        Phases,
        TimedMemory,
        TimedSessions,
        messages,
        turns_run,
    )
    from sessions_app.services import SessionService

    model, phases = InstantModel(), Phases()
    runner = Runner(
        agent=agent_for_app(SUBJECT_APP),
        model=model,
        session_service=TimedSessions(SessionService(), phases),
        memory=TimedMemory(memory_provider_get(), phases),
    )
    samples = asyncio.run(
        turns_run(
            runner=runner,
            model=model,
            phases=phases,
            user_id=str(subjects.user_pk),
            session_id=subjects.turn_session_id,
            last_sequence=subjects.turn_last_sequence,
            texts=messages(repeat + 10),
            warm_up=10,
        )
    )
    return {"turn": _ms([sample[TOTAL] / 1000 for sample in samples])}


def _transient_users(
    database: psycopg.Connection,
    tables: fill.Tables,
    *,
    prefix: str,
    count: int,
    lengths: list[int],
    age_days: tuple[float, float] = (0.01, 25.0),
) -> list[int]:
    rng = random.Random(prefix)
    users = []
    with database.cursor() as cursor:
        for number in range(count):
            user_pk, _, _ = fill.user_with_sessions_insert(
                cursor,
                tables,
                username=f"{prefix}{number}",
                app_name="agent-0",
                lengths=lengths,
                rng=rng,
                now=time.time(),
                age_days=age_days,
            )
            users.append(user_pk)
    database.commit()
    return users


def delete_measure(
    database: psycopg.Connection, tables: fill.Tables, *, count: int
) -> dict[str, dict]:
    from django.contrib.auth import get_user_model

    from chatapp.services import user_data_delete

    users = _transient_users(database, tables, prefix="scale-del-", count=count, lengths=[20] * 50)
    samples = []
    for user in get_user_model().objects.filter(pk__in=users):
        elapsed, report = _timed(lambda user=user: user_data_delete(user=user, delete_account=True))
        if report.sessions != 50:
            raise RuntimeError(f"deleted {report.sessions} sessions, expected 50")
        samples.append(elapsed)
    return {"delete_user": _ms(samples)}


def ttl_measure(
    database: psycopg.Connection, tables: fill.Tables, *, rounds: int
) -> dict[str, dict]:
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from chatapp.services import user_data_delete
    from sessions_app.services import sessions_expire_idle

    settings.SESSION_IDLE_TTL_SECONDS = 365 * 24 * 3600
    samples, sessions, events = [], 0, 0
    for number in range(rounds):
        users = _transient_users(
            database,
            tables,
            prefix=f"scale-ttl-{number}-",
            count=2,
            lengths=[10] * 100,
            age_days=(380.0, 420.0),
        )
        elapsed, expired = _timed(sessions_expire_idle)
        if expired != 200:
            raise RuntimeError(f"expired {expired} sessions, expected 200")
        samples.append(elapsed)
        sessions += expired
        events += expired * 10
        for user in get_user_model().objects.filter(pk__in=users):
            user_data_delete(user=user, delete_account=True)
    total = sum(samples)
    return {
        "ttl_round": _ms(samples),
        "ttl_sessions": {"n": sessions, "rate": sessions / total},
        "ttl_events": {"n": events, "rate": events / total},
    }


def generation_measure(
    database: psycopg.Connection, tables: fill.Tables, *, jobs: int
) -> dict[str, dict]:
    from django.contrib.auth import get_user_model

    from chatapp.services import user_data_delete
    from memory_app.models import GenerationJob
    from memory_app.services import memory_job_request, memory_job_run
    from sessions_app import services
    from sessions_app.events import Event

    users = _transient_users(database, tables, prefix="scale-gen-", count=jobs, lengths=[1000])
    queued = []
    for number, user_pk in enumerate(users):
        session = services.session_create(app_name="agent-0", user_id=str(user_pk))
        for turn in range(10):
            text = FACT_MESSAGES[(number + turn) % len(FACT_MESSAGES)]
            for author, role, words in (("user", "user", text), ("assistant", "model", "Noted.")):
                services.event_append(
                    session=session,
                    event=Event(
                        invocation_id=f"e-gen-{number}-{turn}",
                        author=author,
                        content={"role": role, "parts": [{"text": words}]},
                    ),
                )
        job = memory_job_request(
            app_name="agent-0",
            user_pk=user_pk,
            session_id=session.id,
            trigger=GenerationJob.Trigger.SESSION_END,
            enqueue=False,
        )
        queued.append(job.pk)
    samples = []
    for job_id in queued:
        elapsed, job = _timed(lambda job_id=job_id: memory_job_run(job_id=str(job_id)))
        if job.status != GenerationJob.Status.SUCCEEDED:
            raise RuntimeError(f"job {job_id} ended {job.status}: {job.error}")
        samples.append(elapsed)
    for user in get_user_model().objects.filter(pk__in=users):
        user_data_delete(user=user, delete_account=True)
    return {
        "generation_job": _ms(samples),
        "generation_rate": {"n": len(samples), "rate": 60 * len(samples) / sum(samples)},
    }


# Figure groups in the order they run, each with the figures it gives.
GROUPS = {
    "store": ("last20", "all2000", "list_page", "append"),
    "search": ("search", "search_cold"),
    "turn": ("turn",),
    "delete": ("delete_user",),
    "ttl": ("ttl_round", "ttl_sessions", "ttl_events"),
    "generation": ("generation_job", "generation_rate"),
}


def group_measure(
    group: str,
    database: psycopg.Connection,
    tables: fill.Tables,
    subjects: Subjects,
    *,
    repeat: int,
    ttl_rounds: int,
) -> dict[str, dict]:
    """The figures of one group (``GROUPS``)."""
    if group == "store":
        return asyncio.run(store_measure(subjects, repeat=repeat))
    if group == "search":
        return search_measure(subjects, repeat=repeat)
    if group == "turn":
        return turn_measure(subjects, repeat=max(20, repeat // 2))
    if group == "delete":
        return delete_measure(database, tables, count=10)
    if group == "ttl":
        return ttl_measure(database, tables, rounds=ttl_rounds)
    return generation_measure(database, tables, jobs=20)
