"""Gives each pytest-xdist worker resources of its own before Django reads its settings.

Loaded with ``-p tests.worker_isolation`` (pyproject's addopts) because Django's settings are
read while pytest starts, before any conftest: a worker's Redis database, cache and channel
layer prefix must be in the environment by then. The test databases need nothing here:
pytest-django already gives each worker its own (``test_chatapp_gw0``). Outside xdist, or in
the main process that hands tests out, those stay as they are.

Every process of a run, and every server the tests start, reads the same static files folder,
collected once for the code as it is (tests/collected_static.py).
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from tests.collected_static import static_root


def _worker_number() -> int | None:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker.removeprefix("gw")) if worker.startswith("gw") else None


def _redis_url_of_worker(url: str, number: int) -> str:
    """The same Redis server, another of its 16 databases: keys, channel layer groups and
    queues of one worker are never seen by another (two workers' tests both have a user 1)."""
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    return parts._replace(path=f"/{(base + 1 + number) % 16}").geturl()


number = _worker_number()
if number is not None:
    if os.environ.get("REDIS_URL"):
        os.environ["REDIS_URL"] = _redis_url_of_worker(os.environ["REDIS_URL"], number)
    os.environ.setdefault("CACHE_KEY_PREFIX", f"chatapp-test-gw{number}")
os.environ["STATIC_ROOT"] = str(static_root(os.environ))
