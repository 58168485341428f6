"""Prometheus metrics, served at ``/metrics`` once ``METRICS_TOKEN`` is set.

Turn counts and latencies are counted by the web process that ran the turns,
so each web process is its own scrape target (sum over instances). Memory jobs
by status, queue depth and live workers are read from PostgreSQL and Redis at
scrape time: every instance reports the same deployment-wide figures (take
``max`` over instances, not ``sum``).

Without a token the endpoint answers 404, as if it did not exist; with one,
a scrape must send ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Iterator

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

import core.metrics  # noqa: F401  (registers the turn counters served here)
from core.heartbeat import workers_alive
from core.redis_clients import redis_client

logger = logging.getLogger(__name__)

# kombu's Redis transport keeps a queue's priorities 3, 6 and 9 in lists of their own.
REDIS_PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")


def _queue_depths() -> dict[str, int]:
    """Messages waiting in each Celery queue, or in the embedded mode's thread pool."""
    if settings.BACKGROUND_TASKS != "celery":
        from core.background import background_pending_count

        return {"inprocess": background_pending_count()}
    from chatapp.celery import app

    client = redis_client(settings.CELERY_BROKER_URL)
    depths = {}
    with client.pipeline(transaction=False) as pipeline:
        names = list(app.amqp.queues)
        for name in names:
            for suffix in REDIS_PRIORITY_SUFFIXES:
                pipeline.llen(name + suffix)
        lengths = pipeline.execute()
    for index, name in enumerate(names):
        per_priority = len(REDIS_PRIORITY_SUFFIXES)
        depths[name] = sum(lengths[index * per_priority : (index + 1) * per_priority])
    return depths


class DeploymentCollector(Collector):
    """Figures read at scrape time; one that cannot be read is left out and logged."""

    def describe(self) -> Iterator[Metric]:
        """The names, for registration, which would otherwise call ``collect`` at import."""
        for name in ("chatapp_memory_jobs", "chatapp_queue_depth", "chatapp_workers_alive"):
            yield GaugeMetricFamily(name, "")

    def collect(self) -> Iterator[Metric]:
        for read in (self._memory_jobs, self._queue_depth, self._workers):
            try:
                yield read()
            except Exception:
                logger.warning("metric %s could not be read", read.__name__, exc_info=True)

    @staticmethod
    def _memory_jobs() -> Metric:
        from memory_app.models import GenerationJob

        family = GaugeMetricFamily(
            "chatapp_memory_jobs",
            "Memory generation jobs in the database, by status.",
            labels=["status"],
        )
        counts = dict(
            GenerationJob.objects.order_by().values_list("status").annotate(count=Count("pk"))
        )
        for status in GenerationJob.Status.values:
            family.add_metric([status], counts.get(status, 0))
        return family

    @staticmethod
    def _queue_depth() -> Metric:
        family = GaugeMetricFamily(
            "chatapp_queue_depth",
            "Background tasks waiting for a worker, by queue (Celery broker queues, or "
            "'inprocess' for the embedded mode's thread pool).",
            labels=["queue"],
        )
        for queue, depth in _queue_depths().items():
            family.add_metric([queue], depth)
        return family

    @staticmethod
    def _workers() -> Metric:
        alive = len(workers_alive()) if settings.BACKGROUND_TASKS == "celery" else 1
        return GaugeMetricFamily(
            "chatapp_workers_alive",
            "Celery workers whose heartbeat is recent (1 in the embedded mode: this process).",
            value=alive,
        )


REGISTRY.register(DeploymentCollector())


def _authorized(request: HttpRequest) -> bool:
    expected = f"Bearer {settings.METRICS_TOKEN}"
    given = request.headers.get("Authorization", "")
    return hmac.compare_digest(given.encode(), expected.encode())


def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text format; 404 unless configured, 401 without the right token."""
    if not settings.METRICS_TOKEN:
        return HttpResponse("Not found: metrics are off (set METRICS_TOKEN).", status=404)
    if not _authorized(request):
        response = HttpResponse("A bearer token is needed.", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
