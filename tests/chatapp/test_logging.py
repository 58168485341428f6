"""Structured logs: one JSON object a line, carrying the request, invocation and user ids
of whatever the line was logged for."""

import io
import json
import logging
import os
import subprocess
import sys
import time
import uuid

import pytest
from django.conf import settings
from django.test import Client

from chatapp.celery import app as celery_app
from core.background import background_wait_idle, task_enqueue, task_headers
from core.log_context import JsonLogFormatter, LogContextFilter, log_context_bind
from tests.chatapp.support import turn
from tests.fake_gemini import HttpError


@celery_app.task(name="tests.chatapp.log_probe")
def log_probe() -> None:
    logging.getLogger("tests.probe").info("probe task ran")


class JsonLines:
    """What the root logger wrote through the production formatter, parsed."""

    def __init__(self) -> None:
        self.stream = io.StringIO()

    def all(self) -> list[dict]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]

    def with_message(self, text: str) -> list[dict]:
        return [line for line in self.all() if text in line["message"]]


@pytest.fixture
def json_lines():
    lines = JsonLines()
    handler = logging.StreamHandler(lines.stream)
    handler.addFilter(LogContextFilter())
    handler.setFormatter(JsonLogFormatter())
    root = logging.getLogger()
    previous_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield lines
    root.removeHandler(handler)
    root.setLevel(previous_level)
    log_context_bind(request_id=None, invocation_id=None, user_id=None)


def test_a_line_is_one_json_object_with_the_fields_a_log_shipper_indexes(json_lines):
    log_context_bind(request_id="req-1", invocation_id="e-42", user_id=7)
    logging.getLogger("chatapp.example").warning("disk %s full", "/data", extra={"percent": 99})

    [line] = json_lines.all()
    assert line["level"] == "WARNING"
    assert line["logger"] == "chatapp.example"
    assert line["message"] == "disk /data full"
    assert line["time"].endswith("+00:00") and "T" in line["time"]
    assert (line["request_id"], line["invocation_id"], line["user_id"]) == ("req-1", "e-42", "7")
    assert line["percent"] == 99


def test_an_exception_stays_on_one_line(json_lines):
    try:
        raise ValueError("bad value")
    except ValueError:
        logging.getLogger("chatapp.example").exception("it broke")

    output = json_lines.stream.getvalue()
    assert output.count("\n") == 1
    assert "ValueError: bad value" in json.loads(output)["exc_info"]


def test_a_request_gets_an_id_that_is_echoed_and_logged(json_lines):
    response = Client().get("/no-such-page/")

    request_id = response["X-Request-ID"]
    assert len(request_id) == 32
    [line] = json_lines.with_message("Not Found: /no-such-page/")
    assert line["request_id"] == request_id
    assert line["status_code"] == 404


def test_an_incoming_request_id_is_kept_and_a_hostile_one_replaced(json_lines):
    kept = Client().get("/healthz", HTTP_X_REQUEST_ID="lb-7f3a.91")
    replaced = Client().get("/healthz", HTTP_X_REQUEST_ID='x"\n{"level": "forged"}')

    assert kept["X-Request-ID"] == "lb-7f3a.91"
    assert replaced["X-Request-ID"] != 'x"\n{"level": "forged"}'
    assert len(replaced["X-Request-ID"]) == 32


def test_each_request_has_an_access_line_and_probes_none(json_lines):
    Client().get("/healthz")
    Client().get("/readyz")
    response = Client().get("/accounts/login/?next=/", HTTP_X_REQUEST_ID="req-access")

    access = [line for line in json_lines.all() if line["logger"] == "chatapp.access"]
    assert len(access) == 1
    [line] = access
    assert line["message"].startswith("GET /accounts/login/ 200 in ")
    assert (line["method"], line["path"], line["status_code"]) == ("GET", "/accounts/login/", 200)
    assert line["duration_ms"] >= 0
    assert line["request_id"] == response["X-Request-ID"] == "req-access"


@pytest.mark.django_db
def test_a_signed_in_users_request_logs_their_id(json_lines, user):
    client = Client()
    client.force_login(user)

    client.get("/no-such-page/", HTTP_X_REQUEST_ID="req-of-user")

    [line] = json_lines.with_message("Not Found: /no-such-page/")
    assert (line["request_id"], line["user_id"]) == ("req-of-user", str(user.pk))


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
async def test_a_turn_logs_its_invocation_user_and_connection(json_lines, chat_settings, user):
    frames = await turn(user)

    invocation_id = next(frame for frame in frames if frame["type"] == "turn_started")[
        "invocation_id"
    ]
    [line] = json_lines.with_message("turn completed in")
    assert line["invocation_id"] == invocation_id
    assert line["user_id"] == str(user.pk)
    assert len(line["request_id"]) == 32
    assert line["outcome"] == "completed"
    assert line["duration_seconds"] > 0
    [socket_line] = [line for line in json_lines.all() if line["logger"] == "chatapp.access"]
    assert socket_line["message"].startswith("WEBSOCKET /ws/chat/")
    assert socket_line["accepted"] is True
    assert socket_line["request_id"] == line["request_id"]
    assert socket_line["user_id"] == str(user.pk)
    assert socket_line["invocation_id"] is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
async def test_a_model_failure_is_logged_with_the_turns_invocation_id(
    json_lines, chat_settings, user, fake_gemini
):
    fake_gemini.push(HttpError(400, "bad request"))

    frames = await turn(user)

    invocation_id = next(frame for frame in frames if frame["type"] == "turn_started")[
        "invocation_id"
    ]
    [failure] = json_lines.with_message("model failed")
    [finished] = json_lines.with_message("turn error in")
    assert failure["invocation_id"] == finished["invocation_id"] == invocation_id
    assert failure["user_id"] == str(user.pk)
    assert failure["request_id"] == finished["request_id"]


@pytest.mark.django_db(transaction=True)
def test_a_background_task_logs_the_ids_of_the_request_that_enqueued_it(json_lines, settings):
    settings.BACKGROUND_TASKS = "inprocess"
    log_context_bind(request_id="req-enqueuer", invocation_id="e-enqueuer", user_id=5)

    task_enqueue(task=log_probe)
    background_wait_idle()

    [line] = json_lines.with_message("probe task ran")
    assert (line["request_id"], line["invocation_id"], line["user_id"]) == (
        "req-enqueuer",
        "e-enqueuer",
        "5",
    )


@pytest.mark.timeout(180)
def test_a_celery_worker_logs_a_task_with_the_ids_it_was_sent_with():
    """A real worker, JSON logs on stderr, a task on a queue of its own (celery.accumulate
    touches nothing)."""
    if not settings.REDIS_URL:
        pytest.skip("needs Redis (REDIS_URL); runs in CI's PostgreSQL + Redis pass")
    queue = f"log-test-{uuid.uuid4().hex[:8]}"
    worker = subprocess.Popen(
        [
            *(sys.executable, "-m", "celery", "-A", "chatapp", "worker", "--pool", "solo"),
            *("--queues", queue, "--hostname", f"{queue}@test", "--loglevel", "INFO"),
            *("--without-mingle", "--without-gossip"),
        ],
        cwd=settings.BASE_DIR,
        env={**os.environ, "PYTHONPATH": str(settings.BASE_DIR), "LOG_FORMAT": "json"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        log_context_bind(request_id="req-to-worker", invocation_id="e-to-worker", user_id=9)
        celery_app.send_task("celery.accumulate", args=[1], queue=queue, headers=task_headers())
        log_context_bind(request_id=None, invocation_id=None, user_id=None)
        deadline = time.monotonic() + 120
        succeeded = None
        while succeeded is None:
            assert time.monotonic() < deadline, "the task never ran"
            line = worker.stderr.readline()
            assert line or worker.poll() is None, "the worker exited"
            if "succeeded in" in line:
                succeeded = json.loads(line)
    finally:
        worker.terminate()
        worker.wait(timeout=60)

    assert "celery.accumulate" in succeeded["message"]
    assert (succeeded["request_id"], succeeded["invocation_id"], succeeded["user_id"]) == (
        "req-to-worker",
        "e-to-worker",
        "9",
    )


def line_logged_by_a_new_process(**environment: str) -> str:
    """A line logged by a freshly configured Django process, as it appears on stderr."""
    inherited = {key: value for key, value in os.environ.items() if key != "LOG_FORMAT"}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django, logging; django.setup(); "
            "logging.getLogger('chatapp.probe').warning('configured %s', 'yes')",
        ],
        cwd=settings.BASE_DIR,
        env={
            **inherited,
            "PYTHONPATH": str(settings.BASE_DIR),
            "DJANGO_SETTINGS_MODULE": "chatapp.settings",
            **environment,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stderr.strip()


def test_log_format_json_makes_every_line_json():
    line = json.loads(line_logged_by_a_new_process(LOG_FORMAT="json"))

    assert line["message"] == "configured yes"
    assert line["logger"] == "chatapp.probe"
    assert line["level"] == "WARNING"
    assert line["request_id"] is None


def test_text_is_the_default_for_a_terminal():
    line = line_logged_by_a_new_process()

    assert line.endswith(" WARNING chatapp.probe [request=- invocation=- user=-] configured yes")
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)
