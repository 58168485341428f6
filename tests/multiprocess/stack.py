"""The production topology in real processes: PostgreSQL, Redis, daphne, a Celery worker, beat.

PostgreSQL and Redis here are throwaway servers of the suite's own (a cluster made with
``initdb`` in a temporary folder, a ``redis-server`` without persistence), each on a free port:
the fault tests stop and restart them, which must never touch the machine's shared servers.
The app's processes are started as production starts them (``python -m chatapp.webserver
chatapp.asgi:application``, ``celery -A chatapp worker``, ``celery -A chatapp beat``), each in a
process group of its own so a test can kill one with everything it forked.

Also the clients a user has: sign-in through the login form, the REST API with the session
cookie, and the chat WebSocket (the ``websockets`` package), plus direct SQL to check what
the database holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.cookiejar
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from websockets.asyncio.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# How long a server or process may take to start before the tests give up (not an assertion):
# as tests/browser/server.py allows, for a machine busy with the rest of the suite.
STARTUP_TIMEOUT_SECONDS = 180
FRAME_TIMEOUT_SECONDS = 30
PASSWORD = "multiprocess-test-password"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(condition: Callable[[], Any], *, timeout: float, what: str) -> Any:
    """Poll ``condition`` until it returns something truthy; fail naming ``what`` after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


async def async_wait_until(condition: Callable[[], Any], *, timeout: float, what: str) -> Any:
    """``wait_until`` for async tests: the event loop keeps running (sockets read, close)."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.2)


def _postgres_bin(name: str) -> str:
    found = sorted(Path("/usr/lib/postgresql").glob(f"*/bin/{name}"))
    if found:
        return str(found[-1])
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(f"PostgreSQL's {name} is not installed")
    return path


def _as_postgres_user(command: list[str]) -> list[str]:
    """initdb and the server refuse to run as root: run them as the ``postgres`` OS user then."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


class PostgresCluster:
    """A PostgreSQL cluster of its own in a temporary folder, on a free port."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.data = folder / "data"
        self.log = folder / "postgres.log"
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/chatapp"

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run(
            _as_postgres_user([_postgres_bin("pg_ctl"), "-D", str(self.data), *args]),
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def create(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.folder, user="postgres")
        subprocess.run(
            _as_postgres_user(
                [
                    _postgres_bin("initdb"),
                    "-D",
                    str(self.data),
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ]
            ),
            check=True,
            stdout=subprocess.DEVNULL,
        )
        self.start()
        with self.connect(dbname="postgres") as admin:
            admin.execute("CREATE DATABASE chatapp")

    def start(self) -> None:
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        self._pg_ctl("-o", options, "-l", str(self.log), "-w", "start")

    def stop(self) -> None:
        self._pg_ctl("-m", "fast", "-w", "stop")

    def connect(self, dbname: str = "chatapp") -> psycopg.Connection:
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname=dbname, autocommit=True
        )

    def rows(self, sql: str, *params: Any) -> list[tuple]:
        with self.connect() as connection:
            return connection.execute(sql, params).fetchall()


class RedisServer:
    """A redis-server without persistence on a free port; restarting it starts it empty."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        log = (self.folder / "redis.log").open("ab")
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        wait_until(self.answers, timeout=STARTUP_TIMEOUT_SECONDS, what="redis-server")

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None


class AppProcess:
    """One process of the app (daphne, worker or beat), logging to a file of its own."""

    def __init__(self, name: str, command: list[str], env: dict[str, str], folder: Path) -> None:
        self.name = name
        self.command = command
        self.env = env
        self.log_path = folder / f"{name}.log"
        self.process: subprocess.Popen | None = None

    def start(self) -> AppProcess:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command,
                env=self.env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def wait_for_log(self, pattern: str, *, timeout: float = STARTUP_TIMEOUT_SECONDS) -> None:
        def seen() -> bool:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited:\n{self.log_tail()}")
            return re.search(pattern, self.log()) is not None

        try:
            wait_until(seen, timeout=timeout, what=f"{pattern!r} in the log of {self.name}")
        except AssertionError as error:
            raise AssertionError(f"{error}:\n{self.log_tail()}") from None

    def kill(self) -> None:
        """SIGKILL the process and everything it forked: no cleanup runs, as in a crash."""
        if self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def terminate(self) -> None:
        """Ask the process to stop (SIGTERM to its group), without waiting."""
        if self.alive():
            os.killpg(self.process.pid, signal.SIGTERM)

    def stop(self) -> None:
        if not self.alive():
            return
        self.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.kill()


class Daphne(AppProcess):
    def __init__(
        self, name: str, env: dict[str, str], folder: Path, arguments: Sequence[str] = ()
    ) -> None:
        """``arguments``: more of daphne's, such as production's ``--verbosity 0``."""
        self.port = free_port()
        command = [
            sys.executable,
            "-m",
            "chatapp.webserver",
            "-b",
            "127.0.0.1",
            "-p",
            str(self.port),
            *arguments,
        ]
        super().__init__(name, [*command, "chatapp.asgi:application"], env, folder)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_ready(self) -> Daphne:
        def answers() -> bool:
            if not self.alive():
                raise RuntimeError(f"{self.name} exited:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/accounts/login/", timeout=2):
                    return True
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                return False

        wait_until(answers, timeout=STARTUP_TIMEOUT_SECONDS, what=f"{self.name} to serve")
        return self


def worker_process(name: str, env: dict[str, str], folder: Path) -> AppProcess:
    """A Celery worker as production runs one (prefork), with one child to keep it small."""
    command = [
        str(BIN / "celery"),
        "-A",
        "chatapp",
        "worker",
        "--loglevel=INFO",
        "--concurrency=1",
        "--without-gossip",
        "--without-mingle",
        f"--hostname={name}@%h",
    ]
    return AppProcess(name, command, env, folder)


def beat_process(env: dict[str, str], folder: Path) -> AppProcess:
    command = [str(BIN / "celery"), "-A", "chatapp", "beat", "--loglevel=INFO", "--pidfile="]
    return AppProcess("beat", command, env, folder)


@dataclass
class Stack:
    """Everything the tests start; ``env`` is the shared environment of the app's processes."""

    folder: Path
    postgres: PostgresCluster
    redis: RedisServer
    env: dict[str, str]
    web_a: Daphne | None = None
    web_b: Daphne | None = None
    worker: AppProcess | None = None
    beat: AppProcess | None = None
    extra: list[AppProcess] = field(default_factory=list)

    def processes(self) -> list[AppProcess]:
        named = [self.web_a, self.web_b, self.worker, self.beat]
        return [process for process in named if process is not None] + self.extra

    def daphne(self, name: str, **env: str) -> Daphne:
        """Start another daphne process (with ``env`` on top of the shared one)."""
        process = Daphne(name, {**self.env, **env}, self.folder).start()
        self.extra.append(process)
        return process.wait_ready()

    def new_worker(self, name: str, **env: str) -> AppProcess:
        """Start a worker and wait until it takes tasks; it replaces ``worker``."""
        process = worker_process(name, {**self.env, **env}, self.folder).start()
        process.wait_for_log(r"@\S+ ready\.")
        self.worker = process
        return process

    def logs(self) -> str:
        return "\n\n".join(
            f"----- {process.name} -----\n{process.log_tail()}" for process in self.processes()
        )


def _process_group(pgid: int) -> list[int]:
    """The ids of the processes in group ``pgid`` (a started process and what it forked)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces): state, ppid, pgrp, ...
        if int(stat.rpartition(")")[2].split()[2]) == pgid:
            members.append(int(entry.name))
    return members


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    try:
        descriptors = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for descriptor in descriptors:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{descriptor}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _client_ports_to(server_port: int) -> dict[int, int]:
    """The local port of every TCP socket of the machine connected to ``server_port``, by the
    socket's inode. Only those: Linux gives connections to different servers the same local
    port number, so a socket to Redis may be numbered as another process's connection to the
    database."""
    ports = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                if int(fields[2].rpartition(":")[2], 16) == server_port:
                    ports[int(fields[9])] = int(fields[1].rpartition(":")[2], 16)
    return ports


def database_connections_by_process(stack: Stack) -> dict[str, int]:
    """The app's connections to its database now, counted by the process (with its children)
    that holds each: ``{"web-a": 5, "worker-1": 1, ...}``; ``"other"`` counts those of no
    process of the stack (a test's own)."""
    counts: dict[str, int] = {}
    for (name, _), count in database_connections_by_process_and_application(stack).items():
        counts[name] = counts.get(name, 0) + count
    return counts


def database_connections_by_process_and_application(stack: Stack) -> dict[tuple[str, str], int]:
    """``database_connections_by_process`` by process and the ``application_name`` each
    connection gave (``""`` for Django's own): ``{("web-a", "chatapp-async"): 4, ...}``, every
    process named with ``""`` at least. Matched through each backend's client port, among the
    sockets connected to the database's port."""
    backends = stack.postgres.rows(
        "SELECT client_port, application_name FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND backend_type = 'client backend'"
    )
    ports_by_inode = _client_ports_to(stack.postgres.port)
    owners: dict[int, str] = {}
    for process in stack.processes():
        if not process.alive():
            continue
        for pid in _process_group(process.process.pid):
            for inode in _socket_inodes(pid):
                if inode in ports_by_inode:
                    owners[ports_by_inode[inode]] = process.name
    counts = {(process.name, ""): 0 for process in stack.processes()}
    counts["other", ""] = 0
    for port, application in backends:
        key = (owners.get(port, "other"), application)
        counts[key] = counts.get(key, 0) + 1
    return counts


# The rows of one chat in raw SQL: tables point at a session by its row's key, and a test
# knows the session's id (unique per app and user).
OF_SESSION = "IN (SELECT key FROM sessions_app_sessionrecord WHERE session_id = %s)"


def manage(env: dict[str, str], *args: str) -> None:
    subprocess.run(
        [str(BIN / "python"), str(ROOT / "manage.py"), *args], env=env, cwd=ROOT, check=True
    )


# Turn claims, the sweeper and graceful shutdown on a test's time scale: a dead process's turn
# can be resumed after 2 s and is stored as interrupted after 6 s; SIGTERM gives turns 3 s.
TURN_TIMINGS = {
    "TURN_LEASE_SECONDS": "2",
    "TURN_INTERRUPTED_AFTER_SECONDS": "6",
    "TURN_SWEEP_INTERVAL_SECONDS": "1",
    "TURN_SHUTDOWN_GRACE_SECONDS": "3",
}


def app_environment(*, database_url: str, redis_url: str, prefix: str) -> dict[str, str]:
    """The environment every process of the app gets: production's shape, the offline model,
    the memory sweeper (beat) running every two seconds instead of every five minutes, and the
    turn timings above."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.lower().endswith("_proxy") and key not in {"DATABASE_URL", "REDIS_URL"}
    }
    return {
        **environment,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "BACKGROUND_TASKS": "celery",
        "CACHE_KEY_PREFIX": prefix,
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "GEMINI_API_KEY": "",
        "GOOGLE_API_KEY": "",
        "GOOGLE_GENAI_USE_VERTEXAI": "false",
        "OFFLINE_MODEL_CHUNK_DELAY_SECONDS": "0.05",
        "MEMORY_MAINTENANCE_INTERVAL_SECONDS": "2",
        "MEMORY_JOB_REDISPATCH_AFTER_SECONDS": "3",
        "TASK_VISIBILITY_TIMEOUT_SECONDS": "6",
        "CHAT_TURNS_PER_MINUTE": "200",
        # The connection-budget test sends 800 requests in well under a minute as one user.
        "API_THROTTLE_USER_RATE": "100000/minute",
        # Every client of the tests signs up from 127.0.0.1.
        "SIGNUP_PER_ADDRESS_PER_HOUR": "0",
        **TURN_TIMINGS,
        "LOG_LEVEL": "INFO",
        "PRODUCTION": "false",
        "DEBUG": "false",
    }


def embedded_environment(*, database_url: str) -> dict[str, str]:
    """The environment of the embedded default (``make run``): SQLite, no Redis, background and
    periodic work in the web process; the offline model and short turn timings as above."""
    environment = app_environment(database_url=database_url, redis_url="", prefix="embedded")
    for name in ("REDIS_URL", "BACKGROUND_TASKS", "CACHE_KEY_PREFIX"):
        environment.pop(name)
    return environment


@contextlib.contextmanager
def running_stack(*, second_web: bool = True, beat: bool = True) -> Iterator[Stack]:
    """PostgreSQL and Redis of their own, migrated, then two daphne (one without
    ``second_web``), a worker and beat (unless ``beat`` is False)."""
    folder = Path(tempfile.mkdtemp(prefix="chat-multiprocess-"))
    os.chmod(folder, 0o755)
    postgres = PostgresCluster(folder)
    redis = RedisServer(folder)
    stack = Stack(folder=folder, postgres=postgres, redis=redis, env={})
    try:
        postgres.create()
        redis.start()
        stack.env = app_environment(
            database_url=postgres.url, redis_url=redis.url, prefix=f"mp{uuid.uuid4().hex[:8]}"
        )
        manage(stack.env, "migrate", "--noinput", "-v", "0")
        stack.web_a = Daphne("web-a", stack.env, folder).start()
        if second_web:
            stack.web_b = Daphne("web-b", stack.env, folder).start()
        if beat:
            stack.beat = beat_process(stack.env, folder).start()
        stack.new_worker("worker-1")
        for web in (stack.web_a, stack.web_b):
            if web is not None:
                web.wait_ready()
        yield stack
    finally:
        for process in stack.processes():
            process.terminate()
        for process in stack.processes():
            process.stop()
        redis.stop()
        with contextlib.suppress(subprocess.CalledProcessError):
            postgres.stop()
        shutil.rmtree(folder, ignore_errors=True)


# --- Clients ------------------------------------------------------------------------------------


class Browser:
    """What a browser holds for one signed-in user: the cookies, used over HTTP and WebSocket."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def cookie(self, name: str) -> str | None:
        return next((c.value for c in self.cookies if c.name == name), None)

    def _form_post(self, path: str, fields: dict[str, str]) -> None:
        """Fill in and send the form of the page at ``path``, CSRF token and all."""
        with self.opener.open(f"{self.base_url}{path}", timeout=15) as response:
            page = response.read().decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)[1]
        body = urllib.parse.urlencode({**fields, "csrfmiddlewaretoken": token}).encode()
        request = urllib.request.Request(
            f"{self.base_url}{path}", data=body, headers={"Referer": self.base_url}
        )
        with self.opener.open(request, timeout=15):
            pass

    def sign_up(self) -> Browser:
        """Create an account through the sign-up form, which signs the new user in."""
        self.username = f"user-{uuid.uuid4().hex[:10]}"
        fields = {"username": self.username, "password1": PASSWORD, "password2": PASSWORD}
        self._form_post("/accounts/signup/", fields)
        assert self.cookie("sessionid"), "signing up set no session cookie"
        return self

    def user_pk(self, postgres: PostgresCluster) -> int:
        return postgres.rows("SELECT id FROM auth_user WHERE username = %s", self.username)[0][0]

    def api(
        self, method: str, path: str, body: Any = None, *, base_url: str | None = None
    ) -> tuple[int, Any, dict[str, str]]:
        """A REST call with the session cookie (and CSRF token); (status, JSON or text, headers)."""
        headers = {"Accept": "application/json", "X-CSRFToken": self.cookie("csrftoken") or ""}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        url = f"{base_url or self.base_url}{path}"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self.opener.open(request, timeout=15) as response:
                status, raw, found = response.status, response.read(), dict(response.headers)
        except urllib.error.HTTPError as error:
            status, raw, found = error.code, error.read(), dict(error.headers)
        text = raw.decode(errors="replace")
        try:
            return status, json.loads(text) if text else None, found
        except ValueError:
            return status, text, found

    def session_create(self) -> str:
        status, body, _ = self.api("POST", "/api/sessions/", {"app_name": "chat"})
        assert status == 201, (status, body)
        return body["id"]

    async def socket(self, session_id: str, *, base_url: str | None = None) -> ChatSocket:
        base = base_url or self.base_url
        url = base.replace("http://", "ws://") + f"/ws/chat/{session_id}/"
        connection = await connect(
            url,
            additional_headers={
                "Cookie": f"sessionid={self.cookie('sessionid')}",
                "Origin": base,
            },
            open_timeout=15,
        )
        return ChatSocket(connection)


class ChatSocket:
    """A chat WebSocket that keeps every frame it received, for tests to wait on."""

    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.frames: list[dict[str, Any]] = []
        self._seen = 0

    async def send(self, frame: dict[str, Any]) -> None:
        await self.connection.send(json.dumps(frame))

    async def wait_for(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        *,
        start: int = 0,
        timeout: float = FRAME_TIMEOUT_SECONDS,
    ) -> dict[str, Any]:
        """The first frame from the ``start``-th on (received already or from now) that matches."""
        for frame in self.frames[start:]:
            if predicate(frame):
                return frame
        async with asyncio.timeout(timeout):
            while True:
                frame = json.loads(await self.connection.recv())
                self.frames.append(frame)
                if predicate(frame):
                    return frame

    async def turn(
        self, text: str, *, client_message_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Send a message and return the frames of its turn, up to its ``turn_complete``."""
        client_message_id = client_message_id or uuid.uuid4().hex
        start = len(self.frames)
        await self.send(
            {"type": "user_message", "text": text, "client_message_id": client_message_id}
        )
        await self.wait_for(
            lambda frame: (
                frame.get("type") == "turn_complete"
                and frame.get("client_message_id") == client_message_id
            ),
            start=start,
        )
        return self.frames[start:]

    async def close(self) -> None:
        await self.connection.close()


def frames_of(frames: list[dict[str, Any]], frame_type: str) -> list[dict[str, Any]]:
    return [frame for frame in frames if frame.get("type") == frame_type]


def reply_text(frames: list[dict[str, Any]]) -> str:
    """The text of the turn's final stored reply."""
    finals = [
        frame["event"]
        for frame in frames_of(frames, "event")
        if frame["event"].get("turn_complete")
    ]
    assert finals, f"no final reply among {frames}"
    parts = (finals[-1].get("content") or {}).get("parts") or []
    return "".join(part.get("text") or "" for part in parts)
