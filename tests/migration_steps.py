"""Moving the test database to a state of its migrations and back, for the tests of a data
migration: rows are written as the migration finds them, then the migration runs."""

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from core.background import background_wait_idle


def migrated_to(targets: list[tuple[str, str]]) -> Apps:
    """Migrate (backwards) to ``targets``; the models as they were there. Background work an
    earlier test left running ends first: it would meet tables this drops."""
    background_wait_idle()
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def migrated_to_latest() -> None:
    """Migrate forwards to the latest migration of every app."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
