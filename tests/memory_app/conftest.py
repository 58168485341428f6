"""Fixtures of the memory tests."""

import pytest

from memory_app.services import jobs as job_services
from tests.memory_app.support import APP


@pytest.fixture
def enqueued(monkeypatch):
    """Job ids sent to the task queue (the task itself does not run)."""
    sent = []
    monkeypatch.setattr(job_services, "task_enqueue", lambda *, task, **kwargs: sent.append(kwargs))
    return sent


@pytest.fixture
def triggers(settings):
    def configure(**config):
        settings.MEMORY_TRIGGERS = {APP: config}

    return configure
