"""Database connections of one daphne process: the connection pool against one per request.

    python -m bench.db_connections                      # 200 in sequence, 600 in bursts of 32
    python -m bench.db_connections --sequence 50 --burst 100

Needs ``DATABASE_URL`` (PostgreSQL): it recreates a database ``<name>_dbconn`` on that server,
migrates it and creates one user. For each mode it starts a daphne process on a free port (the
pool of ``DATABASE_POOL_MAX_SIZE`` connections, the default; or, with
``DATABASE_POOL_MAX_SIZE=0``, a connection opened and closed by every request) and sends
``GET /api/sessions/`` as the signed-in user (its session cookie; ``--basic``: Basic auth,
which hashes the password on every request), first one request after another, then from
``--concurrency`` threads at once, while a thread samples the process's backends in
``pg_stat_activity`` every 20 ms. Prints per mode and phase the latency (p50/p95), the
throughput and the most connections seen, and writes them to build/bench-db-connections.json.
Figures are printed, never asserted; run it on a quiet machine or compare the two modes as a
ratio of the same run.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg

BASE_DIR = Path(__file__).resolve().parent.parent
BUILD_DIR = BASE_DIR / "build"
RESULTS_PATH = BUILD_DIR / "bench-db-connections.json"
USERNAME = "bench-connections"
# The benchmark's own throwaway account on its own throwaway server: a fresh password per run.
PASSWORD = secrets.token_urlsafe(16)
# DATABASE_POOL_MAX_SIZE of each mode; None: the setting's default.
MODES = {"pool": None, "per-request": "0"}
SESSION_KEY_SNIPPET = """
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
user = User.objects.create_user({username!r}, password={password!r})
session = SessionStore()
session[SESSION_KEY] = str(user.pk)
session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
session[HASH_SESSION_KEY] = user.get_session_auth_hash()
session.create()
print(session.session_key)
"""


def arguments_parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sequence", type=int, default=200, help="requests one after another")
    parser.add_argument("--burst", type=int, default=600, help="requests sent concurrently")
    parser.add_argument("--concurrency", type=int, default=32, help="threads of the burst")
    parser.add_argument(
        "--basic",
        action="store_true",
        help="authenticate each request with Basic auth (a password hash per request) "
        "instead of a signed-in session's cookie",
    )
    return parser.parse_args(argv)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _database_prepare(server_url: str) -> tuple[str, str]:
    """A fresh ``<name>_dbconn`` database, migrated, with the benchmark's user signed in; its
    URL and the session key."""
    base, _, name = server_url.rpartition("/")
    database = f"{name}_dbconn"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{database}"')
    url = f"{base}/{database}"
    environment = {**os.environ, "DATABASE_URL": url}
    manage = [sys.executable, str(BASE_DIR / "manage.py")]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], env=environment, check=True)
    snippet = SESSION_KEY_SNIPPET.format(username=USERNAME, password=PASSWORD)
    created = subprocess.run(
        [*manage, "shell", "-v", "0", "-c", snippet],
        env=environment,
        check=True,
        capture_output=True,
        text=True,
    )
    return url, created.stdout.split()[-1]


class ConnectionSampler(threading.Thread):
    """Counts the database's backends (its own left out) until stopped; keeps the highest."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.highest = 0
        self.last = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as connection:
            while not self.stopping.is_set():
                self.last = connection.execute(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchone()[0]
                self.highest = max(self.highest, self.last)
                time.sleep(0.02)

    def stop(self) -> int:
        self.stopping.set()
        self.join()
        return self.highest


def _request(url: str, headers: dict[str, str]) -> float:
    request = urllib.request.Request(url, headers=headers)
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()
        if response.status != 200:
            raise RuntimeError(f"{url} answered {response.status}")
    return time.perf_counter() - started


def _phase(
    url: str, headers: dict[str, str], database_url: str, count: int, concurrency: int
) -> dict:
    sampler = ConnectionSampler(database_url)
    sampler.start()
    started = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        durations = sorted(pool.map(lambda _: _request(url, headers), range(count)))
    elapsed = time.perf_counter() - started
    time.sleep(0.5)
    highest = sampler.stop()
    return {
        "requests": count,
        "concurrency": concurrency,
        "p50_ms": round(statistics.median(durations) * 1000, 1),
        "p95_ms": round(durations[int(0.95 * (len(durations) - 1))] * 1000, 1),
        "requests_per_second": round(count / elapsed, 1),
        "most_connections": highest,
        "connections_after": sampler.last,
    }


def _daphne(database_url: str, pool_size: str | None, port: int, log: Path) -> subprocess.Popen:
    environment = {
        **os.environ,
        **({"DATABASE_POOL_MAX_SIZE": pool_size} if pool_size is not None else {}),
        "DATABASE_URL": database_url,
        "API_THROTTLE_USER_RATE": "",
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
    }
    command = [
        *(sys.executable, "-m", "chatapp.webserver", "-b", "127.0.0.1", "-p", str(port)),
        "chatapp.asgi:application",
    ]
    with log.open("wb") as output:
        return subprocess.Popen(
            command, env=environment, cwd=BASE_DIR, stdout=output, stderr=subprocess.STDOUT
        )


def _wait_serving(base_url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("daphne exited before serving")
        try:
            with urllib.request.urlopen(f"{base_url}/healthz", timeout=2):
                return
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    raise RuntimeError("daphne did not serve within 60 s")


def mode_measure(
    name: str, database_url: str, headers: dict[str, str], arguments: argparse.Namespace
) -> dict:
    port = _free_port()
    process = _daphne(database_url, MODES[name], port, BUILD_DIR / f"bench-db-{name}.log")
    url = f"http://127.0.0.1:{port}/api/sessions/"
    try:
        _wait_serving(f"http://127.0.0.1:{port}", process)
        _request(url, headers)
        return {
            "sequence": _phase(url, headers, database_url, arguments.sequence, 1),
            "burst": _phase(url, headers, database_url, arguments.burst, arguments.concurrency),
        }
    finally:
        process.terminate()
        process.wait(timeout=15)


def main(argv: list[str] | None = None) -> None:
    arguments = arguments_parse(argv)
    server_url = os.environ.get("DATABASE_URL", "")
    if not server_url.startswith(("postgres://", "postgresql://")):
        sys.exit("DATABASE_URL must name a PostgreSQL database")
    BUILD_DIR.mkdir(exist_ok=True)
    database_url, session_key = _database_prepare(server_url)
    if arguments.basic:
        token = base64.b64encode(f"{USERNAME}:{PASSWORD}".encode()).decode()
        headers = {"Authorization": f"Basic {token}"}
    else:
        headers = {"Cookie": f"sessionid={session_key}"}
    results = {name: mode_measure(name, database_url, headers, arguments) for name in MODES}
    for name, phases in results.items():
        for phase, figures in phases.items():
            print(
                f"{name:12} {phase:8} {figures['requests']:4} requests x{figures['concurrency']:<3}"
                f" p50 {figures['p50_ms']:6.1f} ms  p95 {figures['p95_ms']:6.1f} ms"
                f"  {figures['requests_per_second']:6.1f}/s"
                f"  connections: most {figures['most_connections']},"
                f" after {figures['connections_after']}"
            )
    RESULTS_PATH.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
