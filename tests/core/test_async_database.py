"""Reads from async code on PostgreSQL, on the event loop's own connections."""

import asyncio
import threading

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.db import NotSupportedError, OperationalError, connection
from google.genai import types

from core import async_database
from sessions_app import selectors, services
from sessions_app.errors import DuplicateEventError, SessionNotFoundError
from sessions_app.events import Event, EventActions
from sessions_app.models import EventRecord, SessionRecord
from sessions_app.services import GetSessionConfig, SessionService
from tests.factories import UserFactory

APP = "demo"


def _session_with_events(count: int) -> tuple[str, str]:
    user = UserFactory()
    session = services.session_create(app_name=APP, user_id=str(user.pk), state={"step": 0})
    for number in range(count):
        event = Event(
            author="user",
            content=types.Content(role="user", parts=[types.Part(text=f"message {number}")]),
            actions=EventActions(state_delta={"step": number}),
        )
        services.event_append(session=session, event=event)
    return str(user.pk), session.id


def _end_other_connections() -> int:
    """Terminate every other connection to the test database, as a server restart would,
    and wait until each is gone (its goodbye sent)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
async def test_a_read_does_not_wait_for_the_database_thread(requires_postgres):
    user_id, session_id = await sync_to_async(_session_with_events)(3)
    service = SessionService()
    release = threading.Event()
    # Django's thread-sensitive executor (the one thread that sync ORM work from
    # async code runs on) is busy until the read has come back.
    busy = asyncio.ensure_future(sync_to_async(release.wait)())
    try:
        stored = await asyncio.wait_for(
            service.get_session(app_name=APP, user_id=user_id, session_id=session_id), timeout=10
        )
        listed = await asyncio.wait_for(
            service.list_sessions(app_name=APP, user_id=user_id), timeout=10
        )
        assert not busy.done()
    finally:
        release.set()
        await busy

    assert [event.text() for event in stored.events] == ["message 0", "message 1", "message 2"]
    assert stored.state == {"step": 2}
    assert [session.id for session in listed.sessions] == [session_id]


@pytest.mark.django_db(transaction=True)
async def test_a_long_history_reads_whole_and_in_order(requires_postgres):
    # Past ROWS_ASSEMBLED_ON_LOOP rows, the events are built off the event loop.
    count = selectors.ROWS_ASSEMBLED_ON_LOOP + 50
    user_id, session_id = await sync_to_async(_session_with_events)(count)
    service = SessionService()

    stored = await service.get_session(app_name=APP, user_id=user_id, session_id=session_id)
    recent = await service.get_session(
        app_name=APP,
        user_id=user_id,
        session_id=session_id,
        config=GetSessionConfig(num_recent_events=5),
    )

    assert [event.text() for event in stored.events] == [f"message {n}" for n in range(count)]
    assert [event.text() for event in recent.events] == [
        f"message {n}" for n in range(count - 5, count)
    ]
    assert stored.state == {"step": count - 1}


@pytest.mark.django_db(transaction=True)
async def test_another_users_session_reads_as_absent_from_async_code():
    _, session_id = await sync_to_async(_session_with_events)(1)
    stranger = await sync_to_async(UserFactory)()

    stored = await SessionService().get_session(
        app_name=APP, user_id=str(stranger.pk), session_id=session_id
    )

    assert stored is None


@pytest.mark.django_db(transaction=True)
async def test_joined_reads_go_in_one_round_trip_and_answer_each_its_own(monkeypatch):
    user_id, session_id = await sync_to_async(_session_with_events)(2)
    key = await sync_to_async(
        SessionRecord.objects.filter(session_id=session_id).values_list("key", flat=True).get
    )()
    round_trips = []
    fetch_each = async_database.fetch_each

    async def counted(statements, **kwargs):
        round_trips.append(len(statements))
        return await fetch_each(statements, **kwargs)

    monkeypatch.setattr(async_database, "fetch_each", counted)

    session, owned, compaction = await selectors.store_read_async(
        async_database.store_reads_joined(
            selectors.session_get_read(app_name=APP, user_id=user_id, session_id=session_id),
            selectors.session_key_and_app_read(
                user_pk=int(user_id), session_id=session_id, app_name=APP
            ),
            selectors.session_latest_compaction_read(
                app_name=APP, user_pk=int(user_id), session_id=session_id
            ),
        )
    )

    assert [event.text() for event in session.events] == ["message 0", "message 1"]
    assert owned == (key, APP)
    assert compaction is None
    assert round_trips == ([4] if async_database.available() else [])


@pytest.mark.django_db(transaction=True)
async def test_a_burst_of_reads_opens_no_more_connections_than_the_cap(
    requires_postgres, monkeypatch
):
    user_id, session_id = await sync_to_async(_session_with_events)(2)
    opened = []
    connect = psycopg.AsyncConnection.connect

    async def counting_connect(*args, **kwargs):
        opened.append(kwargs.get("application_name"))
        return await connect(*args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", counting_connect)
    service = SessionService()

    sessions = await asyncio.gather(
        *(
            service.get_session(app_name=APP, user_id=user_id, session_id=session_id)
            for _ in range(40)
        )
    )

    assert all(len(session.events) == 2 for session in sessions)
    assert 1 <= len(opened) <= async_database.CONNECTIONS_PER_LOOP
    assert set(opened) == {async_database.APPLICATION_NAME}


def _event(text: str, **delta) -> Event:
    return Event(
        author="user",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        actions=EventActions(state_delta=delta),
    )


def _stored_texts(session_id: str) -> list[str]:
    return [
        stored.event.text()
        for stored in selectors.stored_events_page(
            session_key=SessionRecord.objects.get(session_id=session_id).pk,
            after_sequence=0,
            page_size=100,
        ).events
    ]


@pytest.mark.django_db(transaction=True)
async def test_an_append_does_not_wait_for_the_database_thread(requires_postgres):
    user_id, session_id = await sync_to_async(_session_with_events)(1)
    service = SessionService()
    session = await service.get_session(app_name=APP, user_id=user_id, session_id=session_id)
    release = threading.Event()
    busy = asyncio.ensure_future(sync_to_async(release.wait)())
    try:
        await asyncio.wait_for(
            service.append_event(session, _event("hello", step=7, **{"temp:draft": True})),
            timeout=10,
        )
        assert not busy.done()
    finally:
        release.set()
        await busy

    assert session.state == {"step": 7, "temp:draft": True}
    stored = await service.get_session(app_name=APP, user_id=user_id, session_id=session_id)
    assert stored.state == {"step": 7}
    assert [event.text() for event in stored.events] == ["message 0", "hello"]
    assert stored.events[-1].actions.state_delta == {"step": 7}


@pytest.mark.django_db(transaction=True)
async def test_an_append_that_fails_stores_nothing_and_gives_the_event_back_whole(
    requires_postgres,
):
    user_id, session_id = await sync_to_async(_session_with_events)(1)
    service = SessionService()
    session = await service.get_session(app_name=APP, user_id=user_id, session_id=session_id)
    first = await service.append_event(session, _event("once", step=1))
    again = _event("twice", step=2, **{"temp:note": "x"})
    again.id = first.id

    with pytest.raises(DuplicateEventError):
        await service.append_event(session, again)

    assert again.actions.state_delta == {"step": 2, "temp:note": "x"}
    stranger = await sync_to_async(UserFactory)()
    foreign = session.model_copy(update={"user_id": str(stranger.pk)})
    with pytest.raises(SessionNotFoundError):
        await service.append_event(foreign, _event("not mine", step=3))
    assert await sync_to_async(_stored_texts)(session_id) == ["message 0", "once"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("goodbye_heard", [True, False])
async def test_after_the_server_dropped_the_kept_connection(
    requires_postgres, monkeypatch, goodbye_heard
):
    """A kept connection whose server hung up is not used again when its goodbye has
    arrived; if it has not, a read is repeated on a new connection, while an append, which
    cannot know whether it was stored, fails once with nothing stored."""
    if not goodbye_heard:
        monkeypatch.setattr(async_database, "_quiet", lambda connection: not connection.closed)
    user_id, session_id = await sync_to_async(_session_with_events)(1)
    service = SessionService()
    session = await service.get_session(app_name=APP, user_id=user_id, session_id=session_id)

    assert await sync_to_async(_end_other_connections)() >= 1
    stored = await service.get_session(app_name=APP, user_id=user_id, session_id=session_id)
    assert [event.text() for event in stored.events] == ["message 0"]

    assert await sync_to_async(_end_other_connections)() >= 1
    event = _event("after the restart", step=5, **{"temp:try": 1})
    if goodbye_heard:
        await service.append_event(session, event)
        expected = ["message 0", "after the restart"]
    else:
        with pytest.raises(OperationalError):
            await service.append_event(session, event)
        assert event.actions.state_delta == {"step": 5, "temp:try": 1}
        expected = ["message 0"]
    assert await sync_to_async(_stored_texts)(session_id) == expected


@pytest.mark.django_db(transaction=True)
async def test_each_statement_is_prepared_once_and_planned_for_good(requires_postgres):
    user_id, session_id = await sync_to_async(_session_with_events)(1)
    await sync_to_async(_events_bulk_add)(session_id=session_id, count=2000)
    service = SessionService()
    for _ in range(8):
        await service.get_session(
            app_name=APP,
            user_id=user_id,
            session_id=session_id,
            config=GetSessionConfig(num_recent_events=20),
        )

    # One read at a time, so this runs on the connection that served those reads.
    (rows,) = await async_database.fetch_each(
        [
            (
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement NOT LIKE %s",
                ["%pg_prepared_statements%"],
            )
        ]
    )

    assert len(rows) == 2  # the session with its states, and its events
    assert all(generic + custom == 8 for _, generic, custom in rows)
    # PostgreSQL plans the first five executions one by one, then keeps one plan when it
    # costs no more. With the LIMIT a parameter, the events statement of a long session
    # was planned anew at every execution.
    assert all(custom == 5 and generic == 3 for _, generic, custom in rows), rows


@pytest.mark.django_db(transaction=True)
async def test_a_statement_whose_prepared_plan_went_stale_works_again(requires_postgres):
    await sync_to_async(_scratch_table)("CREATE TABLE async_scratch (value integer)")
    try:
        read = [("SELECT value FROM async_scratch WHERE value > %s", [0])]
        await sync_to_async(_scratch_table)("INSERT INTO async_scratch VALUES (1)")
        assert await async_database.fetch_each(read) == [[(1,)]]
        await sync_to_async(_scratch_table)(
            "ALTER TABLE async_scratch ALTER COLUMN value TYPE bigint"
        )

        # The prepared plan's result type no longer matches: that read fails, and its
        # connection is not used again.
        with pytest.raises(NotSupportedError):
            await async_database.fetch_each(read)
        assert await async_database.fetch_each(read) == [[(1,)]]
    finally:
        await sync_to_async(_scratch_table)("DROP TABLE async_scratch")


def _events_bulk_add(*, session_id: str, count: int) -> None:
    """Add ``count`` plain events to a session in one statement, then refresh the
    planner's statistics, as a long-lived store would have them."""
    record = SessionRecord.objects.get(session_id=session_id)
    EventRecord.objects.bulk_create(
        EventRecord(
            session=record,
            user_id=record.user_id,
            app_name=record.app_name,
            sequence=record.last_sequence + number,
            event_id=f"bulk-{number}",
            author="user",
            timestamp=record.last_update_time,
            content={"role": "user", "parts": [{"text": f"bulk {number}"}]},
            actions={"state_delta": {}},
        )
        for number in range(1, count + 1)
    )
    SessionRecord.objects.filter(session_id=session_id).update(
        last_sequence=record.last_sequence + count
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _scratch_table(sql: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(sql)


@pytest.mark.django_db(transaction=True)
def test_the_connections_of_a_closed_loop_are_closed_when_another_loop_reads(requires_postgres):
    user_id, session_id = _session_with_events(1)

    async def read() -> int:
        """Read the session, and say which server process served it."""
        await SessionService().get_session(app_name=APP, user_id=user_id, session_id=session_id)
        (rows,) = await async_database.fetch_each([("SELECT pg_backend_pid()", [])])
        return rows[0][0]

    first, second = asyncio.new_event_loop(), asyncio.new_event_loop()
    try:
        first_backend = first.run_until_complete(read())
        first.close()
        assert _backends_alive([first_backend]) == {first_backend}

        second_backend = second.run_until_complete(read())

        # The closed loop's connection is gone; the second loop keeps its own.
        assert _backends_alive([first_backend, second_backend]) == {second_backend}
    finally:
        first.close()
        second.close()


def _backends_alive(pids: list[int]) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)", [pids])
        return {pid for (pid,) in cursor.fetchall()}


@pytest.mark.django_db(transaction=True)
async def test_a_connection_with_many_statements_prepared_is_replaced(
    requires_postgres, monkeypatch
):
    monkeypatch.setattr(async_database, "PREPARED_PER_CONNECTION", 3)
    user_id, session_id = await sync_to_async(_session_with_events)(5)
    service = SessionService()

    async def backend_and_prepared() -> tuple[int, int]:
        (rows,) = await async_database.fetch_each(
            [("SELECT pg_backend_pid(), (SELECT count(*) FROM pg_prepared_statements)", [])]
        )
        return rows[0]

    first_backend, _ = await backend_and_prepared()
    # Each count of recent events is a statement of its own.
    for count in (1, 2, 3):
        stored = await service.get_session(
            app_name=APP,
            user_id=user_id,
            session_id=session_id,
            config=GetSessionConfig(num_recent_events=count),
        )
        assert len(stored.events) == count
    backend, prepared = await backend_and_prepared()

    assert backend != first_backend
    assert prepared == 1  # only the statement that asked
