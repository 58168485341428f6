"""The rows every step measures, made once at the start of the fill and found again by name.

The subject user has 10,000 memories in the subject app, a 2,000-event session (written in
bulk, like the background) and a 1,000-event session written through the product's services
and summarised as a long session is (``bench.turn_overhead.session_build``), its memory
watermark at its last event so a turn queues no job. The lister has 5,000 sessions in the
same app, with their state and no events.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import psycopg

from bench.scale import fill
from bench.turn_overhead import APP_NAME as SUBJECT_APP

SUBJECT_USER = "scale-subject"
LISTER_USER = "scale-lister"
LONG_SESSION = f"{SUBJECT_USER}-0"
TURN_SESSION_TITLE = "turn subject"
APPEND_SESSION_TITLE = "append subject"
TRANSIENT_PREFIXES = ("scale-del-", "scale-ttl-", "scale-gen-")


@dataclass(frozen=True)
class Subjects:
    user_pk: int
    long_session_id: str
    turn_session_id: str
    turn_last_sequence: int
    lister_pk: int


def subjects_create(
    database: psycopg.Connection, tables: fill.Tables, *, fill_started: float
) -> None:
    """Make the subjects unless a previous run did; resumable like the fill."""
    from django.contrib.auth import get_user_model

    from bench.turn_overhead import InstantModel, session_build
    from memory_app.models import MemoryWatermark
    from sessions_app.models import SessionRecord

    with database.cursor() as cursor:
        progress = fill.Progress(cursor)
        if not progress.get("subjects"):
            rng = random.Random(1)
            fill.pools_create(cursor)
            fill.app_memories_insert(
                cursor,
                tables,
                app_names=[SUBJECT_APP, *(f"agent-{n}" for n in range(fill.APPS))],
            )
            _, _, events = fill.user_with_sessions_insert(
                cursor,
                tables,
                username=SUBJECT_USER,
                app_name=SUBJECT_APP,
                lengths=[fill.LONG_SESSION_EVENTS],
                rng=rng,
                now=fill_started,
                extra_memories=fill.HEAVY_MEMORIES - fill.LONG_SESSION_EVENTS // 10,
            )
            lister_pk = fill.user_insert(cursor, tables, username=LISTER_USER)
            plan = fill.session_plan(
                prefix=LISTER_USER,
                lengths=[0] * fill.LISTED_SESSIONS,
                rng=rng,
                now=fill_started,
                age_days=(0.01, 25.0),
            )
            fill.sessions_insert(
                cursor,
                tables,
                user_pk=lister_pk,
                app_name=SUBJECT_APP,
                plan=plan,
                processed=False,
            )
            progress.add("subjects", 1)
            progress.add("events", events)
            database.commit()
        if progress.get("turn_session"):
            return
    user = get_user_model().objects.get(username=SUBJECT_USER)
    SessionRecord.objects.filter(user=user).exclude(pk=LONG_SESSION).delete()
    session_id, last_sequence = session_build(
        user_id=str(user.pk), events=fill.TURN_SESSION_EVENTS, model=InstantModel()
    )
    MemoryWatermark.objects.update_or_create(
        session_id=session_id, defaults={"last_sequence": last_sequence}
    )
    SessionRecord.objects.filter(pk=session_id).update(title=TURN_SESSION_TITLE)
    with database.cursor() as cursor:
        progress = fill.Progress(cursor)
        progress.add("turn_session", 1)
        progress.add("turn_last_sequence", last_sequence)
        progress.add("events", last_sequence)
        database.commit()


def subjects_get(database: psycopg.Connection) -> Subjects:
    from django.contrib.auth import get_user_model

    from sessions_app.models import SessionRecord

    users = dict(
        get_user_model()
        .objects.filter(username__in=[SUBJECT_USER, LISTER_USER])
        .values_list("username", "pk")
    )
    with database.cursor() as cursor:
        last_sequence = fill.Progress(cursor).get("turn_last_sequence")
        database.commit()
    return Subjects(
        user_pk=users[SUBJECT_USER],
        long_session_id=LONG_SESSION,
        turn_session_id=SessionRecord.objects.get(
            user_id=users[SUBJECT_USER], title=TURN_SESSION_TITLE
        ).pk,
        turn_last_sequence=last_sequence,
        lister_pk=users[LISTER_USER],
    )


def transients_clear(subjects: Subjects) -> None:
    """Remove what an interrupted measurement left: its users, the append session, the
    turns of the turn session."""
    from django.contrib.auth import get_user_model
    from django.db.models import Q

    from bench.turn_overhead import turn_events_delete
    from chatapp.services import user_data_delete
    from sessions_app.models import SessionRecord

    left = Q()
    for prefix in TRANSIENT_PREFIXES:
        left |= Q(username__startswith=prefix)
    for user in get_user_model().objects.filter(left):
        user_data_delete(user=user, delete_account=True)
    SessionRecord.objects.filter(user_id=subjects.user_pk, title=APPEND_SESSION_TITLE).delete()
    turn_events_delete(
        session_id=subjects.turn_session_id, last_sequence=subjects.turn_last_sequence
    )
