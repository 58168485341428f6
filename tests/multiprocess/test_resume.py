"""A turn survives the death of the process that runs it (issue 16), on the production topology:
two daphne processes, PostgreSQL, Redis, a worker and beat (the sweeper). The process serving a
streaming turn is killed (SIGKILL) or stopped (SIGTERM); the user's message gets exactly one
answer either way: the reply, resumed on the other process, or a stored interruption."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.multiprocess.stack import (
    OF_SESSION,
    TURN_TIMINGS,
    async_wait_until,
    frames_of,
    reply_text,
)

pytestmark = pytest.mark.multiprocess

SLOW = {"OFFLINE_MODEL_CHUNK_DELAY_SECONDS": "0.3"}
LONG_TEXT = " ".join(f"word{n}" for n in range(120))  # about 12 s of streaming at 0.3 s a chunk
# "Don't forget" asks for memory generation when the turn ends (the explicit trigger).
REMEMBERED_TEXT = f"Don't forget that I play the cello. {LONG_TEXT}"
SHORT_TEXT = " ".join(f"w{n}" for n in range(12))  # about 1.5 s: within the grace period


def turn_events(postgres, session_id: str) -> list[tuple]:
    """(event id, turn_complete, interrupted, error code) of the session's events, in order."""
    return postgres.rows(
        "SELECT event_id, turn_complete, interrupted, error_code FROM sessions_app_eventrecord "
        f"WHERE session_id {OF_SESSION} ORDER BY sequence",
        session_id,
    )


async def _streaming(browser, web, session_id: str, client_message_id: str, text=LONG_TEXT):
    """A socket on ``web`` whose turn has streamed two deltas."""
    socket = await browser.socket(session_id, base_url=web.base_url)
    await socket.send(
        {"type": "user_message", "text": text, "client_message_id": client_message_id}
    )
    await socket.wait_for(lambda frame: frame["type"] == "delta")
    await socket.wait_for(lambda frame: frame["type"] == "delta" and frame["seq"] >= 1)
    return socket


def _complete(client_message_id: str):
    return lambda frame: (
        frame["type"] == "turn_complete" and frame["client_message_id"] == client_message_id
    )


async def test_a_turn_whose_process_is_killed_is_answered_once_after_a_resend_elsewhere(
    healthy_stack, browser
):
    """The message asks to be remembered, so its turn queues a memory job when it ends: the
    resumed turn queues exactly one."""
    stack = healthy_stack
    doomed = stack.daphne("web-killed", **SLOW)
    session_id = browser.session_create()
    await _streaming(browser, doomed, session_id, "killed", text=REMEMBERED_TEXT)

    doomed.kill()
    stack.extra.remove(doomed)
    again = await browser.socket(session_id, base_url=stack.web_b.base_url)
    await again.send(
        {"type": "user_message", "text": REMEMBERED_TEXT, "client_message_id": "killed"}
    )
    await again.wait_for(_complete("killed"), timeout=60)

    frames = again.frames
    started = frames_of(frames, "turn_started")
    assert [frame["resumed"] for frame in started] == [True]
    assert frames_of(frames, "delta"), "the resumed reply is streamed"
    complete = frames_of(frames, "turn_complete")[-1]
    assert (complete["duplicate"], complete["interrupted"]) == (False, False)
    assert reply_text(frames).startswith(f"You said: \u201c{REMEMBERED_TEXT}\u201d.")
    assert turn_events(stack.postgres, session_id) == [
        ("msg-killed", None, None, ""),
        ("msg-killed.1", True, None, ""),
    ]
    assert stack.postgres.rows("SELECT count(*) FROM agents_app_turnclaim")[0][0] == 0

    def jobs():
        return stack.postgres.rows(
            f"SELECT trigger, status FROM memory_app_generationjob WHERE session_id {OF_SESSION}",
            session_id,
        )

    await async_wait_until(
        lambda: jobs() and jobs()[0][1] == "succeeded", timeout=60, what="the memory job"
    )
    await asyncio.sleep(3)  # beat's sweeps and a second job, were there one, would show by now
    assert jobs() == [("explicit", "succeeded")]
    await again.close()


async def test_a_turn_nobody_comes_back_for_is_stored_as_interrupted_by_the_sweeper(
    healthy_stack, browser
):
    stack = healthy_stack
    doomed = stack.daphne("web-abandoned", **SLOW)
    session_id = browser.session_create()
    await _streaming(browser, doomed, session_id, "abandoned")
    killed_at = time.monotonic()

    doomed.kill()
    stack.extra.remove(doomed)

    def swept():
        return len(turn_events(stack.postgres, session_id)) == 2

    await async_wait_until(swept, timeout=60, what="the sweeper to end the turn")
    waited = time.monotonic() - killed_at
    assert turn_events(stack.postgres, session_id) == [
        ("msg-abandoned", None, None, ""),
        ("msg-abandoned.1", True, True, "server_stopped"),
    ]
    assert waited >= float(TURN_TIMINGS["TURN_INTERRUPTED_AFTER_SECONDS"]) - 2.5

    # The chat shows it as interrupted; Retry answers it once.
    socket = await browser.socket(session_id, base_url=stack.web_b.base_url)
    replayed = await socket.turn(LONG_TEXT, client_message_id="abandoned")
    assert frames_of(replayed, "turn_complete")[0]["interrupted"] is True
    assert [error["code"] for error in frames_of(replayed, "error")] == ["server_stopped"]
    start = len(socket.frames)
    await socket.send({"type": "retry", "client_message_id": "abandoned"})
    await socket.wait_for(_complete("abandoned"), start=start)
    retried = socket.frames[start:]
    assert reply_text(retried) == f"You said: \u201c{LONG_TEXT}\u201d."
    assert [event_id for event_id, *_ in turn_events(stack.postgres, session_id)] == [
        "msg-abandoned",
        "msg-abandoned.1",
        "msg-abandoned.2",
    ]
    await socket.close()


async def test_sigterm_finishes_short_turns_and_stores_the_rest_interrupted_in_time(
    healthy_stack, browser
):
    stack = healthy_stack
    stopping = stack.daphne("web-stopped", **SLOW)
    long_session, short_session = browser.session_create(), browser.session_create()
    long_socket = await _streaming(browser, stopping, long_session, "long")
    short_socket = await browser.socket(short_session, base_url=stopping.base_url)
    await short_socket.send(
        {"type": "user_message", "text": SHORT_TEXT, "client_message_id": "short"}
    )
    await short_socket.wait_for(lambda frame: frame["type"] == "delta")
    stopped_at = time.monotonic()

    stopping.terminate()
    stopping.process.wait(timeout=30)
    took = time.monotonic() - stopped_at
    stack.extra.remove(stopping)

    grace = float(TURN_TIMINGS["TURN_SHUTDOWN_GRACE_SECONDS"])
    assert took < grace + 5, f"the process took {took:.1f} s to stop"
    await short_socket.wait_for(_complete("short"))
    await long_socket.wait_for(_complete("long"))
    assert reply_text(short_socket.frames) == f"You said: \u201c{SHORT_TEXT}\u201d."
    assert frames_of(short_socket.frames, "turn_complete")[0]["interrupted"] is False
    long_complete = frames_of(long_socket.frames, "turn_complete")[0]
    assert long_complete["interrupted"] is True
    assert [error["code"] for error in frames_of(long_socket.frames, "error")] == ["server_stopped"]
    [(_, complete, interrupted, error)] = turn_events(stack.postgres, long_session)[1:]
    assert (complete, interrupted, error) == (True, True, "server_stopped")
    interrupted_text = stack.postgres.rows(
        "SELECT content FROM sessions_app_eventrecord WHERE event_id = 'msg-long.1'"
    )[0][0]
    assert interrupted_text["parts"][0]["text"].startswith("You said:"), "the reply so far kept"
    assert turn_events(stack.postgres, short_session)[1][1:] == (True, None, "")
    assert "shut down: 1 turns finished, 1 cut short" in stopping.log()
    assert stack.postgres.rows("SELECT count(*) FROM agents_app_turnclaim")[0][0] == 0
