"""Status, analytics and metrics routes.

Queue counters and gauges come from the database (the stats tables), so every process
answers the same. Two things are per process: the request-latency histogram (fed by
:func:`observe_request`, which the app's request path has to call) and the database-pool
gauges (labelled with the process id). With ``PROMETHEUS_MULTIPROC_DIR`` set in the
environment of every worker before it starts, prometheus-client's multiprocess mode merges
the histograms of all workers of a node into each answer.

GET /metrics/prometheus answers the text exposition format; its content type must be
``text/plain; version=0.0.4; charset=utf-8`` (:data:`PROMETHEUS_CONTENT_TYPE`).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from prometheus_client import CollectorRegistry, Histogram, generate_latest, multiprocess
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from reginamq import __version__
from reginamq.common.errors import BadRequest, Unavailable
from reginamq.common.times import stamp
from reginamq.engine import analytics
from reginamq.engine.broker import Broker
from reginamq.engine.names import check_queue_name
from reginamq.http import responses
from reginamq.http.request import Request
from reginamq.security.roles import ADMIN, READ_ONLY

PROMETHEUS_CONTENT_TYPE = CONTENT_TYPE_LATEST
MAX_PAGE = 1_000
MAX_ANALYTICS_POINTS = 10_000
MAX_PROCESS_METRICS_RANGE = timedelta(days=31)
MAX_HOSTNAME = 255

_LATENCY_REGISTRY = CollectorRegistry(auto_describe=True)
REQUEST_SECONDS = Histogram(
    "reginamq_request_duration_seconds", "HTTP request latency by route and status class",
    ["method", "route", "status"], registry=_LATENCY_REGISTRY,
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


def observe_request(method: str, route: str, status: int, seconds: float) -> None:
    """Record one request (``route`` is the route pattern, never the raw path)."""
    REQUEST_SECONDS.labels(method, route, f"{status // 100}xx").observe(seconds)


async def status(broker: Broker, request: Request) -> responses.Response:
    body = await analytics.status(broker.store)
    body["version"] = __version__
    return responses.json(200, body)


async def queues(broker: Broker, request: Request) -> responses.Response:
    limit = request.query_int("limit", 100, 1, MAX_PAGE)
    offset = request.query_int("offset", 0, 0, 2**31 - 1)
    return responses.json(200, await analytics.queues(broker.store, limit, offset))


async def queue(broker: Broker, request: Request) -> responses.Response:
    name = check_queue_name(request.path_params["queue"])
    body = await analytics.queue(broker.store, name)
    if body is None:
        return responses.error(404, f"queue {name!r} not found")
    return responses.json(200, body)


async def status_analytics(broker: Broker, request: Request) -> responses.Response:
    queue_name = request.query("queue")
    queue_name = check_queue_name(queue_name) if queue_name else None
    since, until = _time_range(request)
    interval = request.query_int("interval", 60, analytics.BUCKET_SECONDS, 86_400)
    if (until - since).total_seconds() / interval > MAX_ANALYTICS_POINTS:
        raise BadRequest(f"at most {MAX_ANALYTICS_POINTS} points: widen interval or narrow from/to")
    return responses.json(200, await analytics.analytics(broker.store, queue_name, since, until, interval))


def _time_range(request: Request) -> tuple[datetime, datetime]:
    """``from`` / ``to`` of the analytics routes: the last hour by default."""
    until = request.query_timestamp("to") or datetime.now(UTC)
    since = request.query_timestamp("from") or until - timedelta(hours=1)
    if since > until:
        raise BadRequest("from must not be after to")
    return since, until


def _process_filter(request: Request) -> tuple[datetime, datetime, str | None, int | None]:
    """The time range, hostname and workerId (a process id), as Queen's process analytics take them."""
    since, until = _time_range(request)
    if until - since > MAX_PROCESS_METRICS_RANGE:
        raise BadRequest(f"from and to may be at most {MAX_PROCESS_METRICS_RANGE.days} days apart")
    hostname = request.query("hostname") or None
    if hostname is not None and len(hostname) > MAX_HOSTNAME:
        raise BadRequest(f"hostname is longer than {MAX_HOSTNAME} characters")
    return since, until, hostname, request.query_int("workerId", None, 0, 2**31 - 1)


async def system_metrics(broker: Broker, request: Request) -> responses.Response:
    """Per process (a replica each), a point a minute: CPU, memory, database pool, event loop."""
    chosen = _process_filter(request)
    return 200, await analytics.system_metrics(broker.store, *chosen)


async def worker_metrics(broker: Broker, request: Request) -> responses.Response:
    """Throughput, pop lag and health of the processes, in buckets that widen with the range."""
    chosen = _process_filter(request)
    return 200, await analytics.worker_metrics(broker.store, *chosen)


async def refresh(broker: Broker, request: Request) -> responses.Response:
    count = await analytics.refresh(broker.store)
    return responses.json(200, {"success": True, "queues": count,
                                "refreshedAt": stamp(datetime.now(UTC))})


def _process(broker: Broker) -> dict:
    """This process's database pool, and the node's spool (pushes waiting for the database)."""
    sizes = broker.database.pool_sizes()
    return {"pid": os.getpid(), "pool": dict(zip(("size", "idle", "max"), sizes, strict=True)),
            "spool": {"waitingBytes": broker.spool.waiting_bytes(), "bufferedMessages": broker.spool.buffered}}


async def metrics_json(broker: Broker, request: Request) -> responses.Response:
    body = await analytics.snapshot(broker.store)
    body["process"] = _process(broker)
    body["version"] = __version__
    return responses.json(200, body)


class _Snapshot:
    """A one-shot collector: the database snapshot and this process's pool as metric families."""

    def __init__(self, snapshot: dict, process: dict):
        self._snapshot, self._process = snapshot, process

    def collect(self):
        up = GaugeMetricFamily("reginamq_database_up", "1 when this process reached PostgreSQL for this scrape")
        up.add_metric([], 0 if self._snapshot is None else 1)
        yield up
        yield from self._process_families()
        if self._snapshot is not None:
            yield from self._queue_families()
            yield from self._retention()

    def _queue_families(self):
        counters = {key: CounterMetricFamily(f"reginamq_messages_{name}", help_text, labels=["queue"])
                    for key, name, help_text in (
                        ("pushed", "pushed", "Messages pushed"),
                        ("popped", "popped", "Messages delivered for the first time"),
                        ("acked", "acked", "Messages consumed (acknowledged, dead-lettered or dropped)"),
                        ("failed", "failed", "Failed deliveries charged to the retry budget"),
                        ("deadLettered", "dead_lettered", "Messages moved to the dead-letter queue"),
                        ("expired", "expired", "Messages not delivered because they outlived the queue's ttl, "
                                               "counted once per reader"))}
        depth = GaugeMetricFamily("reginamq_queue_depth", "Messages the queue-mode reader has not consumed",
                                  labels=["queue"])
        lag = GaugeMetricFamily("reginamq_queue_lag", "Largest backlog of a consumer group, in messages",
                                labels=["queue"])
        dlq = GaugeMetricFamily("reginamq_dlq_depth", "Dead letters stored", labels=["queue"])
        partitions = GaugeMetricFamily("reginamq_queue_partitions", "Partitions", labels=["queue"])
        group_lag = GaugeMetricFamily("reginamq_consumer_group_lag", "Backlog of a consumer group, in messages",
                                      labels=["queue", "consumer_group"])
        for q in self._snapshot["queues"]:
            for key, family in counters.items():
                family.add_metric([q["queue"]], q["totals"][key])
            depth.add_metric([q["queue"]], q["depth"])
            lag.add_metric([q["queue"]], q["lag"])
            dlq.add_metric([q["queue"]], q["dlqDepth"])
            partitions.add_metric([q["queue"]], q["partitions"])
        for g in self._snapshot["groups"]:
            group_lag.add_metric([g["queue"], g["consumerGroup"]], g["backlog"])
        yield from counters.values()
        yield from (depth, lag, dlq, partitions, group_lag)

    def _process_families(self):
        pid = str(self._process["pid"])
        for key, help_text in (("size", "Open database connections"), ("idle", "Idle database connections"),
                               ("max", "Maximum database connections")):
            family = GaugeMetricFamily(f"reginamq_db_pool_{key}", f"{help_text} of this process",
                                       labels=["pid"])
            family.add_metric([pid], self._process["pool"][key])
            yield family
        spool = self._process["spool"]
        waiting = GaugeMetricFamily("reginamq_spool_waiting_bytes",
                                    "Bytes of pushes in the node's spool waiting for the database (0 normally)")
        waiting.add_metric([], spool["waitingBytes"])
        buffered = GaugeMetricFamily("reginamq_spool_buffered_messages",
                                     "Messages this process spooled that are not replayed yet", labels=["pid"])
        buffered.add_metric([pid], spool["bufferedMessages"])
        yield from (waiting, buffered)

    def _retention(self):
        """What retention deleted. ``evicted`` counts the messages some reader had not consumed
        (dropped by retentionSeconds or maxWaitTimeSeconds): the only trace of them."""
        for key, name, help_text in (
                ("deletedMessages", "deleted_messages", "Messages deleted by retention"),
                ("evictedMessages", "evicted_messages",
                 "Messages retention deleted before every reader had consumed them"),
                ("deletedSegments", "deleted_segments", "Segments deleted by retention"),
                ("deletedPartitions", "deleted_partitions", "Empty idle partitions deleted")):
            family = CounterMetricFamily(f"reginamq_retention_{name}", help_text, labels=["queue"])
            for entry in self._snapshot["retention"]:
                family.add_metric([entry["queue"]], entry[key])
            yield family


def _latency_registry():
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return registry
    return _LATENCY_REGISTRY


async def metrics_prometheus(broker: Broker, request: Request) -> responses.Response:
    """Answered even with the database away: then the queue families are left out and
    ``reginamq_database_up`` is 0, while the spool gauges say what waits on disk."""
    try:
        snapshot = await analytics.snapshot(broker.store)
    except Unavailable:
        snapshot = None
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(snapshot, _process(broker)))
    return responses.text(200, generate_latest(registry) + generate_latest(_latency_registry()),
                          PROMETHEUS_CONTENT_TYPE)


ROUTES: list = [
    ("GET", "/api/v1/status", status, READ_ONLY),
    ("GET", "/api/v1/status/queues", queues, READ_ONLY),
    ("GET", "/api/v1/status/queues/{queue}", queue, READ_ONLY),
    ("GET", "/api/v1/status/analytics", status_analytics, READ_ONLY),
    ("GET", "/api/v1/analytics/system-metrics", system_metrics, READ_ONLY),
    ("GET", "/api/v1/analytics/worker-metrics", worker_metrics, READ_ONLY),
    ("POST", "/api/v1/stats/refresh", refresh, ADMIN),
    ("GET", "/metrics", metrics_json, READ_ONLY),
    ("GET", "/metrics/prometheus", metrics_prometheus, READ_ONLY),
]
