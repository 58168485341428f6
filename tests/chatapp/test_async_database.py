"""Reads from async code on PostgreSQL, on the event loop's own connections."""

import asyncio
import threading

import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from google.genai import types

from chatapp import async_database
from sessions_app import services
from sessions_app.events import Event, EventActions
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
    """Terminate every other connection to the test database, as a server restart would."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
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
async def test_a_read_after_the_server_dropped_the_kept_connection_succeeds(requires_postgres):
    user_id, session_id = await sync_to_async(_session_with_events)(2)
    service = SessionService()
    await service.get_session(app_name=APP, user_id=user_id, session_id=session_id)

    assert await sync_to_async(_end_other_connections)() >= 1
    stored = await service.get_session(app_name=APP, user_id=user_id, session_id=session_id)

    assert [event.text() for event in stored.events] == ["message 0", "message 1"]


@pytest.mark.django_db(transaction=True)
async def test_a_long_history_reads_whole_and_in_order(requires_postgres):
    # Past ROWS_ASSEMBLED_ON_LOOP rows, the events are built off the event loop.
    count = services.ROWS_ASSEMBLED_ON_LOOP + 50
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
