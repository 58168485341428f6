"""Two daphne processes, a Celery worker and beat over one PostgreSQL and one Redis.

A user chats on process A, goes on with the same session on process B, and sees a memory that
the worker made from the chat announced on the socket that is open on the other process.
"""

from __future__ import annotations

import pytest

from tests.multiprocess.stack import OF_SESSION, frames_of, reply_text

pytestmark = pytest.mark.multiprocess


async def test_a_session_moves_between_processes_and_worker_notices_reach_every_socket(
    healthy_stack, browser
):
    stack = healthy_stack
    session_id = browser.session_create()
    on_a = await browser.socket(session_id)

    naming = await on_a.turn("My name is Ada", client_message_id="name")
    greeting = await on_a.turn("Hello from the first process")

    assert reply_text(naming) == "Nice to meet you, Ada! I'll call you that in all your chats."
    assert reply_text(greeting).startswith("Hi Ada! You said:")
    on_b = await browser.socket(session_id, base_url=stack.web_b.base_url)
    continued = await on_b.turn("Still there on the second process?")
    assert reply_text(continued).startswith("Hi Ada! You said: “Still there on the second")
    context = frames_of(continued, "turn_complete")[0]["context"]
    assert context["offline"] is True
    assert context["event_count"] > 4, "process B's model saw the turns made on process A"

    remembered = await on_a.turn("Don't forget that I live in Lisbon.", client_message_id="home")

    assert frames_of(remembered, "error") == []
    notice = await on_b.wait_for(lambda frame: frame["type"] == "notice", timeout=60)
    assert notice["notice"]["kind"] == "memory"
    # The offline extractor keeps the name and the home, facts about the person; the greeting
    # turn is what was said, not a memory.
    assert notice["notice"]["message"] == "Remembered: your name is Ada, and you live in Lisbon."
    await on_a.wait_for(lambda frame: frame["type"] == "notice")

    status, events, _ = browser.api(
        "GET", f"/api/sessions/{session_id}/events/?page_size=100", base_url=stack.web_b.base_url
    )
    assert status == 200
    user_texts = [
        "".join(part.get("text") or "" for part in event["content"]["parts"])
        for event in events["results"]
        if event["author"] == "user" and event["content"]["parts"][0].get("text")
    ]
    assert user_texts == [
        "My name is Ada",
        "Hello from the first process",
        "Still there on the second process?",
        "Don't forget that I live in Lisbon.",
    ]
    await on_a.close()
    await on_b.close()

    postgres = stack.postgres
    sequences = postgres.rows(
        "SELECT sequence FROM sessions_app_eventrecord "
        f"WHERE session_id {OF_SESSION} ORDER BY sequence",
        session_id,
    )
    assert [row[0] for row in sequences] == list(range(1, len(sequences) + 1))
    assert postgres.rows(
        "SELECT value FROM sessions_app_userstate WHERE user_id = %s AND key = 'name'",
        browser.user_pk(postgres),
    ) == [("Ada",)]
    jobs = postgres.rows(
        "SELECT id, trigger, status, attempts FROM memory_app_generationjob "
        f"WHERE session_id {OF_SESSION}",
        session_id,
    )
    assert [job[1:] for job in jobs] == [("explicit", "succeeded", 1)]
    memories = postgres.rows(
        "SELECT m.text, m.status, m.job_id, e.event_id FROM memory_app_memory m "
        "JOIN memory_app_memorysource s ON s.memory_id = m.id "
        "JOIN sessions_app_eventrecord e ON e.id = s.event_id "
        "WHERE m.user_id = %s",
        browser.user_pk(postgres),
    )
    assert ("The user's name is Ada.", "active", jobs[0][0], "msg-name") in memories
    assert ("The user lives in Lisbon.", "active", jobs[0][0], "msg-home") in memories
    assert {memory[2] for memory in memories} == {jobs[0][0]}
    assert len(notice["notice"]["memory_ids"]) == len(memories)
    assert "memory_app.tasks.memory_job_run[" in stack.worker.log()


async def test_a_turn_running_on_one_process_is_watched_and_stopped_from_the_other(
    healthy_stack, browser
):
    """Another tab on the other process sends the same message while the turn runs: it
    watches the reply stream live (the ask reaches the running socket through the user's
    group), and its Stop stops the turn there; both tabs end with the interrupted reply."""
    stack = healthy_stack
    session_id = browser.session_create()
    on_a = await browser.socket(session_id)
    on_b = await browser.socket(session_id, base_url=stack.web_b.base_url)
    text = " ".join(f"word{n}" for n in range(300))  # about five seconds of streaming
    message = {"type": "user_message", "text": text, "client_message_id": "both"}

    await on_a.send(message)
    await on_a.wait_for(lambda frame: frame["type"] == "delta")
    await on_b.send(message)
    await on_b.wait_for(lambda frame: frame["type"] == "turn_running")
    await on_b.wait_for(lambda frame: frame["type"] == "delta")
    await on_b.send({"type": "cancel"})
    ran = await on_a.wait_for(lambda frame: frame["type"] == "turn_complete")
    watched = await on_b.wait_for(lambda frame: frame["type"] == "turn_complete")

    assert ran["interrupted"] is True and ran["duplicate"] is False
    assert watched["interrupted"] is True and watched["duplicate"] is True
    assert ran["message_id"] == watched["message_id"]
    for socket in (on_a, on_b):
        await socket.close()
