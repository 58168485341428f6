"""ADK's RemoteSessionService on our server, over HTTP, against ADK's DatabaseSessionService.

    python -m bench.remote_sessions                  # the full run (docs/benchmarks.md)
    python -m bench.remote_sessions --events 200 --repeat 20

The question an ADK developer asks: is keeping sessions on this server, over
HTTP, at least as fast as ADK's own database service in-process? Both on the
same PostgreSQL, in the same run. Drops and recreates a dedicated database,
migrates ours there, creates the app's API key as a script does
(``app_key_create``) and starts one daphne process on it, as production runs
it: with a Redis of its own (a ``redis-server`` on a free port, as the
multi-process tests start one) as cache, throttle counter and Celery broker,
and no worker, so the memory jobs a reply triggers are queued but never run in
the measured process (production runs them in workers). Then three sides
take turns in small steps, so all run under the same load on the machine:

- **remote**: ``agent_memory_client.adk.RemoteSessionService`` in google-adk's
  environment (``bench.adk_side --remote-url``), talking to daphne;
- **ADK**: ``DatabaseSessionService`` in the same environment, its tables in the
  same database (``bench.adk_side --db-url``, asyncpg);
- **store**: our session store called in this process (``bench.ours_side``), the
  server's share of the remote figures without HTTP;
- **in-process**: the service API through the ASGI application called in this
  process (``bench.asgi_side``, the daphne's settings and Redis): the server's
  whole share, without daphne, the socket or the client's HTTP library.

Figures: append_event (with a state delta) and get_session of the last 20 of
``--events`` events, p50/p95 for each side and the ratio ADK / remote. Where
the remote time goes, at p50: the client's own work (encoding the event,
decoding answers into ADK's objects), what going over HTTP adds (the remote
call less the in-process one), Django's handler (``/healthz`` in process), the
API (the in-process call less the handler and the store) and the store.
Printed and written to build/bench-remote-sessions.json; never asserted.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import tempfile
from pathlib import Path

from bench.sessions import (
    LocalSide,
    RemoteSide,
    Run,
    django_on_new_database,
    results_of,
    results_write,
)
from bench.workload import APP_NAME, summary
from tests.multiprocess.stack import Daphne, RedisServer

BASE_DIR = Path(__file__).resolve().parent.parent
RESULTS_PATH = BASE_DIR / "build" / "bench-remote-sessions.json"
DAPHNE_LOG = BASE_DIR / "build" / "bench-remote-sessions-daphne.log"
FIGURES = (
    ("append_event", "append_event, with a state delta"),
    ("get_session_recent20", "get_session, last 20 events"),
)


def arguments_parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=2000, help="events appended to one session")
    parser.add_argument("--repeat", type=int, default=200, help="reads of the last 20 events")
    parser.add_argument("--floor-repeat", type=int, default=300, help="requests of /healthz")
    parser.add_argument(
        "--server", default="postgres://postgres@127.0.0.1:5432", help="PostgreSQL, no database"
    )
    parser.add_argument("--database", default="bench_remote_sessions", help="dropped and recreated")
    return parser.parse_args(argv)


def daphne_start(*, database_url: str, redis_url: str, folder: Path) -> Daphne:
    """One daphne process on the benchmark database, production's settings and arguments but
    for TLS and the proxy headers.

    Background work goes to the Celery broker (``redis_url``) and no worker takes it: a
    reply's memory trigger is checked and its job queued, as on production's web processes,
    and the job never runs in the measured process.
    """
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.lower().endswith("_proxy") and key not in {"DATABASE_URL", "REDIS_URL"}
    }
    environment.update(
        {
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "BACKGROUND_TASKS": "celery",
            "DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "PYTHONPATH": str(BASE_DIR),
            "DJANGO_SETTINGS_MODULE": "chatapp.settings",
        }
    )
    # As the Dockerfile runs it: the application writes the access log, daphne writes none.
    return (
        Daphne("bench-daphne", environment, folder, arguments=["--verbosity", "0"])
        .start()
        .wait_ready()
    )


def report_print(results: dict) -> None:
    figures = results["figures"]
    remote, adk, store = figures["remote"], figures["ADK"], figures["store"]
    header = (
        f"{'figure':<34} {'n':>5} {'remote p50':>10} {'remote p95':>10} {'ADK p50':>8} "
        f"{'ADK p95':>8} {'ratio50':>8} {'ratio95':>8}"
    )
    events = results["arguments"]["events"]
    print(f"\n{events} events in one session; milliseconds; ratio = ADK / remote")
    print(header)
    print("-" * len(header))
    for name, label in FIGURES:
        mine, theirs = remote[name], adk[name]
        print(
            f"{label:<34} {mine['n']:>5} {mine['p50_ms']:10.2f} {mine['p95_ms']:10.2f} "
            f"{theirs['p50_ms']:8.2f} {theirs['p95_ms']:8.2f} "
            f"{theirs['p50_ms'] / mine['p50_ms']:7.2f}x {theirs['p95_ms'] / mine['p95_ms']:7.2f}x"
        )
    breakdown = results["breakdown"]
    floor, handler = breakdown["http_floor"]["p50_ms"], breakdown["in_process_floor"]["p50_ms"]
    print(
        f"\nWhere the remote time goes, p50 (ms). /healthz over HTTP {floor:.2f}, in process "
        f"{handler:.2f}.\nover HTTP = the remote call less the same call in process (daphne, "
        "the client's HTTP library, the switches between processes); handler = Django's "
        "handler and middleware (/healthz in process); API = the rest of the call in process "
        "(key, rate limit, DRF, the view, the memory trigger) less the store's own time."
    )
    for name, label, client_parts in (
        ("append_event", "append_event", ("encode_event", "decode_append")),
        ("get_session_recent20", "get_session, last 20", ("decode_read",)),
    ):
        total = remote[name]["p50_ms"]
        client = sum(breakdown[part]["p50_ms"] for part in client_parts)
        in_process = figures["in-process"][name]["p50_ms"]
        stored = store[name]["p50_ms"]
        print(
            f"  {label:<22} total {total:6.2f} = client {client:5.2f} + over HTTP "
            f"{total - client - in_process:5.2f} + handler {handler:5.2f} + API "
            f"{in_process - handler - stored:5.2f} + store {stored:5.2f}"
        )


def main(argv: list[str] | None = None) -> None:
    args = arguments_parse(argv)
    load_before = os.getloadavg()
    folder = Path(tempfile.mkdtemp(prefix="bench-remote-sessions-"))
    redis = RedisServer(folder)
    redis.start()
    # This process calls the application too (the in-process side), with the daphne's Redis.
    os.environ.update(REDIS_URL=redis.url, BACKGROUND_TASKS="celery")
    django_url, adk_url = django_on_new_database(server=args.server, database=args.database)
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from bench.asgi_side import AsgiSide
    from bench.ours_side import OursSide

    printed = io.StringIO()
    call_command("app_key_create", "--app", APP_NAME, stdout=printed)
    api_key = printed.getvalue().strip().splitlines()[-1].strip()
    users = get_user_model().objects
    store_events_user, store_list_user = (
        str(users.create_user(username=f"bench-{name}").pk) for name in ("events", "list")
    )
    daphne = None
    try:
        daphne = daphne_start(database_url=django_url, redis_url=redis.url, folder=folder)
        sides = [
            RemoteSide(
                name="remote",
                arguments=[f"--remote-url={daphne.base_url}", f"--api-key={api_key}"],
            ),
            RemoteSide(name="ADK", arguments=[f"--db-url={adk_url}"]),
        ]
        store = LocalSide(OursSide(page_size=20))
        store.name = "store"
        in_process = LocalSide(AsgiSide(api_key=api_key))
        in_process.name = "in-process"
        run = Run([*sides, store, in_process])
        versions = {
            side.name: side.call(
                "setup", events_user="bench-events", list_user="bench-list", events=args.events
            )
            for side in sides
        }
        store.call(
            "setup", events_user=store_events_user, list_user=store_list_user, events=args.events
        )
        in_process.call("setup", events=args.events)
        run.turns(
            "append_event",
            total=args.events,
            block=50,
            call=lambda side, start, stop: side.call("append", start=start, stop=stop),
        )
        run.say("ANALYZE")
        for side in [*sides, store]:
            side.call("analyze")
        run.warm_up("get_session", recent=20, repeat=3, expected=min(20, args.events))
        run.turns(
            "get_session_recent20",
            total=args.repeat,
            block=10,
            call=lambda side, start, stop: side.call(
                "get_session", recent=20, repeat=stop - start, expected=min(20, args.events)
            ),
        )
        remote = sides[0]
        run.say(f"HTTP floor: {args.floor_repeat} requests of /healthz; the client's own costs")
        breakdown = {
            "http_floor": summary(remote.call("http_floor", repeat=args.floor_repeat)),
            "in_process_floor": summary(in_process.call("http_floor", repeat=args.floor_repeat)),
        }
        costs = remote.call("client_costs", repeat=args.repeat, recent=20)
        breakdown.update({part: summary(samples) for part, samples in costs.items()})
        for side in [*sides, store, in_process]:
            side.close()
    finally:
        if daphne is not None:
            daphne.stop()
            shutil.copyfile(daphne.log_path, DAPHNE_LOG)
        redis.stop()
        shutil.rmtree(folder, ignore_errors=True)

    results = results_of(
        run=run, args=args, versions=versions, load_before=load_before, breakdown=breakdown
    )
    results_write(results, path=RESULTS_PATH)
    print(f"versions: {versions['remote']}")
    report_print(results)
    print(f"\nFigures written to {RESULTS_PATH.relative_to(BASE_DIR)}.")


if __name__ == "__main__":
    main()
