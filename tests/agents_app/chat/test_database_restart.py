"""A chat turn across a PostgreSQL restart or outage (issue 27): nothing the person sent is
lost, and the socket tells the truth about what is stored.

The restart is played by ending every other connection to the test database
(``pg_terminate_backend``, as a restart ends them), not by restarting the shared cluster; an
outage that outlasts the turn's wait for the database, by refusing new connections to the
test database for that while (``ALLOW_CONNECTIONS false``). To end a connection in the middle
of a turn's write, the write is held first behind a lock of the events table. SQLite has no
server connection to lose: these tests need PostgreSQL.
"""

import contextlib
import time
from collections.abc import Iterator

import psycopg
import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.db import connection, connections

from agents_app.chat.protocol import MESSAGE_NOT_STORED, REPLY_NOT_STORED
from sessions_app.models import EventRecord
from tests.agents_app.chat.test_consumers import (
    WAIT,
    _cookie,
    _event_text,
    _open,
    _send_message,
    _stored,
    _stored_text,
    _until,
    chat_settings,  # noqa: F401 (autouse fixture)
    close_thread_connections,  # noqa: F401 (autouse fixture)
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(90)]

STORY = "tell me " + "a long story " * 30


def _database_restarted() -> None:
    """End every other connection to the test database, as a PostgreSQL restart does, and
    wait until each is gone; then this thread's own."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    connections.close_all()


@pytest.fixture
def restartable_database(requires_postgres):
    """PostgreSQL, and the test's own connection, which a restart ends too, closed before the
    test's data is flushed."""
    yield
    connections["default"].close()


def _errors(frames):
    return [frame for frame in frames if frame["type"] == "error"]


def _replies(records):
    return [record for record in records if record.author != "user"]


async def test_a_restart_mid_stream_stores_the_reply_and_reports_no_loss(
    restartable_database, settings, user, session
):
    """The connections open before the restart are dead: none is reused unchecked, so the
    turn stores its reply and says nothing of a loss; the next turn runs as usual."""
    settings.MEMORY_TRIGGER_EVERY_TURN = True
    communicator = await _open(session.id, await database_sync_to_async(_cookie)(user))
    await _send_message(communicator, "Warm every connection up", "m-0")
    await _until(communicator, "turn_complete")
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = 0.05

    await _send_message(communicator, "Hello across the restart", "m-1")
    started = await _until(communicator, "delta")
    await sync_to_async(_database_restarted, thread_sensitive=False)()
    during = started + await _until(communicator, "turn_complete")
    await _send_message(communicator, "And after it", "m-2")
    after = await _until(communicator, "turn_complete")

    assert _errors(during) == []
    assert during[-1]["interrupted"] is False and during[-1]["message_id"]
    assert _errors(after) == []
    await database_sync_to_async(connections.close_all)()
    stored = await _stored(session.id)
    assert during[-1]["message_id"] in [record.event_id for record in stored]
    texts = [_stored_text(record) for record in stored]
    assert "Hello across the restart" in texts and "And after it" in texts
    await communicator.disconnect()


class _Outage:
    """Writes of events held behind a lock, then the connections that wait on it ended (and,
    with ``lasting``, new ones refused) mid-turn; on its own connections, outside Django's."""

    def __init__(self) -> None:
        self.database = connection.settings_dict["NAME"]
        parameters = connection.get_connection_params()
        self.locker = psycopg.connect(**parameters)
        self.admin = psycopg.connect(**{**parameters, "dbname": "postgres"}, autocommit=True)

    def writes_held(self) -> None:
        self.locker.execute(f"LOCK TABLE {EventRecord._meta.db_table} IN EXCLUSIVE MODE")

    def strike(self, *, lasting: bool) -> None:
        """Once a write waits on the lock, end every connection but the locker's (and refuse
        new ones if ``lasting``), then let writes through again."""
        deadline = time.monotonic() + WAIT
        while not self._write_waiting():
            assert time.monotonic() < deadline, "no write reached the lock"
            time.sleep(0.02)
        if lasting:
            self.admin.execute(f'ALTER DATABASE "{self.database}" WITH ALLOW_CONNECTIONS false')
        self.locker.execute(
            "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        self.locker.commit()

    def _write_waiting(self) -> bool:
        row = self.locker.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND wait_event_type = 'Lock'"
        ).fetchone()
        return row[0] > 0

    def end(self) -> None:
        if self.admin.closed:
            return
        self.admin.execute(f'ALTER DATABASE "{self.database}" WITH ALLOW_CONNECTIONS true')
        self.locker.close()
        self.admin.close()


@pytest.fixture
def outage(restartable_database) -> Iterator[_Outage]:
    played = _Outage()
    try:
        yield played
    finally:
        played.end()


@contextlib.asynccontextmanager
async def _socket(user, session):
    communicator = await _open(session.id, await database_sync_to_async(_cookie)(user))
    try:
        yield communicator
    finally:
        await communicator.disconnect()


def _chunk_delay(held_before: str) -> float:
    """The offline model's pause between pieces: when the database is to fail the reply's write,
    the reply streams for about three seconds, so that the test takes its lock before the reply
    is written even on a busy machine (0.6 s was not always enough)."""
    return 0.1 if held_before == "reply" else 0.02


async def _turn_across_outage(communicator, outage, *, held_before: str, lasting: bool):
    """The frames of turn ``m-1`` when the database fails its write of the user's message
    (``held_before`` "message") or of its reply ("reply")."""
    if held_before == "message":
        await sync_to_async(outage.writes_held, thread_sensitive=False)()
        await _send_message(communicator, STORY, "m-1")
        frames = []
    else:
        await _send_message(communicator, STORY, "m-1")
        frames = await _until(communicator, "delta")
        await sync_to_async(outage.writes_held, thread_sensitive=False)()
    await sync_to_async(outage.strike, thread_sensitive=False)(lasting=lasting)
    return frames + await _until(communicator, "turn_complete")


@pytest.mark.parametrize("held_before", ["message", "reply"])
async def test_a_write_the_database_lost_is_made_again_once_it_is_back(
    outage, settings, user, session, held_before
):
    """The write was not committed: once the database answers, the turn runs on under its
    claim, stores the message (if it was the one lost) and the reply, and ends as usual."""
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = _chunk_delay(held_before)
    async with _socket(user, session) as communicator:
        frames = await _turn_across_outage(
            communicator, outage, held_before=held_before, lasting=False
        )

    assert _errors(frames) == []
    complete = frames[-1]
    assert complete["interrupted"] is False and complete["message_id"]
    await database_sync_to_async(connections.close_all)()
    stored = await _stored(session.id)
    assert [record.event_id for record in stored if record.author == "user"] == ["msg-m-1"]
    assert [record.event_id for record in _replies(stored)] == [complete["message_id"]]
    final = [frame for frame in frames if frame["type"] == "event"][-1]["event"]
    assert final["id"] == complete["message_id"]
    assert _event_text(final) == _stored_text(_replies(stored)[0])
    started = [frame for frame in frames if frame["type"] == "turn_started"]
    # A reply cut off mid-stream runs on from the stored message, which says so.
    assert [frame["resumed"] for frame in started] == (
        [False] if held_before == "message" else [False, True]
    )


@pytest.mark.parametrize("held_before", ["message", "reply"])
async def test_an_outage_that_lasts_says_what_is_stored_and_the_message_can_be_sent_again(
    outage, settings, user, session, held_before
):
    """The database stays away longer than the turn waits for it: the socket says whether the
    person's message is stored; nothing is lost, and once the database is back the same
    message (same ``client_message_id``) gets its reply."""
    settings.OFFLINE_MODEL_CHUNK_DELAY_SECONDS = _chunk_delay(held_before)
    settings.TURN_LEASE_SECONDS = 1.0
    async with _socket(user, session) as communicator:
        frames = await _turn_across_outage(
            communicator, outage, held_before=held_before, lasting=True
        )
        await sync_to_async(outage.end, thread_sensitive=False)()
        await database_sync_to_async(connections.close_all)()
        stored_during = await _stored(session.id)
        await _send_message(communicator, STORY, "m-1")
        again = await _until(communicator, "turn_complete")

    assert [error["code"] for error in _errors(frames)] == ["database_unavailable"]
    message_stored = held_before == "reply"
    assert _errors(frames)[0]["message"] == (
        REPLY_NOT_STORED if message_stored else MESSAGE_NOT_STORED
    )
    assert frames[-1]["message_id"] is None and frames[-1]["interrupted"] is True
    assert [record.event_id for record in stored_during] == (["msg-m-1"] if message_stored else [])
    assert _errors(again) == []
    assert again[-1]["interrupted"] is False and again[-1]["message_id"]
    await database_sync_to_async(connections.close_all)()
    stored = await _stored(session.id)
    assert [record.event_id for record in stored] == ["msg-m-1", again[-1]["message_id"]]
