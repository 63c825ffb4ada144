"""Statistics: status, analytics and metrics from the stats tables (012_stats.sql), and
Queen's process analytics from the processes' own rows (013_process_metrics.sql).

Counters and gauges are derived from the tables by a refresh (the elected stats loop every
``--maintenance-interval`` seconds, or POST /api/v1/stats/refresh), so they are the same
whichever worker process or node answers. Only the request-latency histogram and the
database-pool gauges are per process (see :mod:`reginamq.http.analytics`).
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime, timedelta

import orjson

from reginamq.common.errors import Unavailable
from reginamq.common.times import stamp
from reginamq.store import Store

BUCKET_SECONDS = 10
KEEP_SECONDS = 24 * 3600
THROUGHPUT_WINDOW_SECONDS = 60
COUNTERS = ("pushed", "popped", "acked", "failed", "deadLettered")
_COLUMNS = {"pushed": "pushed", "popped": "popped", "acked": "acked", "failed": "failed",
            "deadLettered": "dead_lettered"}
STARTED = time.time()


async def refresh(store: Store, full: bool = True) -> int:
    """One refresh into ``BUCKET_SECONDS`` buckets kept ``KEEP_SECONDS``; returns the number of
    queues. A full pass (what an explicit refresh asks for) also recounts the gauges over every
    partition, which costs time with the partitions; an incremental one costs what moved since
    the last refresh (see 012_stats.sql and :meth:`Statistics.refresh
    <reginamq.store.statistics.Statistics.refresh>`)."""
    return await store.statistics.refresh(BUCKET_SECONDS, KEEP_SECONDS, full)


async def last_full_pass(store: Store) -> tuple[float | None, float | None]:
    """Seconds since the last full pass started and how long it took (None, None before any)."""
    row = await store.statistics.last_full_pass()
    return (None, None) if row is None else (row["since"], row["full_seconds"])


def _queue(row) -> dict:
    return {
        "queue": row["queue_name"], "namespace": row["namespace"], "task": row["task"],
        "partitions": row["partitions"],
        # expired: skipped at delivery for outliving the ttl, summed over the queue's readers
        "totals": {**{key: row[column] for key, column in _COLUMNS.items()}, "expired": row["expired"]},
        "depth": row["depth"], "lag": row["lag"], "dlqDepth": row["dlq_depth"],
        "refreshedAt": stamp(row["refreshed_at"]),
    }


def _point(row) -> dict:
    return {"at": stamp(row["bucket"]), **{key: row[column] for key, column in _COLUMNS.items()},
            "depth": row["depth"], "lag": row["lag"], "dlqDepth": row["dlq_depth"]}


def _rates(rows, seconds: int) -> dict:
    sums = dict.fromkeys(COUNTERS, 0)
    for row in rows:
        for key, column in _COLUMNS.items():
            sums[key] += row[column]
    return {f"{key}PerSecond": round(value / seconds, 3) for key, value in sums.items()}


async def _recent(store: Store, queue: str | None):
    now = datetime.now(UTC)
    return await store.statistics.series(queue, now - timedelta(seconds=THROUGHPUT_WINDOW_SECONDS), now,
                                         THROUGHPUT_WINDOW_SECONDS * 10)


async def status(store: Store) -> dict:
    queues = await store.statistics.queues(None)
    recent = await _recent(store, None)
    refreshed = await store.statistics.refreshed_at()
    totals = dict.fromkeys(COUNTERS, 0)
    partitions = sum(r["partitions"] for r in queues)
    for row in queues:
        for key, column in _COLUMNS.items():
            totals[key] += row[column]
    return {
        "status": "healthy", "database": "connected",
        "uptimeSeconds": round(time.time() - STARTED, 1), "pid": os.getpid(),
        "queues": len(queues), "partitions": partitions,
        "totals": totals,
        "depth": sum(r["depth"] for r in queues), "lag": max((r["lag"] for r in queues), default=0),
        "dlqDepth": sum(r["dlq_depth"] for r in queues),
        "throughput": {"windowSeconds": THROUGHPUT_WINDOW_SECONDS, **_rates(recent, THROUGHPUT_WINDOW_SECONDS)},
        "statsRefreshedAt": stamp(refreshed),
        "databases": await _databases(store, partitions),
    }


async def _databases(store: Store, partitions: int) -> list[dict]:
    """Each member database of the deployment (docs/shards.md) as status shows it; one database
    holds all ``partitions``. A member that does not answer is shown unhealthy."""
    members = store.member_stores()
    if len(members) == 1:
        return [{**await members[0].membership.report(), "healthy": True, "partitions": partitions}]

    async def member(ordinal: int, member_store: Store) -> dict:
        try:
            held = sum(row["partitions"] for row in await member_store.statistics.queues(None))
            return {**await member_store.membership.report(), "healthy": True, "partitions": held}
        except Unavailable:
            return {"id": None, "ordinal": ordinal, "catalog": ordinal == 0, "sizeBytes": None,
                    "connections": None, "transactionsCommitted": None, "healthy": False, "partitions": None}

    return list(await asyncio.gather(*(member(ordinal, each) for ordinal, each in enumerate(members))))


async def queues(store: Store, limit: int, offset: int) -> dict:
    rows = await store.statistics.queues(None)
    recent = await _recent(store, None)
    per_queue: dict[str, list] = {}
    for row in recent:
        per_queue.setdefault(row["queue_name"], []).append(row)
    out = []
    for row in rows[offset:offset + limit]:
        entry = _queue(row)
        entry["throughput"] = _rates(per_queue.get(row["queue_name"], []), THROUGHPUT_WINDOW_SECONDS)
        out.append(entry)
    return {"queues": out, "total": len(rows), "limit": limit, "offset": offset}


async def queue(store: Store, name: str) -> dict | None:
    rows = await store.statistics.queues(name)
    if not rows:
        return None
    options = await store.queues.options(name)
    if options is None:  # deleted since the line above
        return None
    entry = _queue(rows[0])
    entry["options"] = orjson.loads(options)
    recent = await _recent(store, name)
    entry["throughput"] = {"windowSeconds": THROUGHPUT_WINDOW_SECONDS, **_rates(recent, THROUGHPUT_WINDOW_SECONDS)}
    entry["consumerGroups"] = [{"consumerGroup": g["consumer_group"], "backlog": g["backlog"],
                                "partitionsBehind": g["partitions_behind"]}
                               for g in await store.statistics.groups(name)]
    now = datetime.now(UTC)
    series = await store.statistics.series(name, now - timedelta(hours=1), now, 60)
    entry["series"] = {"intervalSeconds": 60, "points": [_point(r) for r in series]}
    return entry


async def analytics(store: Store, queue_name: str | None, since: datetime, until: datetime, interval: int) -> dict:
    rows = await store.statistics.series(queue_name, since, until, interval)
    per_queue: dict[str, list] = {}
    overall: dict[datetime, dict] = {}
    for row in rows:
        per_queue.setdefault(row["queue_name"], []).append(_point(row))
        point = overall.setdefault(row["bucket"], {"at": stamp(row["bucket"]), **dict.fromkeys(COUNTERS, 0),
                                                   "depth": 0, "lag": 0, "dlqDepth": 0})
        for key, column in _COLUMNS.items():
            point[key] += row[column]
        point["depth"] += row["depth"]
        point["lag"] = max(point["lag"], row["lag"])
        point["dlqDepth"] += row["dlq_depth"]
    return {
        "from": stamp(since), "to": stamp(until), "intervalSeconds": interval,
        "queue": queue_name,
        "throughput": [overall[k] for k in sorted(overall)],
        "queues": [{"queue": name, "points": points} for name, points in sorted(per_queue.items())],
    }


async def snapshot(store: Store) -> dict:
    """Everything /metrics and /metrics/prometheus expose from the database."""
    return {
        "queues": [_queue(r) for r in await store.statistics.queues(None)],
        "groups": [{"queue": g["queue_name"], "consumerGroup": g["consumer_group"], "backlog": g["backlog"],
                    "partitionsBehind": g["partitions_behind"]} for g in await store.statistics.groups(None)],
        "retention": [{"queue": r["queue_name"], "deletedSegments": r["segments"], "deletedMessages": r["messages"],
                       "evictedMessages": r["evicted"], "deletedPartitions": r["partitions"]}
                      for r in await store.statistics.retention_totals()],
        "statsRefreshedAt": stamp(await store.statistics.refreshed_at()),
    }


async def system_metrics(store: Store, since: datetime, until: datetime, hostname: str | None,
                         pid: int | None) -> bytes:
    """Queen's system-metrics answer over the processes' rows, rendered by PostgreSQL."""
    return (await store.process_metrics.system(since, until, hostname, pid)).encode()


async def worker_metrics(store: Store, since: datetime, until: datetime, hostname: str | None,
                         pid: int | None) -> bytes:
    """Queen's worker-metrics answer over the processes' rows, rendered by PostgreSQL."""
    return (await store.process_metrics.workers(since, until, hostname, pid)).encode()
