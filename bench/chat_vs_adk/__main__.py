"""Chat at scale against ADK's own API server: the same workload on both, alternated, in one run.

    python -m bench.chat_vs_adk                              # the full run (docs/benchmarks.md)
    python -m bench.chat_vs_adk --processes 2 --turns 100 --repeats 3
    python -m bench.chat_vs_adk --connections 20 --turns 10 --processes 1   # a quick look

Both sides run on the same PostgreSQL server, each on a database of its own that is dropped
and recreated (``--database``, ``--adk-database``). Ours is daphne (one process, or several
on one socket: ``chatapp.serve``) with the offline model, on the Redis channel layer when
``REDIS_URL`` is set, driven over WebSockets by ``bench.ws_load``. ADK's is
``get_fast_api_app`` under uvicorn (one process, or uvicorn's workers) with
DatabaseSessionService, run in google-adk's own environment (``bench.adk_venv``), driven over
``/run_sse`` (``bench.chat_vs_adk.adk_load``), once as shipped and once tuned (the product's
GC tuning, and uvloop and httptools where that environment has them). Both models stream the
same number of chunks, the count our offline model streams for the message, each after the
same pause.

For each number of server processes all three servers are started; then for each number of
turns (and each repeat) the sides take turns, the first side rotating with the repeat: a
side's round opens ``--connections`` connections (one a user, each user with a session of
its own), waits until the server is idle again, starts that many turns at the same moment on
the first of them, and closes them. Printed and written to build/bench-chat-vs-adk.json:
time to first token and turn time (p50, p95, max), the server's processor time a turn (its
processes' /proc stat before and after the turns), errors, the load average after each
round, and ADK's figures over ours; the plot (build/bench-chat-vs-adk.png, with matplotlib)
shows first token p50 by turns at once.
Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench import ws_load
from bench.adk_venv import adk_python
from bench.chat_vs_adk import adk_load
from bench.chat_vs_adk.adk_server import APP_NAME
from bench.turn_overhead import database_recreate

BASE_DIR = ws_load.BASE_DIR
BUILD_DIR = ws_load.BUILD_DIR
RESULTS_PATH = BUILD_DIR / "bench-chat-vs-adk.json"
PLOT_PATH = BUILD_DIR / "bench-chat-vs-adk.png"
SIDES = ("ours", "adk", "adk-tuned")
WARM_UP_TURNS = 20  # a first, untimed round on each server: imports and connections made
FIGURES = (
    ("first_token_ms", "first token"),
    ("turn_ms", "turn"),
)


def numbers(text: str) -> list[int]:
    values = [int(value) for value in text.split(",") if value.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"positive whole numbers, comma-separated: {text!r}")
    return values


def sides(text: str) -> list[str]:
    chosen = [value.strip() for value in text.split(",") if value.strip()]
    unknown = set(chosen) - set(SIDES)
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(f"sides among {', '.join(SIDES)}, not {text!r}")
    return chosen


def arguments_parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connections", type=int, default=500, help="connections kept open")
    parser.add_argument(
        "--turns", type=numbers, default=[10, 50, 100, 200], help="turns at once, e.g. 10,100"
    )
    parser.add_argument(
        "--processes", type=numbers, default=[1, 2], help="server processes a side, e.g. 1,2"
    )
    parser.add_argument("--repeats", type=int, default=1, help="rounds of each side a setting")
    parser.add_argument("--sides", type=sides, default=list(SIDES), help=", ".join(SIDES))
    parser.add_argument(
        "--chunk-delay", type=float, default=0.02, help="both models' pause before each chunk, s"
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=1.0,
        help="seconds between connecting and the turns, then on until the server is idle",
    )
    parser.add_argument(
        "--server", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL, no database"
    )
    parser.add_argument("--database", default="bench_chat_vs_adk", help="ours; recreated")
    parser.add_argument("--adk-database", default="bench_chat_vs_adk_adk", help="ADK's; recreated")
    parser.add_argument(
        "--message",
        default="Tell me how a chat server copes with {n} people typing at once, please.",
        help="the text each turn sends; {n} is the connection's number",
    )
    parser.add_argument("--output", type=Path, default=RESULTS_PATH)
    parser.add_argument("--plot", type=Path, default=PLOT_PATH)
    args = parser.parse_args(argv)
    if max(args.turns) > args.connections:
        parser.error("--turns cannot be more than --connections")
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.database == args.adk_database:
        parser.error("--database and --adk-database must differ")
    return args


@dataclass
class Server:
    side: str
    processes: int
    port: int
    process: subprocess.Popen
    log: Path


def adk_start(*, side: str, processes: int, args: argparse.Namespace, chunks: int) -> Server:
    """ADK's API server (``bench.chat_vs_adk.adk_server``) on a free port, once it answers."""
    port = ws_load.free_port()
    log = BUILD_DIR / f"bench-chat-vs-adk-{side}.log"
    agents_dir = BUILD_DIR / "bench-chat-vs-adk-agents"
    agents_dir.mkdir(parents=True, exist_ok=True)
    database = args.server.replace("postgres://", "postgresql+asyncpg://", 1)
    command = [
        *(str(adk_python()), "-m", "bench.chat_vs_adk.adk_server"),
        *("--port", str(port), "--db-url", f"{database}/{args.adk_database}"),
        *("--processes", str(processes), "--agents-dir", str(agents_dir)),
        *("--chunks", str(chunks), "--chunk-delay", str(args.chunk_delay)),
        *(["--tuned"] if side == "adk-tuned" else []),
    ]
    with log.open("w") as output:
        process = subprocess.Popen(
            command,
            cwd=BASE_DIR,
            env={**os.environ, "PYTHONPATH": str(BASE_DIR)},
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    ws_load.server_wait(process, url=f"http://127.0.0.1:{port}/list-apps", log=log)
    return Server(side, processes, port, process, log)


def ours_start(*, processes: int) -> Server:
    port = ws_load.free_port()
    environment = {**os.environ, "PYTHONPATH": str(BASE_DIR)}
    process = ws_load.daphne_start(port, environment, processes)
    return Server("ours", processes, port, process, ws_load.DAPHNE_LOG)


def adk_sessions_create(*, port: int, count: int) -> list[tuple[str, str]]:
    """A session for each of ``count`` users, through ADK's API: (user id, session id)."""
    created = []
    for n in range(count):
        user_id = f"chat-vs-adk-{n}"
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/apps/{APP_NAME}/users/{user_id}/sessions",
            data=b"{}",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            created.append((user_id, json.loads(response.read())["id"]))
    print(f"setup: {count} ADK sessions")
    return created


def offline_chunks(message: str) -> int:
    """How many text chunks our offline model streams in answer to ``message``."""
    from google.genai import types

    from agents_app.runtime.offline import OfflineModel
    from core.llm import LlmRequest

    request = LlmRequest(
        model="offline",
        system_instruction="",
        contents=[types.Content(role="user", parts=[types.Part(text=message)])],
    )

    async def count() -> int:
        stream = OfflineModel(chunk_delay=0).generate_stream(request)
        return sum([1 async for chunk in stream if chunk.text])

    return asyncio.run(count())


def round_run(
    server: Server,
    *,
    turns: int,
    repeat: int,
    args: argparse.Namespace,
    ours_users: list[tuple[str, str]],
    adk_sessions: list[tuple[str, str]],
) -> dict:
    """One side's round: connect, ``turns`` turns at once, close; its figures."""
    results = ws_load.Results()
    if server.side == "ours":
        options = argparse.Namespace(settle=args.settle, turns=turns, message=args.message)
        label = f"p{server.processes}-t{turns}-r{repeat}"
        load = ws_load.load_run(
            options, server.port, ours_users, results, server.process, label=label
        )
    else:
        load = adk_load.load_run(
            port=server.port,
            sessions=adk_sessions,
            turns=turns,
            message=args.message,
            settle=args.settle,
            results=results,
            server=server.process,
        )
    wall, cpu = asyncio.run(load)
    return {
        "side": server.side,
        "processes": server.processes,
        "turns": turns,
        "repeat": repeat,
        "first_token_ms": ws_load.percentiles_ms(results.first_delta),
        "turn_ms": ws_load.percentiles_ms(results.turn),
        "connect_ms": ws_load.percentiles_ms(results.connect),
        "chunks_a_turn": statistics.mean(results.chunks) if results.chunks else 0,
        "server_cpu_per_turn_ms": round(1000 * cpu["turns_all"] / turns, 1),
        "server_cpu_s": {key: round(value, 2) for key, value in cpu.items()},
        "wall_s": {key: round(value, 2) for key, value in wall.items()},
        "errors": len(results.errors),
        "error_samples": results.errors[:5],
        "load_average": [round(value, 2) for value in os.getloadavg()],
    }


def ratio(theirs: dict, ours: dict, figure: str) -> float | None:
    """``figure`` (its p50 where it has percentiles) of one round over another's."""
    mine, peer = ours[figure], theirs[figure]
    if isinstance(mine, dict):
        mine, peer = mine.get("p50"), peer.get("p50")
    return round(peer / mine, 2) if mine and peer else None


def ratios(rows: list[dict]) -> list[dict]:
    """Each ADK round's figures over ours in the same setting and repeat."""
    ours = {(r["processes"], r["turns"], r["repeat"]): r for r in rows if r["side"] == "ours"}
    compared = []
    for row in rows:
        peer = ours.get((row["processes"], row["turns"], row["repeat"]))
        if row["side"] == "ours" or peer is None:
            continue
        compared.append(
            {
                "side": row["side"],
                "processes": row["processes"],
                "turns": row["turns"],
                "repeat": row["repeat"],
                "first_token_p50": ratio(row, peer, "first_token_ms"),
                "turn_p50": ratio(row, peer, "turn_ms"),
                "server_cpu_per_turn": ratio(row, peer, "server_cpu_per_turn_ms"),
            }
        )
    return compared


def row_print(row: dict) -> None:
    figures = "  ".join(
        f"{label} {row[key].get('p50', 0):7.1f}/{row[key].get('p95', 0):7.1f}/"
        f"{row[key].get('max', 0):7.1f}"
        for key, label in FIGURES
    )
    print(
        f"  {row['side']:9} p={row['processes']} turns={row['turns']:<4} run {row['repeat'] + 1}"
        f"  {figures} ms (p50/p95/max)  cpu {row['server_cpu_per_turn_ms']:5.1f} ms a turn"
        f"  chunks {row['chunks_a_turn']:.1f}  errors {row['errors']}"
        f"  load {row['load_average'][0]:.2f}"
    )


def plot_write(rows: list[dict], path: Path) -> str:
    """First token p50 (median over the repeats) by turns at once, a line per side and
    process count; says where it went, or why there is none."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no plot: matplotlib is not installed (it is locked in requirements/bench.txt)"
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for side in SIDES:
        for processes in sorted({r["processes"] for r in rows}):
            mine = [r for r in rows if r["side"] == side and r["processes"] == processes]
            turns = sorted({r["turns"] for r in mine})
            if not turns:
                continue
            medians = [
                statistics.median(
                    r["first_token_ms"].get("p50", 0) for r in mine if r["turns"] == count
                )
                for count in turns
            ]
            axes.plot(turns, medians, marker="o", label=f"{side}, {processes} process(es)")
    axes.set_xlabel("turns started at the same moment")
    axes.set_ylabel("time to first token, p50 (ms)")
    axes.set_yscale("log")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return f"plot written to {path}"


def main(argv: list[str] | None = None) -> int:
    args = arguments_parse(argv)
    sys.stdout.reconfigure(line_buffering=True)  # progress shows as it happens in a log too
    load_before = os.getloadavg()
    limit = ws_load.open_files_limit_raise(2 * args.connections + 256)
    for name in (args.database, args.adk_database):
        database_recreate(f"{args.server}/{name}")
    ws_load.server_environment_set(
        database_url=f"{args.server}/{args.database}", chunk_delay=args.chunk_delay
    )
    channel_layer = "redis" if os.environ.get("REDIS_URL") else "in-memory"
    print(f"PostgreSQL {args.server.rsplit('@', 1)[-1]}; our channel layer: {channel_layer}")
    ours_users = ws_load.users_prepare(args.connections)
    chunks = offline_chunks(args.message.format(n=0))
    adk = json.loads(
        subprocess.run(
            [str(adk_python()), "-m", "bench.chat_vs_adk.adk_server", "--describe"],
            cwd=BASE_DIR,
            env={**os.environ, "PYTHONPATH": str(BASE_DIR)},
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    )
    print(f"both models stream {chunks} chunks, {args.chunk_delay} s before each; ADK: {adk}")

    rows: list[dict] = []
    server_errors: dict[str, int] = {}
    adk_sessions: list[tuple[str, str]] = []
    for processes in args.processes:
        servers = []
        try:
            for side in args.sides:
                if side == "ours":
                    servers.append(ours_start(processes=processes))
                else:
                    servers.append(
                        adk_start(side=side, processes=processes, args=args, chunks=chunks)
                    )
                    if not adk_sessions:
                        adk_sessions = adk_sessions_create(
                            port=servers[-1].port, count=args.connections
                        )
            for server in servers:
                print(f"-- warming {server.side} up (untimed)")
                round_run(
                    server,
                    turns=min(WARM_UP_TURNS, args.connections),
                    repeat=-1,
                    args=args,
                    ours_users=ours_users,
                    adk_sessions=adk_sessions,
                )
            for turns in args.turns:
                for repeat in range(args.repeats):
                    shift = repeat % len(servers)
                    for server in servers[shift:] + servers[:shift]:
                        print(
                            f"-- {server.side}, {processes} process(es), {turns} turns,"
                            f" run {repeat + 1}"
                        )
                        rows.append(
                            round_run(
                                server,
                                turns=turns,
                                repeat=repeat,
                                args=args,
                                ours_users=ours_users,
                                adk_sessions=adk_sessions,
                            )
                        )
                        row_print(rows[-1])
        finally:
            for server in servers:
                ws_load.server_stop(server.process)
        for server in servers:
            tracebacks = server.log.read_text().count("Traceback")
            server_errors[f"{server.side}, {processes} process(es)"] = tracebacks

    compared = ratios(rows)
    report = {
        "arguments": {
            key: str(value) if isinstance(value, Path) else value
            for key, value in vars(args).items()
        },
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_before": [round(value, 2) for value in load_before],
            "load_average_after": [round(value, 2) for value in os.getloadavg()],
            "open_file_limit": limit,
        },
        "channel_layer": channel_layer,
        "chunks": chunks,
        "adk": adk,
        "rounds": rows,
        "ratios": compared,
        "server_log_tracebacks": server_errors,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")

    print()
    print(f"{len(rows)} rounds; {args.connections} connections open; chunks {chunks}")
    for row in rows:
        row_print(row)
    print("ADK over ours (first token p50, turn p50, server processor time a turn):")
    for entry in compared:
        print(
            f"  {entry['side']:9} p={entry['processes']} turns={entry['turns']:<4}"
            f" run {entry['repeat'] + 1}: first token {entry['first_token_p50']}x,"
            f" turn {entry['turn_p50']}x, processor {entry['server_cpu_per_turn']}x"
        )
    print(f"tracebacks in the server logs: {server_errors}")
    print(f"load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"written to {args.output}; {plot_write(rows, args.plot)}")
    errors = sum(row["errors"] for row in rows) + sum(server_errors.values())
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
