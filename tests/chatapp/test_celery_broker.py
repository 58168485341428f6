"""The broker hands out again the tasks of a worker that was killed, whatever it was doing."""

import os

import pytest
from django.conf import settings
from kombu import Connection
from kombu.transport.redis import Mutex

REDIS_URL = os.environ.get("REDIS_URL", "")

pytestmark = pytest.mark.skipif(
    not REDIS_URL, reason="needs REDIS_URL; runs in CI's PostgreSQL + Redis pass"
)


def test_a_worker_killed_while_restoring_tasks_blocks_the_others_for_one_interval_at_most():
    """Workers restore unacknowledged tasks one at a time, under a lock in Redis; a worker killed
    holding it never releases it, so the lock's own expiry decides when the others may restore
    again (kombu's default, five minutes, would hold a killed worker's job that long)."""
    options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
    with Connection(REDIS_URL, transport_options=options) as connection:
        channel = connection.default_channel
        client = channel.client
        key = channel.unacked_mutex_key
        client.delete(key)
        try:
            with Mutex(client, key, channel.qos.unacked_mutex_expire):
                left_ms = client.pttl(key)
        finally:
            client.delete(key)

    assert 0 < left_ms <= options["unacked_restore_interval"] * 1000
    assert options["unacked_restore_interval"] < options["visibility_timeout"]
