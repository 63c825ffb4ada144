"""Statistics: status, analytics and metrics from the stats tables (012_stats.sql).

Counters and gauges are derived from the tables by a refresh (the elected stats loop every
``--maintenance-interval`` seconds, or POST /api/v1/stats/refresh), so they are the same
whichever worker process or node answers. Only the request-latency histogram and the
database-pool gauges are per process (see :mod:`reginamq.http.stats`).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

import orjson

from reginamq.engine.browse import iso_millis

BUCKET_SECONDS = 10
KEEP_SECONDS = 24 * 3600
THROUGHPUT_WINDOW_SECONDS = 60
REFRESH_SQL = "SELECT rq_stats_refresh($1, $2, $3)"
REFRESH_LOCK_SQL = "LOCK TABLE rq_stats_state IN EXCLUSIVE MODE"
FULL_PASS_SQL = ("SELECT extract(epoch FROM clock_timestamp() - full_at)::float8 AS since, full_seconds "
                 "FROM rq_stats_state WHERE id = 1")
QUEUES_SQL = "SELECT * FROM rq_stats_queues($1)"
SERIES_SQL = "SELECT * FROM rq_stats_series($1, $2, $3, $4)"
GROUPS_SQL = "SELECT * FROM rq_stats_groups_of($1)"
STATE_SQL = "SELECT refreshed_at FROM rq_stats_state WHERE id = 1"
RETENTION_SQL = "SELECT * FROM rq_retention_totals_of()"
OPTIONS_SQL = "SELECT options FROM rq_queues WHERE name = $1"
COUNTERS = ("pushed", "popped", "acked", "failed", "deadLettered")
_COLUMNS = {"pushed": "pushed", "popped": "popped", "acked": "acked", "failed": "failed",
            "deadLettered": "dead_lettered"}
STARTED = time.time()


def stamp(moment: datetime | None) -> str | None:
    return None if moment is None else iso_millis(moment).decode()


async def refresh(conn, full: bool = True) -> int:
    """One refresh; returns the number of queues. A full pass (what an explicit refresh asks
    for) also recounts the gauges over every partition, which costs time with the partitions;
    an incremental one costs what moved since the last refresh (see 012_stats.sql).
    REPEATABLE READ: the notes it books and deletes and the gauges must describe one instant,
    or notes committed meanwhile would be deleted unbooked and the gauges an incremental
    refresh carries forward would drift. The refreshes' lock is taken first: a LOCK takes no
    snapshot, so the refresh's snapshot comes after the previous refresh committed instead of
    before (which would fail it with a serialization error)."""
    async with conn.transaction(isolation="repeatable_read"):
        await conn.execute(REFRESH_LOCK_SQL)
        return await conn.fetchval(REFRESH_SQL, BUCKET_SECONDS, KEEP_SECONDS, full)


async def last_full_pass(conn) -> tuple[float | None, float | None]:
    """Seconds since the last full pass started and how long it took (None, None before any)."""
    row = await conn.fetchrow(FULL_PASS_SQL)
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


async def _recent(conn, queue: str | None):
    now = datetime.now(UTC)
    return await conn.fetch(SERIES_SQL, queue, now - timedelta(seconds=THROUGHPUT_WINDOW_SECONDS), now,
                            THROUGHPUT_WINDOW_SECONDS * 10)


async def status(conn) -> dict:
    queues = await conn.fetch(QUEUES_SQL, None)
    recent = await _recent(conn, None)
    refreshed = await conn.fetchval(STATE_SQL)
    totals = dict.fromkeys(COUNTERS, 0)
    for row in queues:
        for key, column in _COLUMNS.items():
            totals[key] += row[column]
    return {
        "status": "healthy", "database": "connected",
        "uptimeSeconds": round(time.time() - STARTED, 1), "pid": os.getpid(),
        "queues": len(queues), "partitions": sum(r["partitions"] for r in queues),
        "totals": totals,
        "depth": sum(r["depth"] for r in queues), "lag": max((r["lag"] for r in queues), default=0),
        "dlqDepth": sum(r["dlq_depth"] for r in queues),
        "throughput": {"windowSeconds": THROUGHPUT_WINDOW_SECONDS, **_rates(recent, THROUGHPUT_WINDOW_SECONDS)},
        "statsRefreshedAt": stamp(refreshed),
    }


async def queues(conn, limit: int, offset: int) -> dict:
    rows = await conn.fetch(QUEUES_SQL, None)
    recent = await _recent(conn, None)
    per_queue: dict[str, list] = {}
    for row in recent:
        per_queue.setdefault(row["queue_name"], []).append(row)
    out = []
    for row in rows[offset:offset + limit]:
        entry = _queue(row)
        entry["throughput"] = _rates(per_queue.get(row["queue_name"], []), THROUGHPUT_WINDOW_SECONDS)
        out.append(entry)
    return {"queues": out, "total": len(rows), "limit": limit, "offset": offset}


async def queue(conn, name: str) -> dict | None:
    rows = await conn.fetch(QUEUES_SQL, name)
    if not rows:
        return None
    entry = _queue(rows[0])
    entry["options"] = orjson.loads(await conn.fetchval(OPTIONS_SQL, name))
    recent = await _recent(conn, name)
    entry["throughput"] = {"windowSeconds": THROUGHPUT_WINDOW_SECONDS, **_rates(recent, THROUGHPUT_WINDOW_SECONDS)}
    entry["consumerGroups"] = [{"consumerGroup": g["consumer_group"], "backlog": g["backlog"],
                                "partitionsBehind": g["partitions_behind"]}
                               for g in await conn.fetch(GROUPS_SQL, name)]
    now = datetime.now(UTC)
    series = await conn.fetch(SERIES_SQL, name, now - timedelta(hours=1), now, 60)
    entry["series"] = {"intervalSeconds": 60, "points": [_point(r) for r in series]}
    return entry


async def analytics(conn, queue_name: str | None, since: datetime, until: datetime, interval: int) -> dict:
    rows = await conn.fetch(SERIES_SQL, queue_name, since, until, interval)
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


async def snapshot(conn) -> dict:
    """Everything /metrics and /metrics/prometheus expose from the database."""
    return {
        "queues": [_queue(r) for r in await conn.fetch(QUEUES_SQL, None)],
        "groups": [{"queue": g["queue_name"], "consumerGroup": g["consumer_group"], "backlog": g["backlog"],
                    "partitionsBehind": g["partitions_behind"]} for g in await conn.fetch(GROUPS_SQL, None)],
        "retention": [{"queue": r["queue_name"], "deletedSegments": r["segments"], "deletedMessages": r["messages"],
                       "evictedMessages": r["evicted"], "deletedPartitions": r["partitions"]}
                      for r in await conn.fetch(RETENTION_SQL)],
        "statsRefreshedAt": stamp(await conn.fetchval(STATE_SQL)),
    }
