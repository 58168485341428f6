"""One migrated SQLite database for the servers the tests start on the embedded default.

Each such server (the browser tests', the MCP tests', the embedded web server's) would otherwise
migrate a database of its own: a Django start and every migration, seconds of processor time a
server for the same tables each time. The first server of a kind migrates a template, under a
lock the pytest-xdist workers share, and every server copies it.

A template is made for one state of the code and one environment: its name is a digest of every
Python file of the app's packages (a changed migration, or code a migration imports, makes a new
one), the lock files, and the environment but for what is each server's own (its database,
folders, cache prefix) and pytest's per-test variables. Templates a day old are removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "build" / "test-templates"
PACKAGES = ("chatapp", "agents_app", "memory_app", "sessions_app", "access_app", "core")
_OWN_TO_EACH_SERVER = {"DATABASE_URL", "CACHE_KEY_PREFIX", "STATIC_ROOT", "ARTIFACTS_DIR"}
_KEPT_SECONDS = 24 * 3600


def _code_digest() -> str:
    digest = hashlib.sha256()
    sources = sorted(
        [
            *(path for package in PACKAGES for path in (ROOT / package).rglob("*.py")),
            *(ROOT / "requirements").glob("*.txt"),
        ]
    )
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _template_name(env: Mapping[str, str]) -> str:
    digest = hashlib.sha256(_code_digest().encode())
    for name in sorted(env):
        if name not in _OWN_TO_EACH_SERVER and not name.startswith("PYTEST_"):
            digest.update(f"{name}={env[name]}\0".encode())
    return digest.hexdigest()[:24]


def _prune() -> None:
    for path in TEMPLATES.iterdir():
        if time.time() - path.stat().st_mtime > _KEPT_SECONDS:
            path.unlink(missing_ok=True)


def sqlite_migrated(database: Path, *, env: Mapping[str, str]) -> None:
    """Put at ``database`` a fully migrated SQLite database, as ``manage.py migrate`` run with
    ``env`` would leave it."""
    TEMPLATES.mkdir(parents=True, exist_ok=True)
    name = _template_name(env)
    template = TEMPLATES / f"{name}.sqlite3"
    with (TEMPLATES / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            _prune()
            building = TEMPLATES / f"{name}.building.sqlite3"
            building.unlink(missing_ok=True)
            subprocess.run(
                [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"],
                env={**env, "DATABASE_URL": f"sqlite:///{building}"},
                cwd=ROOT,
                check=True,
            )
            _self_contained(building)
            os.replace(building, template)
        template.touch()
    for leftover in (f"{database}-wal", f"{database}-shm"):
        # A write-ahead log left by an earlier database of this name would be read as this one's.
        Path(leftover).unlink(missing_ok=True)
    shutil.copyfile(template, database)


def _self_contained(database: Path) -> None:
    """Fold the write-ahead log into the file (the app opens SQLite in WAL mode), so that a
    copy of the file alone is the whole database."""
    with contextlib.closing(sqlite3.connect(database)) as connection:
        connection.execute("PRAGMA journal_mode=DELETE")
