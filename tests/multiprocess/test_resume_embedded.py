"""A turn survives the death of its process on the embedded default (``make run``): one daphne
process on SQLite, whose own periodic runner sweeps. The process is killed (SIGKILL) mid-turn
and started again, or stopped (SIGTERM); the user's message gets exactly one answer (issue
16)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.migrated_templates import sqlite_migrated
from tests.multiprocess.stack import (
    OF_SESSION,
    TURN_TIMINGS,
    Browser,
    Daphne,
    async_wait_until,
    embedded_environment,
    frames_of,
    reply_text,
)
from tests.multiprocess.test_resume import LONG_TEXT, SHORT_TEXT, SLOW

pytestmark = pytest.mark.timeout(300)


class EmbeddedApp:
    """The app as ``make run`` serves it, in a folder of its own, restartable."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.database = folder / "db.sqlite3"
        self.env = embedded_environment(database_url=f"sqlite:///{self.database}")
        self.web: Daphne | None = None
        sqlite_migrated(self.database, env=self.env)

    def start(self, **env: str) -> Daphne:
        self.web = Daphne("web-embedded", {**self.env, **env}, self.folder).start().wait_ready()
        return self.web

    def rows(self, sql: str, *params) -> list[tuple]:
        import sqlite3

        with sqlite3.connect(self.database) as connection:
            return connection.execute(sql.replace("%s", "?"), params).fetchall()


@pytest.fixture
def embedded() -> Iterator[EmbeddedApp]:
    folder = Path(tempfile.mkdtemp(prefix="chat-embedded-"))
    app = EmbeddedApp(folder)
    try:
        yield app
    finally:
        if app.web is not None:
            print(app.web.log_tail())
            app.web.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _events(app: EmbeddedApp, session_id: str) -> list[tuple]:
    return [
        (event_id, bool(complete) if complete is not None else None, interrupted, error)
        for event_id, complete, interrupted, error in app.rows(
            "SELECT event_id, turn_complete, CASE WHEN interrupted THEN 1 END, error_code "
            f"FROM sessions_app_eventrecord WHERE session_id {OF_SESSION} ORDER BY sequence",
            session_id,
        )
    ]


async def _killed_mid_turn(app: EmbeddedApp, client_message_id: str) -> tuple[Browser, str]:
    web = app.start(**SLOW)
    browser = Browser(web.base_url).sign_up()
    session_id = browser.session_create()
    socket = await browser.socket(session_id)
    await socket.send(
        {"type": "user_message", "text": LONG_TEXT, "client_message_id": client_message_id}
    )
    await socket.wait_for(lambda frame: frame["type"] == "delta" and frame["seq"] >= 1)
    web.kill()
    return browser, session_id


async def test_a_killed_process_started_again_answers_a_resent_message_once(embedded):
    browser, session_id = await _killed_mid_turn(embedded, "embedded-1")
    browser.base_url = embedded.start().base_url

    socket = await browser.socket(session_id)
    frames = await socket.turn(LONG_TEXT, client_message_id="embedded-1")

    assert [frame["resumed"] for frame in frames_of(frames, "turn_started")] == [True]
    assert reply_text(frames) == f"You said: \u201c{LONG_TEXT}\u201d."
    assert frames_of(frames, "turn_complete")[0]["duplicate"] is False
    assert _events(embedded, session_id) == [
        ("msg-embedded-1", None, None, ""),
        ("msg-embedded-1.1", True, None, ""),
    ]
    await socket.close()


async def test_a_killed_process_started_again_sweeps_the_turn_nobody_resent(embedded):
    _, session_id = await _killed_mid_turn(embedded, "embedded-2")
    embedded.start()

    await async_wait_until(
        lambda: len(_events(embedded, session_id)) == 2,
        timeout=60,
        what="the in-process sweeper to end the turn",
    )
    assert _events(embedded, session_id) == [
        ("msg-embedded-2", None, None, ""),
        ("msg-embedded-2.1", True, 1, "server_stopped"),
    ]


async def test_sigterm_finishes_short_turns_and_stores_the_rest_interrupted_in_time(embedded):
    web = embedded.start(**SLOW)
    browser = Browser(web.base_url).sign_up()
    long_session, short_session = browser.session_create(), browser.session_create()
    long_socket = await browser.socket(long_session)
    await long_socket.send({"type": "user_message", "text": LONG_TEXT, "client_message_id": "long"})
    await long_socket.wait_for(lambda frame: frame["type"] == "delta" and frame["seq"] >= 1)
    short_socket = await browser.socket(short_session)
    await short_socket.send(
        {"type": "user_message", "text": SHORT_TEXT, "client_message_id": "short"}
    )
    await short_socket.wait_for(lambda frame: frame["type"] == "delta")
    stopped_at = time.monotonic()

    web.terminate()
    web.process.wait(timeout=30)
    took = time.monotonic() - stopped_at

    assert took < float(TURN_TIMINGS["TURN_SHUTDOWN_GRACE_SECONDS"]) + 5, f"took {took:.1f} s"
    await short_socket.wait_for(lambda frame: frame["type"] == "turn_complete")
    await long_socket.wait_for(lambda frame: frame["type"] == "turn_complete")
    assert reply_text(short_socket.frames) == f"You said: \u201c{SHORT_TEXT}\u201d."
    assert frames_of(short_socket.frames, "turn_complete")[0]["interrupted"] is False
    assert frames_of(long_socket.frames, "turn_complete")[0]["interrupted"] is True
    assert [error["code"] for error in frames_of(long_socket.frames, "error")] == ["server_stopped"]
    assert _events(embedded, short_session) == [
        ("msg-short", None, None, ""),
        ("msg-short.1", True, None, ""),
    ]
    assert _events(embedded, long_session) == [
        ("msg-long", None, None, ""),
        ("msg-long.1", True, 1, "server_stopped"),
    ]
    assert embedded.rows("SELECT count(*) FROM agents_app_turnclaim") == [(0,)]
