"""One migrated database for the test databases and the servers the tests start.

Each worker's test database, and each server the tests start (the browser tests', the MCP
tests', the embedded web server's), would otherwise migrate a database of its own: a Django
start and every migration, seconds of processor time each for the same tables (15 s of wall
time on PostgreSQL while the suite runs). The first to need one migrates a template, under a
lock the pytest-xdist workers share (tests/built_once.py), and every other copies it: a file
copy on SQLite, ``CREATE DATABASE ... TEMPLATE`` on PostgreSQL (a tenth of a second).

A template is made for one state of the code and one configuration: its name is a digest of
every Python file of the app's packages (a changed migration, or code a migration imports, makes
a new one), the test servers' settings module, the lock files, and the variables the settings
read (docs/configuration.yml lists them all; tests/test_docs.py keeps it so) but for what is each
server's own (its database, folders, cache prefix, fake model server). Other variables (the
shell's, pytest's) reach no migration: a run from another shell, or without workers, copies the
same template. On PostgreSQL the template is a database of the server the run uses, named in a
file under build/ that says it was made; it goes when that file does (unused for a day).
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

import environ
import psycopg
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
    """What the template of ``env`` is named after: the code and the settings that shape it."""
    return digest_of(
        [
            *(path for package in PACKAGES for path in (ROOT / package).rglob("*.py")),
            ROOT / "tests" / "browser" / "server_settings.py",
            *(ROOT / "requirements").glob("*.txt"),
        ],
        settings=[
            f"{name}={_shared_part(name, env[name])}"
            for name in sorted(env)
            if name in _READ_BY_SETTINGS and name not in _OWN_TO_EACH_SERVER
        ],
    )


def _shared_part(name: str, value: str) -> str:
    """What of a setting's value the template depends on: not the Redis database, which is
    each pytest-xdist worker's own (tests/worker_isolation.py)."""
    if name == "REDIS_URL" and value:
        return urlsplit(value)._replace(path="").geturl()
    return value


def _migrate(*, env: Mapping[str, str], database_url: str) -> None:
    """Run every migration on ``database_url`` as ``manage.py migrate`` with ``env`` does."""
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--noinput", "-v", "0"],
        env={**env, "DATABASE_URL": database_url},
        cwd=ROOT,
        check=True,
    )


def sqlite_migrated(database: Path, *, env: Mapping[str, str]) -> None:
    """Put at ``database`` a fully migrated SQLite database, as ``manage.py migrate`` run with
    ``env`` would leave it."""

    def migrate(building: Path) -> None:
        _migrate(env=env, database_url=f"sqlite:///{building}")
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


TEMPLATE_DATABASE_PREFIX = "tpl_"


def postgresql_migrated(database_url: str, *, env: Mapping[str, str]) -> None:
    """Create the (absent) PostgreSQL database ``database_url`` names, fully migrated, as
    ``manage.py migrate`` run with ``env`` would leave it."""
    name = urlsplit(database_url).path.lstrip("/")
    template = postgresql_template(database_url, env=env)
    with postgresql_admin(database_url) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')


def postgresql_template(database_url: str, *, env: Mapping[str, str]) -> str:
    """The name of the migrated template database for ``env`` on ``database_url``'s server,
    made first when needed."""
    parts = urlsplit(database_url)
    digest = digest_of([], settings=[_template_name(env), f"{parts.hostname}:{parts.port}"])
    template = f"{TEMPLATE_DATABASE_PREFIX}{digest}"

    def migrate(building: Path) -> None:
        building.write_text(template)  # first, so that no other run prunes it meanwhile
        with postgresql_admin(database_url) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{template}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{template}"')
            _postgresql_templates_prune(admin)
        _migrate(env=env, database_url=parts._replace(path=f"/{template}").geturl())

    def gone(marker: Path) -> bool:
        with postgresql_admin(database_url) as admin:
            return not admin.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [template]
            ).fetchone()

    built_once(TEMPLATES / f"{template}.postgresql", migrate, stale=gone)
    return template


def _postgresql_templates_prune(admin: psycopg.Connection) -> None:
    """Drop the templates whose file under build/, made or being made, is gone
    (tests/built_once.py removes what has not been used for a day): made for a state of the
    code no run has had since."""
    names = admin.execute(
        "SELECT datname FROM pg_database WHERE starts_with(datname, %s)",
        [TEMPLATE_DATABASE_PREFIX],
    ).fetchall()
    for (name,) in names:
        marks = (TEMPLATES / f"{name}.postgresql", TEMPLATES / f"{name}.building.postgresql")
        if not any(mark.exists() for mark in marks):
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def postgresql_admin(database_url: str) -> Iterator[psycopg.Connection]:
    """A connection to the maintenance database of ``database_url``'s server."""
    params = environ.Env.db_url_config(database_url)
    with psycopg.connect(
        dbname="postgres",
        user=params.get("USER") or None,
        password=params.get("PASSWORD") or None,
        host=params.get("HOST") or None,
        port=params.get("PORT") or None,
        autocommit=True,
    ) as admin:
        yield admin
