"""Liveness and readiness probes.

``/healthz`` answers as long as the process serves requests and touches
nothing else, so an orchestrator restarts a process only when the process
itself is stuck. ``/readyz`` checks what this deployment depends on and lists
every check in its JSON body, with 503 when one fails:

* database: a round trip on this process's connection;
* redis: ``PING`` (channel layer and cache), when ``REDIS_URL`` is set;
* broker: a connection to the Celery broker, when tasks go to Celery;
* workers: at least one Celery worker heartbeat (``core.heartbeat``), when
  tasks go to Celery; in the embedded mode the in-process pool does the work;
* shutdown: failing, and listed only then, while the process drains its chat
  turns after SIGTERM (``core.shutdown``), so a load balancer sends new chats
  to another process.

With ``READYZ_REQUIRE_WORKERS=false`` a missing worker heartbeat is reported
but does not make the process unready, for load balancers that should keep
sending chats while memory workers are away.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse

from core.heartbeat import workers_alive
from core.redis_clients import PROBE_TIMEOUT_SECONDS, redis_client
from core.shutdown import draining

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")

logger = logging.getLogger(__name__)
_last_ready: bool | None = None


class CheckFailed(Exception):
    """A dependency is not usable; the message says why, for the probe's body."""


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception:
        # A connection broken by a database restart would fail every later probe too.
        connection.close()
        raise
    return connection.vendor


def _redis() -> str:
    redis_client(settings.REDIS_URL).ping()
    return "PING answered"


def _broker() -> str:
    url = settings.CELERY_BROKER_URL
    if url.startswith(REDIS_SCHEMES):
        redis_client(url).ping()
        return "PING answered"
    from chatapp.celery import app

    with app.connection_for_write() as broker:
        broker.ensure_connection(max_retries=1, timeout=PROBE_TIMEOUT_SECONDS)
    return "connected"


def _workers() -> str:
    alive = workers_alive()
    if not alive:
        raise CheckFailed(
            "no Celery worker heartbeat in the last "
            f"{settings.WORKER_HEARTBEAT_INTERVAL_SECONDS * 3:g} s"
        )
    return f"{len(alive)} alive: {', '.join(alive)}"


def _shutting_down() -> str:
    raise CheckFailed("this process is shutting down: it finishes its turns and takes no new ones")


def _in_process_workers() -> str:
    return "background work runs on this process's thread pool (embedded mode)"


def readiness_checks() -> dict[str, tuple[Callable[[], str], bool]]:
    """The checks that apply to these settings: name -> (check, whether failing makes unready)."""
    checks: dict[str, tuple[Callable[[], str], bool]] = {"database": (_database, True)}
    if settings.REDIS_URL:
        checks["redis"] = (_redis, True)
    if settings.BACKGROUND_TASKS == "celery":
        checks["broker"] = (_broker, True)
        checks["workers"] = (_workers, settings.READYZ_REQUIRE_WORKERS)
    else:
        checks["workers"] = (_in_process_workers, True)
    if draining():
        checks["shutdown"] = (_shutting_down, True)
    return checks


def readiness_report() -> tuple[bool, dict[str, dict[str, Any]]]:
    """Run every applicable check; whether the process is ready, and each check's result."""
    results: dict[str, dict[str, Any]] = {}
    ready = True
    for name, (check, required) in readiness_checks().items():
        started = time.perf_counter()
        try:
            detail = check()
            ok = True
        except Exception as error:
            detail = str(error) or type(error).__name__
            if not isinstance(error, CheckFailed):
                detail = f"{type(error).__name__}: {detail}"
            ok = False
        results[name] = {
            "ok": ok,
            "required": required,
            "detail": detail,
            "duration_ms": round((time.perf_counter() - started) * 1000, 2),
        }
        ready = ready and (ok or not required)
    return ready, results


def healthz(request: HttpRequest) -> JsonResponse:
    """200 while the process serves requests; checks nothing else."""
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> JsonResponse:
    """200 with every check when the process can do its work, else 503 with the same body."""
    ready, checks = readiness_report()
    _log_change(ready, checks)
    response = JsonResponse(
        {"status": "ready" if ready else "not_ready", "checks": checks},
        status=200 if ready else 503,
    )
    # Probes come every few seconds: Django's error line for each 503 would bury the
    # one line that matters, which _log_change writes when readiness changes.
    response._has_been_logged = True
    return response


def _log_change(ready: bool, checks: dict[str, dict[str, Any]]) -> None:
    global _last_ready
    if ready == _last_ready:
        return
    failing = "; ".join(
        f"{name}: {check['detail']}" for name, check in checks.items() if not check["ok"]
    )
    if ready:
        logger.info("ready%s", f" (not required: {failing})" if failing else "")
    else:
        logger.warning("not ready: %s", failing)
    _last_ready = ready
