"""``python -m chatapp.serve``: several daphne processes answering on one address."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from chatapp.serve import arguments_parse

ROOT = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 90


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        # A child that exited but was not yet reaped is a zombie: gone for our purposes.
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        return False
    return state != "Z"


def _started(log: Path) -> list[int]:
    return [int(pid) for pid in re.findall(r"daphne process (\d+) started", log.read_text())]


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {WAIT_SECONDS} s: {what}")
        time.sleep(0.2)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def test_arguments_after_a_double_dash_go_to_every_daphne():
    args = arguments_parse(["--bind", "0.0.0.0:9000", "--processes", "3", "--", "--proxy-headers"])

    assert (args.host, args.port, args.processes) == ("0.0.0.0", 9000, 3)
    assert args.daphne_arguments == ["--proxy-headers"]


def test_a_bind_without_a_port_is_refused(capsys):
    with pytest.raises(SystemExit):
        arguments_parse(["--bind", "localhost"])

    assert "--bind is host:port" in capsys.readouterr().err


def test_two_processes_serve_one_port_a_dead_one_is_replaced_and_sigterm_stops_all(tmp_path):
    port = _free_port()
    log = tmp_path / "serve.log"
    environment = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
    }
    with log.open("w") as output:
        server = subprocess.Popen(
            [
                *(sys.executable, "-m", "chatapp.serve", "--bind", f"127.0.0.1:{port}"),
                *("--processes", "2", "--", "--verbosity", "0"),
            ],
            cwd=ROOT,
            env=environment,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        _wait_for(lambda: _answers(url), "the address answers")
        first, second = _started(log)
        assert _alive(first) and _alive(second)
        assert all(_answers(url) for _ in range(10))

        os.kill(first, signal.SIGKILL)

        _wait_for(lambda: len(_started(log)) == 3, "a third process replaces the killed one")
        replacement = _started(log)[2]
        _wait_for(lambda: not _alive(first), "the killed process is gone")
        assert _alive(second) and _alive(replacement)
        assert all(_answers(url) for _ in range(10))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=WAIT_SECONDS)

    assert server.returncode == 0
    assert not any(_alive(pid) for pid in _started(log))
    assert not _answers(url)
