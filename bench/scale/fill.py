"""Filling the scale database: a deployment's rows, written by the server in bulk.

A *block* is one user with everything the product keeps about them: sessions (mostly short,
some of a few hundred events, one in a hundred of 2,000), their events (a user message then a
reply, texts of 10-90 words, the reply with the runner's context report), session and ``user:``
state, a memory for every fifth user turn with its source event and its "created" revision,
the generation jobs that made them (one per ten events, one in two hundred failed) and each
session's watermark. One user in a thousand holds 10,000 memories. Users are spread over 50
apps, each with 100 app-scope memories. Each block is a handful of ``INSERT ... SELECT`` over
``generate_series`` and ``unnest`` of a few arrays, in one transaction with the progress
counters (``bench.scale.loading`` runs them), so a fill stopped anywhere resumes where it
stopped.

The *subjects* are the rows the measurements read, the same at every step: a user with 10,000
memories, a 2,000-event session and a 1,000-event session summarised as a long session is
(stored through the product's own services), and a user with 5,000 sessions to list. Events
are timestamped in the last 25 days, inside the default 30-day idle TTL.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from bench.workload import _WORDS, chat_turns

SESSIONS_PER_USER = 20
APPS = 50
APP_MEMORIES_PER_APP = 100
HEAVY_USER_EVERY = 1000
HEAVY_MEMORIES = 10_000
LISTED_SESSIONS = 5_000
LONG_SESSION_EVENTS = 2_000
TURN_SESSION_EVENTS = 1_000
TEXTS = 1000
FACTS = 2000
AGENT_NAME = "assistant"
DAY = 86_400.0
CONTEXT_REPORT = {
    "context": {
        "model": "offline",
        "offline": True,
        "event_count": 24,
        "memory_enabled": True,
        "compaction_summary": None,
        "memories": [],
    }
}
FACT_TEMPLATES = (
    "The user likes {a} and {b}.",
    "The user is planning a {a} trip with {b}.",
    "The user's sister enjoys {a} near the {b}.",
    "The user prefers {a} in the {b}.",
    "The user has a {a} deadline for the {b}.",
    "The user is training for a {a} with {b}.",
)


@dataclass(frozen=True)
class Tables:
    """The product's table names, from its models (Django must be set up)."""

    users: str
    sessions: str
    events: str
    session_state: str
    user_state: str
    app_state: str
    memories: str
    sources: str
    revisions: str
    jobs: str
    watermarks: str
    memory_settings: str

    @classmethod
    def of_models(cls) -> Tables:
        from django.contrib.auth import get_user_model

        from memory_app import models as memory
        from sessions_app import models as sessions

        return cls(
            users=get_user_model()._meta.db_table,
            sessions=sessions.SessionRecord._meta.db_table,
            events=sessions.EventRecord._meta.db_table,
            session_state=sessions.SessionState._meta.db_table,
            user_state=sessions.UserState._meta.db_table,
            app_state=sessions.AppState._meta.db_table,
            memories=memory.Memory._meta.db_table,
            sources=memory.MemorySource._meta.db_table,
            revisions=memory.MemoryRevision._meta.db_table,
            jobs=memory.GenerationJob._meta.db_table,
            watermarks=memory.MemoryWatermark._meta.db_table,
            memory_settings=memory.MemorySettings._meta.db_table,
        )


@dataclass(frozen=True)
class SessionPlan:
    """Sessions to write for one user: ids, lengths in events, first event time, seconds
    between events, and where in the text pool each starts."""

    ids: list[str]
    lengths: list[int]
    started: list[float]
    step: list[float]
    text_base: list[int]


def session_lengths(rng: random.Random, count: int) -> list[int]:
    """Event counts of ``count`` sessions: 1% long (2,000), 9% medium (100-400), the rest short
    (2-30); always even, a user message then a reply."""
    lengths = []
    for _ in range(count):
        draw = rng.random()
        if draw < 0.01:
            lengths.append(LONG_SESSION_EVENTS)
        elif draw < 0.10:
            lengths.append(2 * rng.randint(50, 200))
        else:
            lengths.append(2 * rng.randint(1, 15))
    return lengths


def session_plan(
    *,
    prefix: str,
    lengths: Sequence[int],
    rng: random.Random,
    now: float,
    age_days: tuple[float, float],
) -> SessionPlan:
    """Sessions named ``prefix``-n whose last event lies between ``age_days`` days before
    ``now`` (the nearer bound first)."""
    ids, started, step, text_base = [], [], [], []
    for number, length in enumerate(lengths):
        gap = rng.uniform(5.0, 60.0)
        end = now - rng.uniform(*age_days) * DAY
        ids.append(f"{prefix}-{number}")
        started.append(end - length * gap)
        step.append(gap)
        text_base.append(rng.randrange(TEXTS))
    return SessionPlan(ids, list(lengths), started, step, text_base)


def pools_create(cursor: psycopg.Cursor) -> None:
    """The pools of message texts and fact texts the fill draws from (kept in the database, so
    every block after a resume draws the same)."""
    cursor.execute(
        "CREATE TABLE IF NOT EXISTS bench_scale_texts (n int PRIMARY KEY, user_content json,"
        " model_content json)"
    )
    cursor.execute("CREATE TABLE IF NOT EXISTS bench_scale_facts (n int PRIMARY KEY, text text)")
    cursor.execute("SELECT count(*) FROM bench_scale_texts")
    if cursor.fetchone()[0] == 0:
        turns = chat_turns(2 * TEXTS, seed=31)
        rows = []
        for n in range(TEXTS):
            asked, answered = turns[2 * n], turns[2 * n + 1]
            rows.append(
                (
                    n,
                    json.dumps({"parts": [{"text": asked.text}], "role": "user"}),
                    json.dumps({"parts": [{"text": answered.text * 2}], "role": "model"}),
                )
            )
        cursor.executemany("INSERT INTO bench_scale_texts VALUES (%s, %s, %s)", rows)
    cursor.execute("SELECT count(*) FROM bench_scale_facts")
    if cursor.fetchone()[0] == 0:
        rng = random.Random(5)
        words = [word for word in _WORDS if len(word) > 3]
        cursor.executemany(
            "INSERT INTO bench_scale_facts VALUES (%s, %s)",
            [
                (n, rng.choice(FACT_TEMPLATES).format(a=rng.choice(words), b=rng.choice(words)))
                for n in range(FACTS)
            ],
        )


def user_insert(cursor: psycopg.Cursor, tables: Tables, *, username: str) -> int:
    """A user who cannot sign in with a password, and their memory settings; returns the pk."""
    cursor.execute(
        f"INSERT INTO {tables.users} (password, is_superuser, username, first_name, last_name,"
        " email, is_staff, is_active, date_joined) VALUES ('!', false, %s, '', '', '', false,"
        " true, now()) RETURNING id",
        [username],
    )
    user_pk = cursor.fetchone()[0]
    cursor.execute(
        f"INSERT INTO {tables.memory_settings} (user_id, create_enabled, use_enabled,"
        " past_chats_enabled, index_version, updated_at) VALUES (%s, true, true, true, %s, now())",
        [user_pk, random.getrandbits(62)],
    )
    return user_pk


def sessions_insert(
    cursor: psycopg.Cursor,
    tables: Tables,
    *,
    user_pk: int,
    app_name: str,
    plan: SessionPlan,
    processed: bool = True,
) -> int:
    """The planned sessions with their events, state, jobs and watermarks; returns the event
    count. ``processed=False`` leaves them as generation has not seen them yet: no job, no
    watermark."""
    arrays = [plan.ids, plan.started, plan.step, plan.lengths, plan.text_base]
    unnest = (
        "unnest(%s::text[], %s::float8[], %s::float8[], %s::int[], %s::int[])"
        " AS s(id, started, step, n, text_base)"
    )
    cursor.execute(
        f'INSERT INTO {tables.sessions} ("key", session_id, app_name, user_id, title, temporary,'
        " memory_only, created_at, last_update_time, last_sequence, initial_state)"
        " SELECT s.id, s.id, %s, %s, 'Chat ' || s.text_base, false, false,"
        " to_timestamp(s.started),"
        f" s.started + s.n * s.step, s.n, '{{}}'::jsonb FROM {unnest}",
        [app_name, user_pk, *arrays],
    )
    cursor.execute(
        f"INSERT INTO {tables.events} (session_id, user_id, app_name, sequence, event_id,"
        " invocation_id, author, timestamp, content, actions, turn_complete, interrupted,"
        " branch, error_code, error_message, custom_metadata, usage_metadata,"
        " long_running_tool_ids, rewound)"
        " SELECT s.id, %s, %s, g, md5(s.id || ':' || g)::uuid::text,"
        " 'e-' || md5(s.id || '/' || ((g + 1) / 2))::uuid::text,"
        " CASE WHEN mod(g, 2) = 1 THEN 'user' ELSE %s END, s.started + g * s.step,"
        " CASE WHEN mod(g, 2) = 1 THEN x.user_content ELSE x.model_content END,"
        " CASE WHEN mod(g, 2) = 1 THEN jsonb_build_object('state_delta',"
        " jsonb_build_object('turn', g, 'user:last_turn', g))"
        " ELSE '{\"state_delta\": {}}'::jsonb END,"
        " CASE WHEN mod(g, 2) = 0 THEN true END, NULL, '', '', '',"
        " CASE WHEN mod(g, 2) = 0 THEN %s::jsonb END, NULL, NULL, false"
        f" FROM {unnest} CROSS JOIN LATERAL generate_series(1, s.n) AS g"
        f" JOIN bench_scale_texts x ON x.n = mod(s.text_base + g, {TEXTS})"
        " ORDER BY s.started + g * s.step",
        [user_pk, app_name, AGENT_NAME, json.dumps(CONTEXT_REPORT), *arrays],
    )
    cursor.execute(
        f"INSERT INTO {tables.session_state} (session_id, key, value)"
        " SELECT s.id, k.key, CASE k.key WHEN 'turn' THEN to_jsonb(s.n)"
        " ELSE to_jsonb('topic ' || s.text_base) END"
        f" FROM {unnest} CROSS JOIN (VALUES ('turn'), ('topic')) AS k(key)",
        arrays,
    )
    cursor.execute(
        f"INSERT INTO {tables.user_state} (app_name, user_id, key, value)"
        " VALUES (%s, %s, 'last_turn', '7'), (%s, %s, 'preferences', %s)"
        " ON CONFLICT (user_id, app_name, key) DO NOTHING",
        [
            app_name,
            user_pk,
            app_name,
            user_pk,
            json.dumps({"language": "en", "tone": "brief"}),
        ],
    )
    if processed:
        cursor.execute(
            f"INSERT INTO {tables.jobs} (id, user_id, app_name, session_id, trigger, status,"
            " attempts, first_sequence, last_sequence, error, created_at, started_at,"
            " finished_at)"
            " SELECT md5('job:' || s.id || ':' || k)::uuid, %s, %s, s.id, 'every_n_turns',"
            " CASE WHEN mod(k, 200) = 199 THEN 'failed' ELSE 'succeeded' END, 1, k * 10 + 1,"
            " least(s.n, k * 10 + 10), '',"
            " to_timestamp(s.started + least(s.n, k * 10 + 10) * s.step),"
            " to_timestamp(s.started + least(s.n, k * 10 + 10) * s.step + 1),"
            " to_timestamp(s.started + least(s.n, k * 10 + 10) * s.step + 3)"
            f" FROM {unnest} CROSS JOIN LATERAL generate_series(0, (s.n - 1) / 10) AS k",
            [user_pk, app_name, *arrays],
        )
        cursor.execute(
            f"INSERT INTO {tables.watermarks} (session_id, last_sequence)"
            f" SELECT s.id, s.n FROM {unnest}",
            arrays,
        )
    return sum(plan.lengths)


def memories_insert(
    cursor: psycopg.Cursor,
    tables: Tables,
    *,
    user_pk: int,
    app_name: str,
    session_ids: list[str],
    extra: int = 0,
    jobs: bool = True,
) -> int:
    """A memory for every fifth user turn of the sessions (sequence 1, 11, 21, ...), with its
    source event and "created" revision, made by the job of its events when ``jobs``; then
    ``extra`` more, sourced from those same turns in turn. Returns how many."""
    picked = (
        "WITH picked AS (SELECT e.id AS event_id, e.session_id, e.sequence, e.timestamp,"
        " row_number() OVER (ORDER BY e.id) AS rn,"
        " count(*) OVER () AS total"
        f" FROM {tables.events} e WHERE e.session_id = ANY(%s) AND mod(e.sequence, 10) = 1),"
        " made AS (SELECT p.*, NULL::int AS i FROM picked p"
        " UNION ALL SELECT p.*, i FROM generate_series(1, %s) AS i"
        " JOIN picked p ON p.rn = 1 + mod(i, p.total)),"
        " m AS (SELECT md5(CASE WHEN i IS NULL THEN 'memory:' || event_id"
        " ELSE 'memory:' || event_id || ':' || i END)::uuid AS id, *,"
        f" mod(coalesce(i, event_id), {FACTS}) AS fact FROM made)"
    )
    params = [session_ids, extra]
    job = "md5('job:' || m.session_id || ':' || ((m.sequence - 1) / 10))::uuid" if jobs else "NULL"
    cursor.execute(
        picked + f" INSERT INTO {tables.memories} (id, app_name, scope, user_id, session_id, topic,"
        " text, structured, source_type, confidence, importance, status, review_reason,"
        " created_at, updated_at, expires_at, embedding, embedding_model, job_id)"
        " SELECT m.id, %s, 'user', %s, NULL, 'key_conversation_details',"
        " f.text || CASE WHEN m.i IS NULL THEN '' ELSE ' (note ' || m.i || ')' END, NULL,"
        " 'implicit', 0.5 + mod(m.fact, 50) / 100.0, 0.1 + mod(m.fact, 90) / 100.0,"
        " CASE WHEN mod(m.fact, 30) = 29 THEN 'invalidated' ELSE 'active' END, '',"
        " to_timestamp(m.timestamp), to_timestamp(m.timestamp), NULL, NULL, '',"
        f" CASE WHEN m.i IS NULL THEN {job} END"
        " FROM m JOIN bench_scale_facts f ON f.n = m.fact",
        [*params, app_name, user_pk],
    )
    count = cursor.rowcount
    cursor.execute(
        picked + f" INSERT INTO {tables.sources} (memory_id, event_id, excerpt, created_at)"
        " SELECT m.id, m.event_id, left(f.text, 40), to_timestamp(m.timestamp)"
        " FROM m JOIN bench_scale_facts f ON f.n = m.fact",
        params,
    )
    cursor.execute(
        picked + f" INSERT INTO {tables.revisions} (memory_id, action, before, after, reason,"
        " actor_job_id, actor_user_id, created_at)"
        " SELECT m.id, 'created', NULL, jsonb_build_object('text', f.text, 'status', 'active'),"
        f" 'extracted from the conversation', CASE WHEN m.i IS NULL THEN {job} END, NULL,"
        " to_timestamp(m.timestamp) FROM m JOIN bench_scale_facts f ON f.n = m.fact",
        params,
    )
    return count


def user_with_sessions_insert(
    cursor: psycopg.Cursor,
    tables: Tables,
    *,
    username: str,
    app_name: str,
    lengths: Sequence[int],
    rng: random.Random,
    now: float,
    age_days: tuple[float, float] = (0.01, 25.0),
    extra_memories: int = 0,
    processed: bool = True,
) -> tuple[int, list[str], int]:
    """A user with sessions of the given lengths and their memories; returns the user's pk,
    the session ids and the number of events."""
    user_pk = user_insert(cursor, tables, username=username)
    plan = session_plan(prefix=username, lengths=lengths, rng=rng, now=now, age_days=age_days)
    events = sessions_insert(
        cursor, tables, user_pk=user_pk, app_name=app_name, plan=plan, processed=processed
    )
    if processed:
        memories_insert(
            cursor,
            tables,
            user_pk=user_pk,
            app_name=app_name,
            session_ids=plan.ids,
            extra=extra_memories,
        )
    return user_pk, plan.ids, events


def app_memories_insert(cursor: psycopg.Cursor, tables: Tables, *, app_names: list[str]) -> None:
    """Each app's shared (app-scope) memories and ``app:`` state."""
    cursor.execute(
        f"INSERT INTO {tables.memories} (id, app_name, scope, user_id, session_id, topic, text,"
        " structured, source_type, confidence, importance, status, review_reason, created_at,"
        " updated_at, expires_at, embedding, embedding_model, job_id)"
        " SELECT md5('app:' || a || ':' || i)::uuid, a, 'app', NULL, NULL, 'explicit_instructions',"
        " replace(f.text, 'The user', 'Every user'), NULL, 'bootstrapped', 0.9, 0.6, 'active', '',"
        " now(), now(), NULL, NULL, '', NULL"
        f" FROM unnest(%s::text[]) AS a CROSS JOIN generate_series(1, {APP_MEMORIES_PER_APP}) AS i"
        f" JOIN bench_scale_facts f ON f.n = mod(i * 7, {FACTS})",
        [app_names],
    )
    cursor.execute(
        f"INSERT INTO {tables.app_state} (app_name, key, value)"
        " SELECT a, 'greeting', to_jsonb('Hello from ' || a) FROM unnest(%s::text[]) AS a",
        [app_names],
    )


class Progress:
    """The fill's counters, kept in the filled database itself (``bench_scale_progress``)."""

    def __init__(self, cursor: psycopg.Cursor) -> None:
        self.cursor = cursor
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS bench_scale_progress (name text PRIMARY KEY, value bigint)"
        )

    def get(self, name: str) -> int:
        self.cursor.execute("SELECT value FROM bench_scale_progress WHERE name = %s", [name])
        row = self.cursor.fetchone()
        return row[0] if row else 0

    def add(self, name: str, amount: int) -> None:
        self.cursor.execute(
            "INSERT INTO bench_scale_progress VALUES (%s, %s)"
            " ON CONFLICT (name) DO UPDATE SET value = bench_scale_progress.value + %s",
            [name, amount, amount],
        )


def block_insert(cursor: psycopg.Cursor, tables: Tables, *, block: int, now: float) -> int:
    """Block number ``block``: always the same user, app, sessions and memories, one user in
    ``HEAVY_USER_EVERY`` with ``HEAVY_MEMORIES`` more; returns its events."""
    rng = random.Random(block)
    _, _, written = user_with_sessions_insert(
        cursor,
        tables,
        username=f"scale-u-{block}",
        app_name=f"agent-{block % APPS}",
        lengths=session_lengths(rng, SESSIONS_PER_USER),
        rng=rng,
        now=now,
        extra_memories=HEAVY_MEMORIES if block % HEAVY_USER_EVERY == 999 else 0,
    )
    return written
