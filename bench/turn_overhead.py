"""Turn overhead: everything a chat turn costs except the model, on a long session.

    python -m bench.turn_overhead                                   # SQLite, build/
    python -m bench.turn_overhead --database-url postgres://postgres@127.0.0.1:5432/bench_turn

Bar (brief, section 7): p95 under 15 ms for all but model time of one turn, on a
1,000-event session of a user with 10,000 memories.

The database named by ``--database-url`` is dropped and recreated (a SQLite file
is deleted), then migrated. One user gets 10,000 memories and a session of
1,000 chat events (``bench.workload``; replies stored as the runner stores them,
with ``turn_complete`` and the context report), already summarised the way a
long session is: a compaction event covers what lies outside the kept window,
and the memory watermark stands at the last event, so no background job is
due; then ``ANALYZE``, as after any bulk load. Each turn is then the chat
consumer's: the turn's claim taken as the socket takes it (``turn_begin_async``:
the turn's events read, the claim written, the session and memory permissions read),
``Runner.run_async`` with the app's agent and the registered memory provider (preload
search of the user's memories, templated instruction, history, two appended events, the
last with the memory trigger check and the claim's release, the compaction check), the
process tuned as servers are
(``chatapp.process.process_tune_gc``). The model is a stub that answers at
once; the time spent inside it is measured and subtracted, so "turn" is all
but model time. After each turn its two events are deleted again (untimed), so
every turn sees the same 1,000-event session.

Per phase, timed around the runner's calls to its collaborators: the turn's
claim (taken before the turn with the session and memory permissions read: the
session with its recent events and latest compaction, and what the user allows, in
one round trip from the event loop on PostgreSQL; on SQLite, where the runner reads
the session itself in the database thread, "session load, memory permissions";
"turn without its claim" is the whole turn less the claim's phase, measured in the
same run), memory preloads (search of 10,000 memories with the
process's embedder, lexical when torch is not installed, and of the user's past
chats), prompt build (history view, instruction, request), event appends (user
message, and reply with the memory triggers' read), turn completed (memory
trigger decision); "other" is the rest (thread hops,
event construction, compaction check). "Until the reply is stored" is the
part the user waits for: up to the stored final event, before the memory
trigger and compaction checks. "CPU time of this process" is the turn's
processor time in this process (all threads; on SQLite that includes the
database's work, on PostgreSQL the server's is not in it): on a machine
shared with other work it shows what the turn costs apart from waiting for
a processor. Progress on stderr, figures on
stdout and in build/bench-turn-overhead-<vendor>.json. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import re
import sys
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from google.genai import types

BASE_DIR = Path(__file__).resolve().parent.parent
APP_NAME = "bench-turn"
PHASES = (
    "turn claim (taken with the session read)",
    "session load, memory permissions",
    "memory preloads (search)",
    "prompt build",
    "event appends (2)",
    "turn completed (memory trigger)",
    "other (hops, glue)",
)
TOTAL = "turn, all but model time"
UNCLAIMED = "turn without its claim"
REPLY = "until the reply is stored"
CPU = "turn, CPU time of this process"
MODEL = "model stub (subtracted)"
CLAIM = PHASES[0]

_FACT_TEMPLATES = (
    "The user likes {a} and {b}.",
    "The user is planning a {a} trip with {b}.",
    "The user's sister enjoys {a} near the {b}.",
    "The user prefers {a} in the {b}.",
    "The user has a {a} deadline for the {b}.",
    "The user is training for a {a} with {b}.",
)


def arguments_parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--database-url",
        default=f"sqlite:///{BASE_DIR / 'build' / 'bench-turn-overhead.sqlite3'}",
        help="dropped and recreated (PostgreSQL) or deleted (SQLite file)",
    )
    parser.add_argument("--events", type=int, default=1000, help="chat events in the session")
    parser.add_argument("--memories", type=int, default=10000, help="memories of the user")
    parser.add_argument("--turns", type=int, default=200, help="timed turns")
    parser.add_argument("--warm-up", type=int, default=10, help="untimed turns first")
    parser.add_argument(
        "--output", type=Path, help="where the figures go (build/bench-turn-overhead-<vendor>.json)"
    )
    return parser.parse_args(argv)


def progress(message: str) -> None:
    sys.stderr.write(f"\r{message[:78]:<78}")
    sys.stderr.flush()


def database_recreate(url: str) -> None:
    """Start from an empty database: drop and create it (PostgreSQL) or delete the file."""
    parts = urlsplit(url)
    if parts.scheme.startswith("postgres"):
        import psycopg
        from psycopg import sql

        name = parts.path.lstrip("/")
        server = url.rsplit("/", 1)[0]
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    elif parts.scheme == "sqlite":
        path = Path(parts.path[1:] if parts.path.startswith("//") else parts.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
    else:
        raise SystemExit(f"--database-url: PostgreSQL or SQLite, not {parts.scheme!r}")


def percentile(samples: list[float], fraction: float) -> float:
    from bench.workload import percentile as nearest_rank

    return nearest_rank(samples, fraction)


class InstantModel:
    """A model stub that answers at once; ``seconds`` sums the time spent inside it."""

    name = "bench-instant"
    offline = True

    def __init__(self) -> None:
        self.seconds = 0.0

    async def generate_stream(self, request: Any) -> AsyncIterator[Any]:
        from core.llm import LlmChunk

        started = time.perf_counter()
        chunk = LlmChunk(text=f"Noted: {len(request.contents)} turns in view.")
        self.seconds += time.perf_counter() - started
        yield chunk


class Phases:
    """Durations of the current turn, by phase, in seconds."""

    def __init__(self) -> None:
        self.current: dict[str, float] = defaultdict(float)

    def add(self, phase: str, seconds: float) -> None:
        self.current[phase] += seconds

    def timed_async(self, phase: str, call: Any) -> Any:
        async def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await call(*args, **kwargs)
            finally:
                self.add(phase, time.perf_counter() - started)

        return timed


class TimedMemory:
    """The registered memory provider, its searches and its turn hook timed (its permissions
    are read with the session, in that phase)."""

    def __init__(self, provider: Any, phases: Phases) -> None:
        self.provider = provider
        self.preload = phases.timed_async("memory preloads (search)", provider.preload)
        self.preload_past = phases.timed_async("memory preloads (search)", provider.preload_past)
        self.turn_completed = phases.timed_async(
            "turn completed (memory trigger)", provider.turn_completed
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.provider, name)


class TimedSessions:
    """The session service, its appends timed."""

    def __init__(self, service: Any, phases: Phases) -> None:
        self.service = service
        self.append_event_stored = phases.timed_async(
            "event appends (2)", service.append_event_stored
        )
        self.append_event_stored_then = phases.timed_async(
            "event appends (2)", service.append_event_stored_then
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.service, name)


def session_build(*, user_id: str, events: int, model: InstantModel) -> tuple[str, int]:
    """A session of ``events`` chat events, summarised as a long session is; returns its id
    and the sequence number of its last event."""
    from agents_app.runtime.agents import agent_for_app
    from agents_app.runtime.compaction import session_compact
    from agents_app.runtime.runner import TurnContextReport
    from bench.workload import chat_turns
    from sessions_app import services
    from sessions_app.events import Event, EventActions

    agent = agent_for_app(APP_NAME)
    session = services.session_create(
        app_name=APP_NAME, user_id=user_id, state={"user:name": "Sam", "topic": "travel"}
    )

    report = TurnContextReport(model=model.name, offline=True, memory_enabled=True).as_dict()
    for number, turn in enumerate(chat_turns(events), start=1):
        if number % 100 == 0:
            progress(f"session: {number}/{events} events")
        is_user = turn.author == "user"
        event = Event(
            invocation_id=turn.invocation_id,
            author="user" if is_user else agent.name,
            content=types.Content(role=turn.role, parts=[types.Part(text=turn.text)]),
            actions=EventActions(
                state_delta={key: value for key, value in turn.state_delta.items() if is_user}
            ),
        )
        if not is_user:
            event.turn_complete = True
            event.custom_metadata = {"context": report}
        services.event_append(session=session, event=event)
    progress("session: summarising what lies outside the kept window")
    session_compact(
        app_name=APP_NAME, user_id=user_id, session_id=session.id, agent=agent, model=model
    )
    from sessions_app.models import SessionRecord

    return session.id, SessionRecord.objects.get(session_id=session.id).last_sequence


def memories_build(*, user_pk: int, count: int, session_id: str, last_sequence: int) -> None:
    """``count`` memories of the user, and the watermark of the session at its last event."""
    from bench.workload import _WORDS
    from memory_app.models import Memory, MemoryWatermark, SourceType
    from memory_app.services import memory_index_invalidate
    from sessions_app.models import SessionRecord

    rng = random.Random(11)
    words = [word for word in _WORDS if len(word) > 3]
    progress(f"memories: {count}")
    Memory.objects.bulk_create(
        (
            Memory(
                app_name=APP_NAME,
                user_id=user_pk,
                topic="key_conversation_details",
                text=rng.choice(_FACT_TEMPLATES).format(a=rng.choice(words), b=rng.choice(words))
                + f" (note {index})",
                source_type=SourceType.IMPLICIT,
                confidence=round(rng.uniform(0.5, 1.0), 2),
                importance=round(rng.uniform(0.1, 1.0), 2),
            )
            for index in range(count)
        ),
        batch_size=1000,
    )
    memory_index_invalidate(app_name=APP_NAME, user_pk=user_pk)
    MemoryWatermark.objects.update_or_create(
        session=SessionRecord.objects.get(session_id=session_id, user_id=user_pk),
        defaults={"last_sequence": last_sequence},
    )


def turn_events_delete(*, session_id: str, last_sequence: int) -> None:
    """Take the session back to ``last_sequence`` events (untimed, between turns)."""
    from sessions_app.models import EventRecord, SessionRecord

    EventRecord.objects.filter(
        session__session_id=session_id, session__app_name=APP_NAME, sequence__gt=last_sequence
    ).delete()
    SessionRecord.objects.filter(session_id=session_id, app_name=APP_NAME).update(
        last_sequence=last_sequence
    )


def messages(count: int) -> list[str]:
    """User messages of the benchmark chat, none asking to remember (which would queue a
    memory job, background work that is not the turn's)."""
    from bench.workload import chat_turns

    texts = [turn.text for turn in chat_turns(count * 2, seed=23) if turn.author == "user"]
    return [re.sub("remember", "recall", text, flags=re.IGNORECASE) for text in texts]


async def turns_run(
    *,
    runner: Any,
    model: InstantModel,
    phases: Phases,
    user_id: str,
    session_id: str,
    session_key: str,
    last_sequence: int,
    texts: list[str],
    warm_up: int,
) -> list[dict[str, float]]:
    from asgiref.sync import sync_to_async

    from agents_app.chat.turn_claims import holder_name, turn_begin_async
    from agents_app.runtime.turns import user_event_id_for

    claim_take = phases.timed_async(CLAIM, turn_begin_async)
    delete = sync_to_async(turn_events_delete)
    samples = []
    for number, text in enumerate(texts, start=1):
        phases.current = defaultdict(float)
        model.seconds = 0.0
        message = types.Content(role="user", parts=[types.Part(text=text)])
        client_message_id = f"bench-{number}"
        started = time.perf_counter()
        cpu_started = time.process_time()
        stored = 0
        reply_stored = 0.0
        begin = await claim_take(
            session_id=session_key,
            user_event_id=user_event_id_for(client_message_id),
            holder=holder_name("bench"),
            with_read=runner.session_read(user_id=user_id, session_id=session_id),
        )
        if begin.claim is None:
            raise RuntimeError(f"turn {client_message_id} was not claimed: {begin.start}")
        async for event in runner.run_async(
            user_id=user_id,
            session_id=session_id,
            new_message=message,
            client_message_id=client_message_id,
            claim=begin.claim,
            session_answer=begin.with_answer,
        ):
            stored += not event.partial
            if event.error_code:
                raise RuntimeError(f"turn failed: {event.error_code}: {event.error_message}")
            if event.turn_complete:
                reply_stored = time.perf_counter() - started
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu_started
        if stored != 2:
            raise RuntimeError(f"expected 2 stored events, got {stored}")
        await delete(session_id=session_id, last_sequence=last_sequence)
        if number <= warm_up:
            continue
        sample = {phase: seconds * 1000 for phase, seconds in phases.current.items()}
        sample[MODEL] = model.seconds * 1000
        sample[TOTAL] = (elapsed - model.seconds) * 1000
        sample[UNCLAIMED] = sample[TOTAL] - sample.get(CLAIM, 0.0)
        sample[REPLY] = (reply_stored - model.seconds) * 1000
        sample[CPU] = (cpu - model.seconds) * 1000
        sample["other (hops, glue)"] = sample[TOTAL] - sum(
            sample.get(phase, 0.0) for phase in PHASES if phase != "other (hops, glue)"
        )
        samples.append(sample)
        if number % 20 == 0:
            totals = sorted(s[TOTAL] for s in samples)
            progress(
                f"turn {number - warm_up}/{len(texts) - warm_up}: "
                f"p50 {totals[len(totals) // 2]:.2f} ms"
            )
    return samples


def main(argv: list[str] | None = None) -> None:
    args = arguments_parse(argv)
    load_before = os.getloadavg()
    database_recreate(args.database_url)
    os.environ["DATABASE_URL"] = args.database_url
    os.environ["DEBUG"] = "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection

    from agents_app.runtime import runner as runner_module
    from agents_app.runtime.agents import agent_for_app
    from agents_app.runtime.memory_hooks import memory_provider_get
    from chatapp.process import process_tune_gc
    from memory_app.embedding import embedder_get
    from sessions_app import selectors
    from sessions_app.services import SessionService

    settings.BACKGROUND_TASKS = "inprocess"
    progress("migrating")
    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user(username="bench-turn")
    model = InstantModel()
    session_id, last_sequence = session_build(user_id=str(user.pk), events=args.events, model=model)
    memories_build(
        user_pk=user.pk, count=args.memories, session_id=session_id, last_sequence=last_sequence
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    visible = len(
        selectors.session_get(app_name=APP_NAME, user_id=str(user.pk), session_id=session_id).events
    )
    embedder = embedder_get()
    process_tune_gc()

    phases = Phases()
    runner = runner_module.Runner(
        agent=agent_for_app(APP_NAME),
        model=model,
        session_service=TimedSessions(SessionService(), phases),
        memory=TimedMemory(memory_provider_get(), phases),
    )
    runner_module.turn_request_build = phases.timed_async(
        "prompt build", runner_module.turn_request_build
    )
    runner_module.turn_session_load = phases.timed_async(
        "session load, memory permissions", runner_module.turn_session_load
    )

    texts = messages(args.turns + args.warm_up)
    samples = asyncio.run(
        turns_run(
            runner=runner,
            model=model,
            phases=phases,
            user_id=str(user.pk),
            session_id=session_id,
            session_key=selectors.session_key_get(
                app_name=APP_NAME, user_pk=user.pk, session_id=session_id
            ),
            last_sequence=last_sequence,
            texts=texts,
            warm_up=args.warm_up,
        )
    )
    sys.stderr.write("\n")

    figures = {
        name: {
            "p50_ms": round(percentile([s.get(name, 0.0) for s in samples], 0.50), 3),
            "p95_ms": round(percentile([s.get(name, 0.0) for s in samples], 0.95), 3),
        }
        for name in (*PHASES, MODEL, TOTAL, UNCLAIMED, REPLY, CPU)
    }
    out = args.output or BASE_DIR / "build" / f"bench-turn-overhead-{connection.vendor}.json"
    results = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "database": connection.vendor,
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "arguments": {**vars(args), "output": str(out)},
        "session_events": visible,
        "embedder": type(embedder).__name__,
        "figures": figures,
    }
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(
        f"{connection.vendor}: session of {visible} visible events (compaction included), "
        f"{args.memories} memories, embedder {type(embedder).__name__}, "
        f"{len(samples)} turns; load average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    print(f"{'phase':<36} {'p50 ms':>8} {'p95 ms':>8}")
    for name in (*PHASES, TOTAL, UNCLAIMED, REPLY, CPU, MODEL):
        print(f"{name:<36} {figures[name]['p50_ms']:>8.2f} {figures[name]['p95_ms']:>8.2f}")
    print(f"bar: {TOTAL} p95 < 15 ms")
    print(f"Figures written to {out}.")


if __name__ == "__main__":
    main()
