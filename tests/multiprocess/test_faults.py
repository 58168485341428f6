"""The faults a real deployment sees, each on the running processes, each losing nothing.

The model failing mid-stream, a worker killed in the middle of a memory job, Redis stopping,
PostgreSQL restarting, and a client dropping its socket mid-turn.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.fake_gemini import FailMidStream, Reply, Stall, final_chunk, text_chunk
from tests.multiprocess.stack import OF_SESSION, async_wait_until, frames_of, reply_text

pytestmark = pytest.mark.multiprocess


def _gemini_env(fake_gemini) -> dict[str, str]:
    """Processes whose model is Gemini, served by the test's fake server."""
    return {
        "GEMINI_API_KEY": "test-key",
        "GEMINI_BASE_URL": fake_gemini.url,
        "MEMORY_EMBEDDER": "none",
        "LLM_RETRY_BASE_DELAY_SECONDS": "0.05",
    }


def _events(postgres, session_id: str) -> list[tuple]:
    """(event id, author, text, error code, interrupted) of the session's events, in order."""
    rows = postgres.rows(
        "SELECT event_id, author, content, error_code, interrupted FROM sessions_app_eventrecord "
        f"WHERE session_id {OF_SESSION} ORDER BY sequence",
        session_id,
    )
    return [
        (
            event_id,
            author,
            "".join(part.get("text") or "" for part in (content or {}).get("parts") or []),
            error_code,
            interrupted,
        )
        for event_id, author, content, error_code, interrupted in rows
    ]


def _jobs(postgres, session_id: str) -> list[tuple]:
    return postgres.rows(
        "SELECT id, trigger, status, attempts FROM memory_app_generationjob "
        f"WHERE session_id {OF_SESSION} ORDER BY created_at",
        session_id,
    )


def _memory_texts(postgres, user_pk: int) -> list[str]:
    rows = postgres.rows(
        "SELECT text FROM memory_app_memory WHERE user_id = %s AND status = 'active' ORDER BY text",
        user_pk,
    )
    return [row[0] for row in rows]


async def test_the_model_failing_mid_stream_shows_an_error_keeps_the_message_and_recovers(
    healthy_stack, browser, fake_gemini
):
    stack = healthy_stack
    web = stack.daphne("web-gemini", **_gemini_env(fake_gemini))
    session_id = browser.session_create()
    socket = await browser.socket(session_id, base_url=web.base_url)
    fake_gemini.push(FailMidStream([text_chunk("Let me think about ")]))

    failed = await socket.turn("Tell me about Lisbon", client_message_id="lisbon")

    assert [frame["text"] for frame in frames_of(failed, "delta")] == ["Let me think about "]
    errors = frames_of(failed, "error")
    assert [error["code"] for error in errors] == ["model_unavailable"]
    assert errors[0]["message"]
    assert frames_of(failed, "turn_complete")[0]["interrupted"] is False

    fake_gemini.push(Reply([text_chunk("Lisbon is the capital of Portugal."), final_chunk()]))
    answered = await socket.turn("Try again, please")

    assert frames_of(answered, "error") == []
    assert reply_text(answered) == "Lisbon is the capital of Portugal."
    sent = fake_gemini.requests[-1].body["contents"]
    assert sent[0]["parts"][0]["text"] == "Tell me about Lisbon"
    assert sent[-1]["parts"][0]["text"] == "Try again, please"
    stored = _events(stack.postgres, session_id)
    assert [(author, text, error) for _, author, text, error, _ in stored] == [
        ("user", "Tell me about Lisbon", ""),
        ("assistant", "Let me think about ", "model_unavailable"),
        ("user", "Try again, please", ""),
        ("assistant", "Lisbon is the capital of Portugal.", ""),
    ]
    assert stored[0][0] == "msg-lisbon"
    await socket.close()


async def test_a_worker_killed_mid_job_is_replaced_and_the_job_completes_exactly_once(
    healthy_stack, browser, fake_gemini
):
    """The broker hands the unacknowledged job to the next worker (acks_late and the
    visibility timeout), and the job, being idempotent, stores its memory once.

    The doomed worker extracts with Gemini, whose answer never comes (the fake server
    stalls), so it is certainly mid-job when it is killed; its replacement is an ordinary
    offline worker."""
    stack = healthy_stack
    stack.worker.stop()
    doomed = stack.new_worker("worker-doomed", **_gemini_env(fake_gemini))
    try:
        session_id = browser.session_create()
        socket = await browser.socket(session_id)
        fake_gemini.push(Stall(seconds=120))

        await socket.turn("Don't forget that I play the cello.", client_message_id="cello")

        def extraction_requests() -> list:
            return [r for r in fake_gemini.requests if r.action == "generateContent"]

        await async_wait_until(extraction_requests, timeout=30, what="the worker to call the model")
        [(job_id, trigger, status, attempts)] = _jobs(stack.postgres, session_id)
        assert (trigger, status, attempts) == ("explicit", "running", 1)
    finally:
        doomed.kill()
        stack.new_worker("worker-replacement")

    notice = await socket.wait_for(lambda frame: frame["type"] == "notice", timeout=60)

    assert notice["notice"]["message"] == "Remembered: you play the cello."
    assert _jobs(stack.postgres, session_id) == [(job_id, "explicit", "succeeded", 2)]
    assert _memory_texts(stack.postgres, browser.user_pk(stack.postgres)) == [
        "The user plays the cello."
    ]
    assert len(extraction_requests()) == 1
    await asyncio.sleep(2)  # a second delivery, were there one, would have run by now
    assert _jobs(stack.postgres, session_id) == [(job_id, "explicit", "succeeded", 2)]
    assert len(frames_of(socket.frames, "notice")) == 1
    await socket.close()


async def test_chat_goes_on_while_redis_is_down_and_memory_jobs_are_sent_once_it_is_back(
    healthy_stack, browser
):
    stack = healthy_stack
    session_id = browser.session_create()
    on_a = await browser.socket(session_id)
    await on_a.turn("Hello before the outage")

    stack.redis.stop()
    during = await on_a.turn("Don't forget that I cook paella.", client_message_id="tomatoes")
    on_b = await browser.socket(session_id, base_url=stack.web_b.base_url)
    on_b_during = await on_b.turn("Are you still there?")
    status, page, _ = browser.api("GET", f"/api/sessions/{session_id}/events/")

    assert frames_of(during, "error") == []
    assert reply_text(during) == "You said: “Don't forget that I cook paella.”"
    assert frames_of(on_b_during, "error") == []
    assert reply_text(on_b_during) == "You said: “Are you still there?”"
    assert status == 200
    assert len(page["results"]) == 6
    [(job_id, trigger, status, _)] = _jobs(stack.postgres, session_id)
    assert (trigger, status) == ("explicit", "queued")
    assert (
        f'memory_app.tasks.memory_job_run {{"job_id": "{job_id}"}} not enqueued'
        in stack.web_a.log()
    )

    stack.redis.start()

    def finished() -> bool:
        return _jobs(stack.postgres, session_id)[0][2] == "succeeded"

    await async_wait_until(finished, timeout=60, what="the sweeper to send the job")
    notice = await on_a.wait_for(lambda frame: frame["type"] == "notice", timeout=30)
    assert notice["notice"]["message"] == "Remembered: you cook paella."
    await on_b.wait_for(lambda frame: frame["type"] == "notice", timeout=30)
    assert _jobs(stack.postgres, session_id) == [(job_id, "explicit", "succeeded", 1)]
    assert _memory_texts(stack.postgres, browser.user_pk(stack.postgres)) == [
        "The user cooks paella."
    ]
    after = await on_b.turn("Back to normal")
    assert frames_of(after, "error") == []
    await on_a.close()
    await on_b.close()


async def test_a_postgres_restart_fails_requests_cleanly_and_the_processes_recover(
    healthy_stack, browser
):
    stack = healthy_stack
    session_id = browser.session_create()
    socket = await browser.socket(session_id)
    await socket.turn("Hello before the restart")

    stack.postgres.stop()
    try:
        api_status, api_body, api_headers = browser.api("GET", "/api/sessions/")
        page_status, page_body, _ = browser.api("GET", "/")
        during = await socket.turn("Are you there?", client_message_id="during")
        refused = await browser.socket(session_id, base_url=stack.web_b.base_url)
        refusal = await refused.wait_for(lambda frame: frame["type"] == "error")
        await refused.connection.wait_closed()
    finally:
        stack.postgres.start()

    assert api_status == 503
    assert api_headers["Content-Type"].startswith("application/json")
    assert api_body["code"] == "database_unavailable"
    assert "database" in api_body["detail"].lower()
    assert page_status == 503
    assert "Traceback" not in str(page_body)
    errors = frames_of(during, "error")
    assert [error["code"] for error in errors] == ["database_unavailable"]
    assert "not stored" in errors[0]["message"]
    assert frames_of(during, "turn_complete")[0]["message_id"] is None
    assert refusal["code"] == "database_unavailable"
    assert refused.connection.close_code == 4503

    def serving() -> bool:
        return browser.api("GET", "/api/sessions/")[0] == 200

    await async_wait_until(serving, timeout=30, what="the API to answer again")
    resent = await socket.turn("Are you there?", client_message_id="during")
    assert frames_of(resent, "error") == []
    assert frames_of(resent, "turn_complete")[0]["duplicate"] is False
    assert reply_text(resent) == "You said: “Are you there?”"
    remembered = await socket.turn("Don't forget that I play chess.")
    assert frames_of(remembered, "error") == []
    notice = await socket.wait_for(lambda frame: frame["type"] == "notice", timeout=60)
    assert notice["notice"]["message"] == "Remembered: you play chess."
    texts = [text for _, author, text, _, _ in _events(stack.postgres, session_id)]
    assert texts.count("Are you there?") == 1
    await socket.close()


async def test_a_client_that_drops_mid_turn_and_resends_gets_the_whole_stored_turn(
    healthy_stack, browser
):
    """A turn outlives its socket (a reload or a lost network does not cut the reply): the
    resent message, on the other web process, replays the whole stored reply, runs nothing."""
    stack = healthy_stack
    session_id = browser.session_create()
    socket = await browser.socket(session_id)
    text = " ".join(f"word{n}" for n in range(300))  # about five seconds of streaming
    whole_reply = f"You said: “{text}”."
    await socket.send({"type": "user_message", "text": text, "client_message_id": "long"})
    await socket.wait_for(lambda frame: frame["type"] == "delta")
    socket.connection.transport.abort()

    def whole_reply_stored() -> bool:
        return any(event[2] == whole_reply for event in _events(stack.postgres, session_id))

    await async_wait_until(whole_reply_stored, timeout=30, what="the whole reply to be stored")
    again = await browser.socket(session_id, base_url=stack.web_b.base_url)
    replayed = await again.turn(text, client_message_id="long")

    assert frames_of(replayed, "turn_started") == []
    assert frames_of(replayed, "delta") == []
    complete = frames_of(replayed, "turn_complete")[0]
    assert complete["duplicate"] is True and not complete["interrupted"]
    events = [frame["event"] for frame in frames_of(replayed, "event")]
    assert events[0]["id"] == "msg-long"
    stored = _events(stack.postgres, session_id)
    assert [(event_id, author) for event_id, author, _, _, _ in stored] == [
        ("msg-long", "user"),
        (events[-1]["id"], "assistant"),
    ]
    assert stored[1][2] == whole_reply and not stored[1][4]
    following = await again.turn("And now something short")
    assert reply_text(following) == "You said: “And now something short”."
    assert len(_events(stack.postgres, session_id)) == 4
    await again.close()
