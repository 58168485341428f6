"""WebSocket chat under load: N open sockets and M turns streaming at once, on one daphne process
or several behind one address (``chatapp.serve``).

    python -m bench.ws_load                          # 500 sockets, 100 turns (docs/benchmarks.md)
    python -m bench.ws_load --processes 2            # two daphne processes on one port
    python -m bench.ws_load --sockets 50 --turns 10  # a quick look

Embedded by default (a fresh SQLite file under build/, in-memory channel
layer); with ``DATABASE_URL`` (PostgreSQL) it recreates a dedicated database
``<name>_wsload`` on that server, and ``REDIS_URL`` gives daphne the Redis
channel layer and cache. The offline model answers (no network).

It migrates the database, creates one user with one session per socket and
signs each in (a Django session cookie), starts daphne on a free port, opens
every socket, then sends a message on M of them at the same moment. Each turn
must stream at least one delta whose concatenation is the final reply, and
end with a ``turn_complete`` that is neither interrupted nor a duplicate; any
other outcome, an error frame, a refused or dropped socket, or a traceback in
daphne's log counts as an error. Finally every socket must still answer a ping.
Prints connect time, time to first delta and turn time (p50/p95/max) and the
error count, and writes them to build/bench-ws-load.json. Timings are
printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
BUILD_DIR = BASE_DIR / "build"
SQLITE_PATH = BUILD_DIR / "bench-ws-load.sqlite3"
DAPHNE_LOG = BUILD_DIR / "bench-ws-load-daphne.log"
RESULTS_PATH = BUILD_DIR / "bench-ws-load.json"
APP_NAME = "chat"
WAIT_SECONDS = 120.0  # a socket or a turn slower than this counts as an error


def arguments_parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sockets", type=int, default=500, help="sockets kept open")
    parser.add_argument("--turns", type=int, default=100, help="turns started at the same moment")
    parser.add_argument(
        "--chunk-delay",
        type=float,
        default=0.02,
        help="the offline model's pause between streamed chunks, seconds (its default)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="daphne processes behind the one address (chatapp.serve) when more than one",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds to wait between the last socket opened and the turns, then on until "
        "daphne is idle (default: no wait)",
    )
    parser.add_argument(
        "--message",
        default="Tell me how a chat server copes with {n} people typing at once, please.",
        help="the text each turn sends; {n} is the socket's number",
    )
    args = parser.parse_args(argv)
    if args.turns > args.sockets:
        parser.error("--turns cannot exceed --sockets")
    return args


def open_files_limit_raise(needed: int) -> int:
    """Raise this process's open-file limit (daphne inherits it) to fit the sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, needed)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft < needed:
        sys.exit(f"The open-file limit is {soft}; {needed} are needed. Raise `ulimit -n`.")
    return soft


def database_prepare() -> str:
    """The DATABASE_URL of a fresh, empty bench database (never the app's own)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        BUILD_DIR.mkdir(exist_ok=True)
        for path in (SQLITE_PATH, Path(f"{SQLITE_PATH}-wal"), Path(f"{SQLITE_PATH}-shm")):
            path.unlink(missing_ok=True)
        return f"sqlite:///{SQLITE_PATH}"
    import psycopg
    from psycopg import sql

    server, _, name = url.partition("?")[0].rpartition("/")
    bench_name = f"{name}_wsload"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(bench_name))
        )
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(bench_name)))
    return f"{server}/{bench_name}"


def server_environment_set(*, database_url: str, chunk_delay: float) -> None:
    """The settings this process and the daphne processes it starts run with: the bench
    database, production's DEBUG, and the offline model (no provider key) pausing
    ``chunk_delay`` seconds before each chunk it streams."""
    os.environ.update(
        {
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "chatapp.settings",
            "DEBUG": "false",
            "OFFLINE_MODEL_CHUNK_DELAY_SECONDS": str(chunk_delay),
            "GEMINI_API_KEY": "",
            "GOOGLE_API_KEY": "",
            "GOOGLE_GENAI_USE_VERTEXAI": "false",
        }
    )
    sys.path.insert(0, str(BASE_DIR))


def users_prepare(count: int) -> list[tuple[str, str]]:
    """Migrate, then make ``count`` signed-in users with one session each.

    Returns (session id, session cookie value) per user. The cookie is a real
    Django session, made the way ``login`` makes it, so the socket goes
    through the same AuthMiddlewareStack as a browser's.
    """
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import (
        BACKEND_SESSION_KEY,
        HASH_SESSION_KEY,
        SESSION_KEY,
        get_user_model,
    )
    from django.contrib.sessions.backends.db import SessionStore
    from django.core.management import call_command
    from django.db import connections
    from django.utils.module_loading import import_string

    from sessions_app import services

    call_command("migrate", verbosity=0, interactive=False)
    user_model = get_user_model()
    users = [user_model(username=f"wsload-{n}") for n in range(count)]
    for user in users:
        user.set_unusable_password()
    users = user_model.objects.bulk_create(users)
    # The backend a sign-in records is the one that can load the user again (django-axes,
    # listed first, cannot).
    backend = next(
        path
        for path in settings.AUTHENTICATION_BACKENDS
        if hasattr(import_string(path), "get_user")
    )
    prepared = []
    for n, user in enumerate(users, start=1):
        session = services.session_create(app_name=APP_NAME, user_id=str(user.pk))
        store = SessionStore()
        store[SESSION_KEY] = str(user.pk)
        store[BACKEND_SESSION_KEY] = backend
        store[HASH_SESSION_KEY] = user.get_session_auth_hash()
        store.create()
        prepared.append((session.id, store.session_key))
        if n % 100 == 0 or n == count:
            print(f"setup: {n}/{count} users with a session and a cookie", flush=True)
    connections.close_all()
    return prepared


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def daphne_start(port: int, environment: dict[str, str], processes: int) -> subprocess.Popen:
    """daphne serving the project on ``port``, once it answers HTTP: one process, or several
    on one listening socket (``chatapp.serve``)."""
    BUILD_DIR.mkdir(exist_ok=True)
    log = DAPHNE_LOG.open("w")
    if processes > 1:
        command = [
            *(sys.executable, "-m", "chatapp.serve", "--bind", f"127.0.0.1:{port}"),
            *("--processes", str(processes)),
        ]
    else:
        command = [
            *(sys.executable, "-m", "chatapp.webserver", "-b", "127.0.0.1", "-p", str(port)),
            "chatapp.asgi:application",
        ]
    process = subprocess.Popen(
        command,
        cwd=BASE_DIR,
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server_wait(process, url=f"http://127.0.0.1:{port}/accounts/login/", log=DAPHNE_LOG)
    return process


def server_wait(process: subprocess.Popen, *, url: str, log: Path) -> None:
    """Return once the server started as ``process`` answers ``url``; exit if it stops or
    has not answered within a minute (its output is in ``log``)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"{process.args[2]} exited with {process.returncode}; see {log}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    process.terminate()
    sys.exit(f"{process.args[2]} did not answer within 60 s; see {log}")


def server_stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def server_cpu_seconds(server: subprocess.Popen) -> float:
    """Processor time (user and system) used so far by the server's processes: the one daphne,
    or ``chatapp.serve`` and the daphne processes it started (read from /proc; 0 elsewhere)."""
    ticks = os.sysconf("SC_CLK_TCK")
    pids = [server.pid]
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children")
    if children.exists():
        pids += [int(pid) for pid in children.read_text().split()]
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return total


async def server_settle(server: subprocess.Popen, seconds: float) -> None:
    """Wait ``seconds`` (none when 0), then on until the server is idle: its processes used
    under 5% of a processor over half a second (a minute at most)."""
    if seconds <= 0:
        return
    await asyncio.sleep(seconds)
    deadline = time.monotonic() + 60
    used = server_cpu_seconds(server)
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        used, before = server_cpu_seconds(server), used
        if used - before < 0.025:
            return


@dataclass
class Results:
    connect: list[float] = field(default_factory=list)
    first_delta: list[float] = field(default_factory=list)
    turn: list[float] = field(default_factory=list)
    chunks: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def socket_open(port: int, session_id: str, cookie: str, results: Results):
    from websockets.asyncio.client import connect

    opening = connect(
        f"ws://127.0.0.1:{port}/ws/chat/{session_id}/",
        origin=f"http://127.0.0.1:{port}",
        additional_headers={"Cookie": f"sessionid={cookie}"},
        open_timeout=WAIT_SECONDS,
        compression=None,
    )
    return await connection_timed(opening, results)


async def connection_timed(opening: Awaitable[Any], results: Results) -> Any:
    """The connection ``opening`` opens, its time counted in ``results.connect``; None, and
    an error counted, if it fails."""
    started = time.perf_counter()
    try:
        connection = await opening
    except Exception as error:
        results.errors.append(f"connect: {type(error).__name__}: {error}")
        return None
    results.connect.append(time.perf_counter() - started)
    return connection


async def turns_gather(turns: list[Awaitable[None]], results: Results) -> None:
    """Run ``turns`` at once; one that raises counts as an error."""
    outcomes = await asyncio.gather(*turns, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            results.errors.append(f"turn: {type(outcome).__name__}: {outcome}")


async def turn_run(
    connection, n: int, text: str, results: Results, *, client_message_id: str
) -> None:
    """One turn on an open socket; checks the stream the way the chat page relies on it."""
    started = time.perf_counter()
    await connection.send(
        json.dumps({"type": "user_message", "text": text, "client_message_id": client_message_id})
    )
    deltas: list[str] = []
    final_text = None
    while True:
        frame = json.loads(await asyncio.wait_for(connection.recv(), WAIT_SECONDS))
        if frame["type"] == "delta":
            if not deltas:
                results.first_delta.append(time.perf_counter() - started)
            deltas.append(frame["text"])
        elif frame["type"] == "event" and frame["event"]["author"] != "user":
            parts = frame["event"].get("content", {}).get("parts", [])
            final_text = "".join(part.get("text", "") for part in parts)
        elif frame["type"] == "error":
            results.errors.append(f"turn {n}: error frame {frame['code']}: {frame['message']}")
        elif frame["type"] == "turn_complete":
            break
    results.turn.append(time.perf_counter() - started)
    results.chunks.append(len(deltas))
    if frame["interrupted"] or frame["duplicate"]:
        results.errors.append(f"turn {n}: interrupted or duplicate: {frame}")
    if not deltas or "".join(deltas) != final_text:
        results.errors.append(f"turn {n}: the deltas do not make up the reply")


async def ping_check(connection, n: int, results: Results) -> None:
    try:
        await connection.send(json.dumps({"type": "ping"}))
        frame = json.loads(await asyncio.wait_for(connection.recv(), WAIT_SECONDS))
        if frame != {"type": "pong"}:
            results.errors.append(f"socket {n}: answered a ping with {frame}")
    except Exception as error:
        results.errors.append(f"socket {n}: ping failed: {type(error).__name__}: {error}")


async def load_run(
    args: argparse.Namespace,
    port: int,
    prepared: list[tuple[str, str]],
    results: Results,
    server: subprocess.Popen,
    *,
    label: str = "load",
) -> tuple[dict[str, float], dict[str, float]]:
    """Open every socket, run the turns at once, ping every socket; the wall time of each
    phase, and the server's processor time in each (seconds). A turn's client message id is
    ``<label>-<socket number>``: a later run on the same sessions needs a label of its own."""
    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    cpu_before = server_cpu_seconds(server)
    started = time.perf_counter()
    connections = []
    batch = 100
    for first in range(0, len(prepared), batch):
        opened = await asyncio.gather(
            *(
                socket_open(port, session_id, cookie, results)
                for session_id, cookie in prepared[first : first + batch]
            )
        )
        connections.extend(opened)
        print(
            f"connect: {len(results.connect)}/{len(prepared)} open, {len(results.errors)} errors",
            flush=True,
        )
    wall["connect_all"] = time.perf_counter() - started
    # With --settle, what connecting left running (the presence bookkeeping after each
    # accept) ends first, so that the turns are measured alone.
    await server_settle(server, args.settle)
    cpu_settled = server_cpu_seconds(server)
    cpu["connect_all"] = cpu_settled - cpu_before
    open_connections = [(n, c) for n, c in enumerate(connections) if c is not None]

    print(f"turns: starting {args.turns} at once on {len(open_connections)} open sockets")
    started = time.perf_counter()
    turns = [
        turn_run(connection, n, args.message.format(n=n), results, client_message_id=f"{label}-{n}")
        for n, connection in open_connections[: args.turns]
    ]
    await turns_gather(turns, results)
    wall["turns_all"] = time.perf_counter() - started
    cpu["turns_all"] = server_cpu_seconds(server) - cpu_settled
    print(f"turns: {len(results.turn)}/{args.turns} complete, {len(results.errors)} errors")

    await asyncio.gather(*(ping_check(c, n, results) for n, c in open_connections))
    print(f"ping: every open socket asked; {len(results.errors)} errors so far")
    await asyncio.gather(*(c.close() for _, c in open_connections), return_exceptions=True)
    return wall, cpu


def percentiles_ms(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)

    def at(fraction: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000, 1)

    return {"n": len(ordered), "p50": at(0.50), "p95": at(0.95), "max": at(1.0)}


def main(argv: list[str] | None = None) -> int:
    args = arguments_parse(argv)
    limit = open_files_limit_raise(2 * args.sockets + 256)
    database_url = database_prepare()
    server_environment_set(database_url=database_url, chunk_delay=args.chunk_delay)
    print(
        f"database: {database_url.rsplit('@', 1)[-1]}; channel layer: "
        f"{'Redis' if os.environ.get('REDIS_URL') else 'in-memory'}; open-file limit {limit}"
    )
    prepared = users_prepare(args.sockets)
    port = free_port()
    environment = {**os.environ, "PYTHONPATH": str(BASE_DIR)}
    server = daphne_start(port, environment, args.processes)
    print(
        f"daphne: {args.processes} process(es) serving on 127.0.0.1:{port}"
        f" (log: {DAPHNE_LOG.relative_to(BASE_DIR)})"
    )
    results = Results()
    try:
        wall, cpu = asyncio.run(load_run(args, port, prepared, results, server))
    finally:
        server_stop(server)
    server_errors = [
        line.strip() for line in DAPHNE_LOG.read_text().splitlines() if "Traceback" in line
    ]
    results.errors.extend(f"daphne: {line}" for line in server_errors)

    report = {
        "sockets": args.sockets,
        "turns": args.turns,
        "processes": args.processes,
        "load_average": os.getloadavg(),
        "chunk_delay_s": args.chunk_delay,
        "database": "postgresql" if database_url.startswith("postgres") else "sqlite",
        "channel_layer": "redis" if os.environ.get("REDIS_URL") else "in-memory",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "connect_ms": percentiles_ms(results.connect),
        "first_delta_ms": percentiles_ms(results.first_delta),
        "turn_ms": percentiles_ms(results.turn),
        "wall_s": {key: round(value, 2) for key, value in wall.items()},
        "server_cpu_s": {key: round(value, 2) for key, value in cpu.items()},
        "server_cpu_per_turn_ms": round(1000 * cpu["turns_all"] / args.turns, 1),
        "errors": len(results.errors),
    }
    RESULTS_PATH.write_text(json.dumps(report, indent=2) + "\n")
    print()
    print(
        f"{args.sockets} sockets, {args.turns} turns at once on {args.processes} daphne "
        f"process(es) ({report['database']}, "
        f"{report['channel_layer']} channel layer, chunk delay {args.chunk_delay}s)"
    )
    for key, label in (
        ("connect_ms", "connect (handshake + auth)"),
        ("first_delta_ms", "time to first delta"),
        ("turn_ms", "turn time (send to turn_complete)"),
    ):
        figures = report[key]
        if figures["n"]:
            print(
                f"  {label:36} p50 {figures['p50']:8.1f} ms  p95 {figures['p95']:8.1f} ms  "
                f"max {figures['max']:8.1f} ms  (n={figures['n']})"
            )
    print(
        f"  all sockets open in {wall['connect_all']:.2f} s; "
        f"all turns done in {wall['turns_all']:.2f} s"
    )
    print(
        f"  server processor time: {cpu['connect_all']:.2f} s connecting, "
        f"{cpu['turns_all']:.2f} s for the turns ({report['server_cpu_per_turn_ms']} ms a turn)"
    )
    print(f"  load average at the end: {' '.join(f'{x:.2f}' for x in report['load_average'])}")
    print(f"  errors: {len(results.errors)}")
    for error in results.errors[:20]:
        print(f"    {error}")
    print(f"written to {RESULTS_PATH.relative_to(BASE_DIR)}")
    return 1 if results.errors else 0


if __name__ == "__main__":
    sys.exit(main())
