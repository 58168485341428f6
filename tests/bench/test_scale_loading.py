"""The scale benchmark's fill (bench.scale.loading): over two connections it writes the first
blocks whose events reach the target, each once, whatever connection wrote them and wherever an
earlier run stopped, and every index dropped for the fill is back when it returns."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from django.db import connection

from bench.scale import fill, loading

pytestmark = pytest.mark.django_db(transaction=True)

BENCH_TABLES = (
    "bench_scale_progress",
    "bench_scale_blocks",
    "bench_scale_dropped_indexes",
    "bench_scale_texts",
    "bench_scale_facts",
)


@pytest.fixture
def writers(requires_postgres) -> Iterator[list[psycopg.Connection]]:
    """Two fill connections to the test database, with the text pools the fill draws from;
    the benchmark's own tables dropped after."""
    params = connection.settings_dict
    opened = [
        psycopg.connect(
            dbname=params["NAME"],
            user=params["USER"],
            password=params["PASSWORD"],
            host=params["HOST"],
            port=params["PORT"] or None,
        )
        for _ in range(2)
    ]
    with opened[0].cursor() as cursor:
        fill.pools_create(cursor)
        fill.Progress(cursor)
    opened[0].commit()
    for writer in opened:
        loading.fill_connection_prepare(writer)
    yield opened
    for writer in opened:
        writer.rollback()
        writer.close()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {', '.join(BENCH_TABLES)}")


def indexes() -> set[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
            " AND indexname NOT LIKE 'bench_scale%%'"
        )
        return set(cursor.fetchall())


def stored_blocks() -> dict[int, int]:
    """Events stored per block, counted from the users' sessions."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT u.username, count(e.id) FROM {fill.Tables.of_models().users} u"
            f" JOIN {fill.Tables.of_models().sessions} s ON s.user_id = u.id"
            f" JOIN {fill.Tables.of_models().events} e ON e.session_id = s.key"
            " WHERE u.username LIKE 'scale-u-%%' GROUP BY u.username"
        )
        return {int(name.removeprefix("scale-u-")): count for name, count in cursor.fetchall()}


def test_two_connections_write_the_planned_blocks_once_and_rebuild_every_index(writers):
    tables = fill.Tables.of_models()
    before = indexes()
    messages: list[str] = []

    events = loading.background_fill(
        writers, tables, target_events=3_000, fill_started=1.8e9, report=messages.append
    )

    expected = loading.blocks_planned(done={}, other_events=0, target_events=3_000)
    assert sorted(stored_blocks()) == expected
    assert stored_blocks() == {block: loading.block_events(block) for block in expected}
    assert events == sum(stored_blocks().values()) >= 3_000
    assert indexes() == before
    assert any("event_owner_words built" in message for message in messages)


def test_a_fill_stopped_midway_resumes_with_the_rest_and_its_indexes_back(writers):
    tables = fill.Tables.of_models()
    before = indexes()
    written: list[str] = []

    def stop_after_two_blocks(message: str) -> None:
        written.append(message)
        if len(written) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        loading.background_fill(
            writers, tables, target_events=6_000, fill_started=1.8e9, report=stop_after_two_blocks
        )
    for writer in writers:
        writer.rollback()
    assert (
        2
        <= len(stored_blocks())
        < len(loading.blocks_planned(done={}, other_events=0, target_events=6_000))
    )
    assert indexes() < before

    events = loading.background_fill(
        writers, tables, target_events=6_000, fill_started=1.8e9, report=lambda message: None
    )

    expected = loading.blocks_planned(done={}, other_events=0, target_events=6_000)
    assert stored_blocks() == {block: loading.block_events(block) for block in expected}
    assert events == sum(stored_blocks().values())
    assert indexes() == before
