"""The service-account API's appends under concurrency, over HTTP, on two daphne processes.

Sixteen backends append to one session at once through both web processes, each holding only
the session's id (as ADK's workers do, each with its own copy of the session): the server
serialises the appends on the session's row, so none is lost, none is refused as stale, and
every writer's state keys end at its last value.
"""

from __future__ import annotations

import json
import subprocess
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.multiprocess.stack import BIN, OF_SESSION, ROOT, Daphne

pytestmark = [pytest.mark.multiprocess, pytest.mark.postgres]

WRITERS = 16
EVENTS_PER_WRITER = 100


def _key(env: dict[str, str], app: str) -> str:
    printed = subprocess.run(
        [str(BIN / "python"), str(ROOT / "manage.py"), "app_key_create", "--app", app],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    )
    return printed.stdout.strip().splitlines()[-1]


def _call(base_url: str, key: str, method: str, path: str, body: dict | None = None):
    request = urllib.request.Request(
        base_url + path,
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_sixteen_writers_through_two_processes_lose_nothing(healthy_stack):
    stack = healthy_stack
    key = _key(stack.env, "concurrent")
    bases = [stack.web_a.base_url, stack.web_b.base_url]
    sessions = "/api/v1/apps/concurrent/users/backend-user/sessions/"
    status, _ = _call(bases[0], key, "POST", sessions, {"session_id": "shared"})
    assert status == 201
    barrier = threading.Barrier(WRITERS)

    def writer(number: int) -> list:
        barrier.wait(timeout=60)
        failures = []
        for index in range(EVENTS_PER_WRITER):
            event = {
                "invocation_id": f"writer-{number}",
                "author": f"writer_{number}",
                "content": {"role": "model", "parts": [{"text": f"w{number} #{index}"}]},
                "actions": {
                    "state_delta": {
                        f"w{number}_last": index,
                        f"w{number}_{index}": index,
                        f"user:w{number}": index,
                    }
                },
            }
            base = bases[(number + index) % 2]
            status, body = _call(base, key, "POST", sessions + "shared/events/", event)
            if status != 201:
                failures.append((number, index, status, body))
        return failures

    with ThreadPoolExecutor(WRITERS) as pool:
        failures = [failure for batch in pool.map(writer, range(WRITERS)) for failure in batch]

    assert failures == []
    status, session = _call(bases[1], key, "GET", sessions + "shared/")
    assert status == 200
    events = session["events"]
    assert len(events) == WRITERS * EVENTS_PER_WRITER
    for number in range(WRITERS):
        texts = [
            event["content"]["parts"][0]["text"]
            for event in events
            if event["author"] == f"writer_{number}"
        ]
        assert texts == [f"w{number} #{index}" for index in range(EVENTS_PER_WRITER)]
        assert session["state"][f"w{number}_last"] == EVENTS_PER_WRITER - 1
        assert session["state"][f"user:w{number}"] == EVENTS_PER_WRITER - 1
        assert all(
            session["state"][f"w{number}_{index}"] == index for index in range(EVENTS_PER_WRITER)
        )
    sequences = stack.postgres.rows(
        f"SELECT e.sequence FROM sessions_app_eventrecord e WHERE e.session_id {OF_SESSION} "
        "ORDER BY e.sequence",
        "shared",
    )
    assert [row[0] for row in sequences] == list(range(1, WRITERS * EVENTS_PER_WRITER + 1))


def test_audit_rows_held_by_a_web_process_are_written_when_it_stops(healthy_stack):
    """A web process holds the service API's audit rows a moment to write them together
    (core.write_behind); stopped (SIGTERM, as a deploy stops it) while it holds some, it
    writes them before it exits. Here it would hold them for a minute."""
    stack = healthy_stack
    key = _key(stack.env, "stopping")
    sessions = "/api/v1/apps/stopping/users/someone/sessions/"
    stack.web_b.stop()
    holding = Daphne("web-holding", {**stack.env, "WRITE_BEHIND_SECONDS": "60"}, stack.folder)
    try:
        holding.start().wait_ready()
        statuses = [
            _call(holding.base_url, key, "GET", f"{sessions}s{n}/?num_recent_events=20")[0]
            for n in range(5)
        ]
        held = stack.postgres.rows(
            "SELECT count(*) FROM agents_app_servicerequest WHERE app_name = %s", "stopping"
        )
        holding.stop()
        audited = stack.postgres.rows(
            "SELECT count(*) FROM agents_app_servicerequest WHERE app_name = %s", "stopping"
        )
    finally:
        holding.stop()
        stack.web_b.start().wait_ready()

    assert statuses == [404] * 5, "reads of sessions, the calls an agent makes at every step"
    assert held == [(0,)]
    assert audited == [(5,)]
