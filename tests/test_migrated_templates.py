"""The migrated templates the test databases and the test servers copy
(tests/migrated_templates.py, on tests/built_once.py)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from django.conf import settings
from django.db.migrations.loader import MigrationLoader

from tests.built_once import built_once
from tests.migrated_templates import (
    postgresql_admin,
    postgresql_migrated,
    postgresql_template,
    sqlite_migrated,
)


def _migrations_on_disk() -> set[tuple[str, str]]:
    return set(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)


@contextlib.contextmanager
def _new_database_urls(count: int) -> Iterator[list[str]]:
    """URLs of databases not made yet on the suite's PostgreSQL server, dropped afterwards."""
    server = os.environ["DATABASE_URL"]
    names = [f"migrated_{uuid.uuid4().hex[:10]}" for _ in range(count)]
    try:
        yield [urlsplit(server)._replace(path=f"/{name}").geturl() for name in names]
    finally:
        with postgresql_admin(server) as admin:
            for name in names:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.skipif(not settings.USING_SQLITE, reason="the embedded default's own template")
def test_a_sqlite_copy_has_every_migration_applied(tmp_path: Path):
    database = tmp_path / "copy.sqlite3"

    sqlite_migrated(database, env=os.environ)

    with contextlib.closing(sqlite3.connect(database)) as connection:
        applied = set(connection.execute("SELECT app, name FROM django_migrations").fetchall())
    assert applied == _migrations_on_disk()


@pytest.mark.skipif(settings.USING_SQLITE, reason="needs PostgreSQL; runs in CI's PostgreSQL pass")
def test_postgresql_copies_have_every_migration_applied_whatever_the_workers_redis_database():
    with _new_database_urls(2) as (first, second):
        first_env = {**os.environ, "REDIS_URL": "redis://127.0.0.1:6379/7"}
        second_env = {**os.environ, "REDIS_URL": "redis://127.0.0.1:6379/8"}

        postgresql_migrated(first, env=first_env)
        postgresql_migrated(second, env=second_env)

        for url in (first, second):
            with psycopg.connect(url) as connection:
                applied = connection.execute("SELECT app, name FROM django_migrations")
                assert set(applied.fetchall()) == _migrations_on_disk()
        assert postgresql_template(first, env=first_env) == postgresql_template(
            second, env=second_env
        )


def test_what_is_built_once_is_built_again_when_what_it_stands_for_is_gone(tmp_path: Path):
    builds = []

    def build(scratch: Path) -> None:
        builds.append(scratch)
        scratch.write_text("made")

    target = tmp_path / "thing.marker"
    built_once(target, build, stale=lambda _target: False)
    built_once(target, build, stale=lambda _target: False)
    assert len(builds) == 1

    built_once(target, build, stale=lambda _target: True)

    assert len(builds) == 2
    assert target.read_text() == "made"
