"""Reads that decide and feed memory generation: the app's triggers, what a session may do
with memory, the facts of a turn, the user event a "remember" came from, events' text, and how
far a session has been turned into memories (its watermark)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import Exists, OuterRef

from memory_app.extraction.facts import EXCERPT_CHARS
from memory_app.models import (
    AppIndexVersion,
    GenerationJob,
    Memory,
    MemorySettings,
    MemorySource,
    MemoryStatus,
    MemoryWatermark,
)
from sessions_app.app_policy import app_policy_get
from sessions_app.consent import ConsentCondition
from sessions_app.models import EventRecord, SessionRecord
from sessions_app.selectors import StoreRead, session_key_get, store_read_run


@dataclass(frozen=True)
class TriggerConfig:
    """When an app's conversations are turned into memories (``settings.MEMORY_TRIGGERS``).

    ``every_n_turns``: once that many user turns lie past the watermark (0: never);
    ``every_turn``: after each turn; ``session_idle_seconds``: when a session with unprocessed
    events has been idle that long (0: never); ``session_left_seconds``: that long after the
    user left the session, unless they came back (0: never); ``explicit``: when the user says
    "remember ...".
    """

    every_n_turns: int = 5
    every_turn: bool = False
    session_idle_seconds: int = 1800
    session_left_seconds: int = 120
    explicit: bool = True


def trigger_config_get(*, app_name: str) -> TriggerConfig:
    """The app's triggers (its record's, else its entry in ``MEMORY_TRIGGERS``) over the
    deployment's defaults."""
    return _trigger_config(
        app_name=app_name, overrides=app_policy_get().app_settings(app_name=app_name).triggers
    )


async def trigger_config_get_async(*, app_name: str) -> TriggerConfig:
    """``trigger_config_get`` from an event loop (see ``AppPolicy.app_settings_async``)."""
    settings_of_app = await app_policy_get().app_settings_async(app_name=app_name)
    return _trigger_config(app_name=app_name, overrides=settings_of_app.triggers)


def _trigger_config(*, app_name: str, overrides: dict) -> TriggerConfig:
    defaults = {
        "every_n_turns": settings.MEMORY_TRIGGER_EVERY_N_TURNS,
        "every_turn": settings.MEMORY_TRIGGER_EVERY_TURN,
        "session_idle_seconds": settings.MEMORY_TRIGGER_SESSION_IDLE_SECONDS,
        "session_left_seconds": settings.MEMORY_TRIGGER_SESSION_LEFT_SECONDS,
        "explicit": settings.MEMORY_TRIGGER_EXPLICIT,
    }
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise ValueError(f"MEMORY_TRIGGERS[{app_name!r}] has unknown keys: {sorted(unknown)}")
    return TriggerConfig(**{**defaults, **overrides})


@dataclass(frozen=True)
class SessionMemoryAccess:
    """What a session may do with memory: the user's choices, and never in a temporary chat.

    ``index_versions``: the user's and the app's memory versions (see
    ``memory_index_invalidate``) read in the same query: the user's is None or 0 while no
    memory of theirs was ever written (the preload then searches nothing), the app's keys the
    cache of its guidance. ``past``: whether replies may
    search the user's past chats ("Reference past chats", only while memories are used).
    ``session_key``: the session row's key, which memory names sessions by, read in the same
    query so that the turn's searches need not look it up (None: no such session of the user).
    ``other_chats``: whether the user has another chat of the app, not temporary: without
    one a search of their past chats has nothing to look through.
    """

    use: bool
    create: bool
    index_versions: tuple[int | None, int] | None = None
    temporary: bool = False
    past: bool = False
    session_key: str | None = None
    other_chats: bool = False


def _session_memory_access_assemble(results: list[list[tuple]]) -> SessionMemoryAccess:
    row = results[0][0] if results[0] else None
    if row is None:
        return SessionMemoryAccess(use=False, create=False)
    if row[0]:
        return SessionMemoryAccess(use=False, create=False, temporary=True, session_key=row[6])
    use, create, past = (True if value is None else bool(value) for value in row[1:4])
    return SessionMemoryAccess(
        use=use,
        create=create,
        index_versions=(row[4], row[5] or 0),
        past=use and past,
        session_key=row[6],
        other_chats=bool(row[7]),
    )


def _session_memory_access_read(*, where: str, params: list) -> StoreRead:
    sessions = SessionRecord._meta.db_table
    user_settings = MemorySettings._meta.db_table
    app_versions = AppIndexVersion._meta.db_table
    sql = (
        f"SELECT s.temporary, m.use_enabled, m.create_enabled, m.past_chats_enabled,"
        f" m.index_version,"
        f' (SELECT v.version FROM {app_versions} v WHERE v.app_name = s.app_name), s."key",'
        f" EXISTS (SELECT 1 FROM {sessions} o WHERE o.user_id = s.user_id"
        f' AND o.app_name = s.app_name AND o."key" <> s."key" AND NOT o.temporary)'
        f" FROM {sessions} s LEFT JOIN {user_settings} m ON m.user_id = s.user_id"
        f" WHERE {where}"
    )
    return StoreRead([(sql, params)], _session_memory_access_assemble)


def session_memory_access_read(*, user_pk: int, session_id: str) -> StoreRead:
    """The read behind ``session_memory_access`` (``session_id``: the session row's key): one
    statement, written out in SQL as it runs before every turn (see
    :func:`turn_trigger_facts`); a turn runs it from the event loop."""
    return _session_memory_access_read(
        where='s."key" = %s AND s.user_id = %s', params=[session_id, user_pk]
    )


def session_memory_access_of_id_read(*, app_name: str, user_pk: int, session_id: str) -> StoreRead:
    """``session_memory_access_read`` of the user's session of this id in the app."""
    return _session_memory_access_read(
        where="s.session_id = %s AND s.app_name = %s AND s.user_id = %s",
        params=[session_id, app_name, user_pk],
    )


def memory_session_key(*, app_name: str, user_pk: int, session_id: str | None) -> str | None:
    """The key memory names the user's session of this id in the app by (its row's key; None
    for no session id, or none of theirs)."""
    if session_id is None:
        return None
    return session_key_get(app_name=app_name, user_pk=user_pk, session_id=session_id)


def memory_consent_condition() -> ConsentCondition:
    """What an append checks to mark an event kept from memory (``sessions_app.consent``): the
    user has not turned "Create memories from my chats" off (no settings row means on)."""
    user_settings = MemorySettings._meta.db_table
    return ConsentCondition(
        sql=f'NOT EXISTS (SELECT 1 FROM {user_settings} c WHERE c."user_id" = %s '
        f'AND NOT c."create_enabled")'
    )


def session_memory_access(*, user_pk: int, session_id: str) -> SessionMemoryAccess:
    """Use and create, each allowed only when the user allows it and the chat is not temporary.

    An unknown session (or one of another user) allows nothing.
    """
    return store_read_run(session_memory_access_read(user_pk=user_pk, session_id=session_id))


def session_user_event_get(*, session_id: str, invocation_id: str) -> EventRecord | None:
    """The user event that began the invocation, the source of what the user asked to remember."""
    return (
        EventRecord.objects.filter(
            session_id=session_id, invocation_id=invocation_id, author="user"
        )
        .order_by("sequence")
        .first()
    )


def event_text(record: EventRecord) -> str:
    """The text parts of a stored event, thoughts left out."""
    return content_text(record.content)


def event_excerpt(record: EventRecord) -> str:
    """What was said in a stored event, on one line and cut to a source's excerpt length: the
    words a reviewer checks a memory against, kept with the source."""
    text = " ".join(event_text(record).split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def content_text(content: dict | None) -> str:
    """The text parts of a stored event's content, thoughts left out."""
    parts = (content or {}).get("parts") or []
    return "".join(part.get("text") or "" for part in parts if not part.get("thought"))


@dataclass(frozen=True)
class TurnTriggerFacts:
    """What the turn triggers look at: the text of the user event that began the invocation
    (None without one), the user turns stored past the session's watermark, and whether a job
    of the session is queued (it reads the session's events when it starts, so it will take
    this turn too)."""

    user_text: str | None
    unprocessed_user_turns: int
    job_queued: bool = False


def _turn_trigger_facts_assemble(results: list[list[tuple]]) -> TurnTriggerFacts:
    content, unprocessed, job_queued = results[0][0]
    if isinstance(content, str | bytes):  # text as stored; a driver may decode it itself
        content = EventRecord._meta.get_field("content").from_db_value(content, None, connection)
    return TurnTriggerFacts(
        user_text=None if content is None else content_text(content),
        unprocessed_user_turns=unprocessed,
        job_queued=bool(job_queued),
    )


def _turn_trigger_facts_read(
    *, session_sql: str, session_params: list, invocation_id: str
) -> StoreRead:
    """The three facts in one statement, of the session ``session_sql`` (with its
    ``session_params``) gives the key of."""
    events = EventRecord._meta.db_table
    watermarks = MemoryWatermark._meta.db_table
    jobs = GenerationJob._meta.db_table
    key = session_sql
    sql = (
        f"SELECT (SELECT content FROM {events} WHERE session_id = {key} AND invocation_id = %s"
        f" AND author = 'user' AND COALESCE(memory_excluded, %s) = %s"
        f" ORDER BY sequence LIMIT 1),"
        f" (SELECT COUNT(*) FROM {events} WHERE session_id = {key} AND author = 'user'"
        f" AND rewound = %s AND COALESCE(memory_excluded, %s) = %s AND sequence > COALESCE("
        f"(SELECT last_sequence FROM {watermarks} WHERE session_id = {key}), 0)),"
        f" EXISTS (SELECT 1 FROM {jobs} WHERE session_id = {key} AND status = %s)"
    )
    params = [*session_params, invocation_id, False, False]
    params += [*session_params, False, False, False, *session_params]
    params += [*session_params, str(GenerationJob.Status.QUEUED)]
    return StoreRead([(sql, params)], _turn_trigger_facts_assemble)


def turn_trigger_facts_read(*, session_id: str, invocation_id: str) -> StoreRead:
    """The read behind ``turn_trigger_facts``, of the session row of key ``session_id``: the
    three facts in one statement, written out in SQL: it runs after every turn, where the
    ORM's building of the queries cost more than the database's answering them; a turn runs
    it from the event loop. Rewound user turns, and turns said while memory creation was off
    (``memory_excluded``), are not counted, and the text of an excluded one is not read: no
    trigger ever fires on them."""
    return _turn_trigger_facts_read(
        session_sql="%s", session_params=[session_id], invocation_id=invocation_id
    )


def turn_trigger_facts_of_id_read(
    *, app_name: str, user_pk: int, session_id: str, invocation_id: str
) -> StoreRead:
    """``turn_trigger_facts_read`` of the user's session of this id in the app."""
    sessions = SessionRecord._meta.db_table
    return _turn_trigger_facts_read(
        session_sql=f'(SELECT "key" FROM {sessions} WHERE session_id = %s AND app_name = %s'
        " AND user_id = %s)",
        session_params=[session_id, app_name, user_pk],
        invocation_id=invocation_id,
    )


def turn_trigger_facts(*, session_id: str, invocation_id: str) -> TurnTriggerFacts:
    """What the turn triggers look at, for the invocation's user event."""
    return store_read_run(
        turn_trigger_facts_read(session_id=session_id, invocation_id=invocation_id)
    )


PENDING_TURNS_SHOWN = 5


@dataclass(frozen=True)
class PendingMemory:
    """What of a session is waiting to become memories: the user's messages past the
    watermark (the last ``PENDING_TURNS_SHOWN``, oldest first, and how many in all), the job
    that will process them if one is queued or running, and whether anything will be kept.

    ``job`` says where that work stands, truthfully while its model server is away:
    ``queued``, ``running``, ``waiting`` (an attempt failed on an error that passes, such
    as the server down: ``job_error`` says which, ``next_attempt_at`` when it is tried
    again), or ``failed``/``dead`` when the session's last job gave up on these turns."""

    unprocessed_turns: int
    turns: list[str]
    job: str | None
    create: bool
    temporary: bool
    forgotten_with_it: int = 0
    job_error: str = ""
    next_attempt_at: datetime | None = None


def session_memories_drawn_only(*, user_pk: int, session_id: str) -> int:
    """How many of the user's memories deleting the session would take: those kept for it
    alone (session scope), and those drawn from it and nowhere else, unless its app keeps
    memories after their sessions."""
    record = SessionRecord.objects.filter(pk=session_id, user_id=user_pk).first()
    if record is None:
        return 0
    own = Memory.objects.filter(user_id=user_pk, session_id=session_id).exclude(
        status=MemoryStatus.RETIRED
    )
    count = own.count()
    if app_policy_get().app_settings(app_name=record.app_name).memories_outlive_sessions:
        return count
    elsewhere = MemorySource.objects.filter(memory_id=OuterRef("pk")).exclude(
        event__session_id=session_id
    )
    drawn = (
        Memory.objects.filter(user_id=user_pk, sources__event__session_id=session_id)
        .exclude(session_id=session_id)
        .exclude(status=MemoryStatus.RETIRED)
        .exclude(Exists(elsewhere))
        .distinct()
    )
    return count + drawn.count()


def session_pending_memory(*, user_pk: int, session_id: str) -> PendingMemory | None:
    """The session's pending memory work, or None when the session is not the user's."""
    if not SessionRecord.objects.filter(pk=session_id, user_id=user_pk).exists():
        return None
    access = session_memory_access(user_pk=user_pk, session_id=session_id)
    unprocessed = (
        EventRecord.objects.filter(
            session_id=session_id,
            author="user",
            rewound=False,
            sequence__gt=watermark_get(session_id=session_id),
        )
        .exclude(memory_excluded=True)
        .order_by("-sequence")
    )
    texts = [
        " ".join(content_text(content).split())
        for content in unprocessed.values_list("content", flat=True)[:PENDING_TURNS_SHOWN]
    ]
    job = _pending_job(session_id=session_id)
    state = _pending_job_state(job)
    return PendingMemory(
        unprocessed_turns=unprocessed.count(),
        turns=[text for text in reversed(texts) if text],
        job=state,
        create=access.create,
        temporary=access.temporary,
        forgotten_with_it=session_memories_drawn_only(user_pk=user_pk, session_id=session_id),
        job_error=job.error if job is not None and state != "queued" else "",
        next_attempt_at=job.retry_at if job is not None else None,
    )


def _pending_job(*, session_id: str) -> GenerationJob | None:
    """The job that will take the session's pending turns (running before queued), else the
    session's last job if it gave up (failed or dead)."""
    active = (
        GenerationJob.objects.filter(
            session_id=session_id,
            status__in=[GenerationJob.Status.RUNNING, GenerationJob.Status.QUEUED],
        )
        .order_by("status")
        .first()
    )
    if active is not None:
        return active
    last = GenerationJob.objects.filter(session_id=session_id).order_by("-created_at").first()
    if last is not None and last.status in (
        GenerationJob.Status.FAILED,
        GenerationJob.Status.DEAD,
    ):
        return last
    return None


def _pending_job_state(job: GenerationJob | None) -> str | None:
    if job is None:
        return None
    if job.status == GenerationJob.Status.QUEUED and job.attempts and job.error:
        return "waiting"
    return job.status


def watermark_get(*, session_id: str) -> int:
    """The last sequence of the session already turned into memories (0: none yet)."""
    found = MemoryWatermark.objects.filter(session_id=session_id).values_list(
        "last_sequence", flat=True
    )
    return next(iter(found), 0)
