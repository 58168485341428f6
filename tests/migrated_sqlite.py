"""One migrated SQLite database for the servers the tests start on the embedded default.

Each such server (the browser tests', the MCP tests', the embedded web server's) would otherwise
migrate a database of its own: a Django start and every migration, seconds of processor time a
server for the same tables each time. The first server of a kind migrates a template, under a
lock the pytest-xdist workers share (tests/built_once.py), and every server copies it.

A template is made for one state of the code and one configuration: its name is a digest of
every Python file of the app's packages (a changed migration, or code a migration imports, makes
a new one), the test servers' settings module, the lock files, and the variables the settings
read (docs/configuration.yml lists them all; tests/test_docs.py keeps it so) but for what is each
server's own (its database, folders, cache prefix, fake model server). Other variables (the
shell's, pytest's) reach no migration: a run from another shell, or without workers, copies the
same template.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import yaml

from tests.built_once import ROOT, built_once, digest_of

TEMPLATES = ROOT / "build" / "test-templates"
PACKAGES = ("chatapp", "agents_app", "memory_app", "sessions_app", "access_app", "core")
_OWN_TO_EACH_SERVER = {
    "DATABASE_URL",
    "CACHE_KEY_PREFIX",
    "STATIC_ROOT",
    "ARTIFACTS_DIR",
    "OPENAI_BASE_URL",  # a fake model server's, on a new port every run
}
_READ_BY_SETTINGS = {
    "DJANGO_SETTINGS_MODULE",
    *yaml.safe_load((ROOT / "docs" / "configuration.yml").read_text()),
}


def _template_name(env: Mapping[str, str]) -> str:
    return digest_of(
        [
            *(path for package in PACKAGES for path in (ROOT / package).rglob("*.py")),
            ROOT / "tests" / "browser" / "server_settings.py",
            *(ROOT / "requirements").glob("*.txt"),
        ],
        settings=[
            f"{name}={env[name]}"
            for name in sorted(env)
            if name in _READ_BY_SETTINGS and name not in _OWN_TO_EACH_SERVER
        ],
    )


def sqlite_migrated(database: Path, *, env: Mapping[str, str]) -> None:
    """Put at ``database`` a fully migrated SQLite database, as ``manage.py migrate`` run with
    ``env`` would leave it."""

    def migrate(building: Path) -> None:
        subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"],
            env={**env, "DATABASE_URL": f"sqlite:///{building}"},
            cwd=ROOT,
            check=True,
        )
        _self_contained(building)

    template = built_once(TEMPLATES / f"{_template_name(env)}.sqlite3", migrate)
    for leftover in (f"{database}-wal", f"{database}-shm"):
        # A write-ahead log left by an earlier database of this name would be read as this one's.
        Path(leftover).unlink(missing_ok=True)
    shutil.copyfile(template, database)


def _self_contained(database: Path) -> None:
    """Fold the write-ahead log into the file (the app opens SQLite in WAL mode), so that a
    copy of the file alone is the whole database."""
    with contextlib.closing(sqlite3.connect(database)) as connection:
        connection.execute("PRAGMA journal_mode=DELETE")
