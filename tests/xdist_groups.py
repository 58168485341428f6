"""Keeps together, on one pytest-xdist worker, the tests that share an expensive start.

Loaded with ``-p tests.xdist_groups`` (pyproject's addopts). The multi-process suite's stack
(PostgreSQL, Redis, daphne, Celery) is one group, and each browser module (its Chromium, and
a server of its own where it has one) is another, but for a module that names its group
itself, for a server it shares with another. Everything else is handed out test by test
(``--dist loadgroup``).

pytest-xdist reads the groups in its own ``pytest_collection_modifyitems``, and a group added
after it has read them is silently ignored: so this hook runs first.
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("multiprocess") or "tests/multiprocess/" in item.nodeid:
            item.add_marker(pytest.mark.xdist_group("multiprocess"))
        elif item.get_closest_marker("browser") and not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
