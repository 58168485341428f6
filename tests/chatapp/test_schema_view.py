"""The OpenAPI schema endpoint on a fresh server process: concurrent first requests all get
the schema (drf-spectacular's generator, run twice at once, failed some of them with 500)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = 100
# How long the server may take to answer before the test gives up (not an assertion), as
# tests/browser/server.py allows a server on a machine busy with the rest of the suite.
STARTUP_TIMEOUT_SECONDS = 180


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@pytest.mark.timeout(300)
def test_concurrent_first_requests_for_the_schema_all_get_it(tmp_path):
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path}/unused.sqlite3",
        "REDIS_URL": "",
        "BACKGROUND_TASKS": "celery",
        "CELERY_BROKER_URL": "memory://",
        "API_THROTTLE_ANON_RATE": "",
        "DEBUG": "false",
    }
    log_path = tmp_path / "daphne.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [
                *(sys.executable, "-m", "chatapp.webserver", "-b", "127.0.0.1", "-p", str(port)),
                "chatapp.asgi:application",
            ],
            env=env,
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
        while _probe(f"{base_url}/healthz") is False:
            assert server.poll() is None and time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)
        with ThreadPoolExecutor(REQUESTS) as clients:
            answers = list(clients.map(lambda _: _get(f"{base_url}/api/schema/"), range(REQUESTS)))
    finally:
        server.terminate()
        server.wait(timeout=30)

    statuses = [status for status, _ in answers]
    assert statuses == [200] * REQUESTS, log_path.read_text()[-3000:]
    assert len({body for _, body in answers}) == 1
    assert b"Traceback" not in log_path.read_bytes()


def _probe(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False
