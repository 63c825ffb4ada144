"""Consumer groups as operators see them: lag, detail, delete, seek, subscription change.

A group reads a queue when it has a durable subscription there (or, if that row is gone, any
cursor). On each partition of such a queue it stands on its cursor or, where it has none yet,
where its subscription will seed one; lag is ``last_offset`` minus that position and
``maxTimeLag`` the age in seconds of the oldest message it has not consumed (009_groups.sql).

Queue mode (``__QUEUE_MODE__``) is not a group: the list and lagging routes leave it out
(its backlog is the queue's depth under /resources). The routes that name a group accept it
explicitly, so queue mode can be inspected, sought and reset like any group.
"""

from __future__ import annotations

from datetime import datetime

from reginamq.engine.resources import Page, not_found, stamp

LAGGING_SECONDS = 300  # a group whose oldest unconsumed message is older than this is Lagging

SUMMARIES_SQL = """
SELECT s.*, floor(extract(epoch FROM now() - s.oldest_pending_at))::bigint AS max_time_lag
FROM rq_grp_summaries($1, $2) s
"""
PARTITIONS_SQL = """
SELECT x.*, floor(extract(epoch FROM now() - x.oldest_pending_at))::bigint AS time_lag,
       x.span_end IS NOT NULL AND x.lease_expires_at > now() AS lease_active
FROM rq_grp_partition_page($1, $2, $3, $4) x
"""


def _state(row) -> str:
    if row["total_lag"] > 0 and row["cursors"] == 0:
        return "Dead"
    if (row["max_time_lag"] or 0) > LAGGING_SECONDS:
        return "Lagging"
    return "Stable"


def _summary(row) -> dict:
    return {
        "name": row["group_name"],
        "queueName": row["queue_name"],
        "topics": [row["queue_name"]],
        "members": row["leased"],
        "cursors": row["cursors"],
        "partitions": row["partitions"],
        "partitionsWithLag": row["partitions_with_lag"],
        "totalLag": row["total_lag"],
        "maxTimeLag": max(row["max_time_lag"] or 0, 0),
        "oldestPendingAt": stamp(row["oldest_pending_at"]),
        "state": _state(row),
        "subscriptionMode": row["subscription_mode"],
        "subscriptionTimestamp": stamp(row["subscription_from"]),
        "subscriptionCreatedAt": stamp(row["subscribed_at"]),
    }


async def summaries(conn, group: str | None, queue: str | None) -> list[dict]:
    """One entry per (group, queue); queue mode only when asked for by name."""
    return [_summary(r) for r in await conn.fetch(SUMMARIES_SQL, group, queue)]


async def lagging(conn, min_lag_seconds: int) -> list[dict]:
    return [s for s in await summaries(conn, None, None)
            if s["totalLag"] > 0 and s["maxTimeLag"] >= min_lag_seconds]


def _partition(row) -> dict:
    return {
        "queueName": row["queue_name"],
        "partition": row["partition_name"],
        "partitionId": str(row["partition_id"]),
        "committed": row["committed"],
        "position": row["effective"],
        "lastOffset": row["last_offset"],
        "logStart": row["log_start"],
        "lag": row["lag"],
        "timeLag": max(row["time_lag"] or 0, 0),
        "oldestPendingAt": stamp(row["oldest_pending_at"]),
        "leaseId": str(row["lease_id"]) if row["lease_active"] and row["lease_id"] else None,
        "leaseExpiresAt": stamp(row["lease_expires_at"]) if row["lease_active"] else None,
        "leaseActive": bool(row["lease_active"]),
        "leasedFrom": row["span_start"] if row["lease_active"] else None,
        "leasedTo": row["span_end"] if row["lease_active"] else None,
    }


async def detail(conn, group: str, queue: str | None, page: Page) -> dict:
    queues = await summaries(conn, group, queue)
    if not queues:
        where = f" on queue {queue!r}" if queue else ""
        raise not_found(f"consumer group {group!r} does not exist{where}")
    rows = await conn.fetch(PARTITIONS_SQL, group, queue, page.limit, page.offset)
    return {
        "name": group,
        "queues": queues,
        "totalLag": sum(q["totalLag"] for q in queues),
        "partitionsWithLag": sum(q["partitionsWithLag"] for q in queues),
        "maxTimeLag": max(q["maxTimeLag"] for q in queues),
        "members": sum(q["members"] for q in queues),
        "partitionCount": sum(q["partitions"] for q in queues),
        "partitions": [_partition(r) for r in rows],
        "limit": page.limit,
        "offset": page.offset,
    }


async def delete(conn, group: str, queue: str | None, delete_metadata: bool) -> dict:
    row = await conn.fetchrow("SELECT * FROM rq_grp_delete($1, $2, $3)", group, queue, delete_metadata)
    cursors, subscriptions = row["cursors"], row["subscriptions"]
    answer = {"deleted": bool(cursors or subscriptions), "consumerGroup": group}
    if queue is not None:
        answer["queueName"] = queue
    answer.update({"cursorsDeleted": cursors or 0, "subscriptionsDeleted": subscriptions or 0,
                   "metadataDeleted": delete_metadata})
    return answer


async def seek(conn, group: str, queue: str, to_end: bool, at: datetime | None) -> dict:
    row = await conn.fetchrow("SELECT * FROM rq_grp_seek($1, $2, $3, $4)", group, queue, to_end, at)
    if row["updated"] is None:
        raise not_found(f"queue {queue!r} does not exist")
    if row["updated"] < 0:
        raise not_found(f"consumer group {group!r} does not read queue {queue!r}")
    return {
        "success": True,
        "consumerGroup": group,
        "queueName": queue,
        "seekToEnd": to_end,
        "targetTimestamp": stamp(at),
        "partitionsUpdated": row["updated"] + row["created"],
        "cursorsCreated": row["created"],
    }


async def subscribe(conn, group: str, queue: str | None, mode: str, start: datetime | None) -> dict:
    rows = await conn.fetch("SELECT * FROM rq_grp_subscribe($1, $2, $3, $4)", group, queue, mode, start)
    if not rows:
        if queue is not None:
            raise not_found(f"queue {queue!r} does not exist")
        raise not_found(f"consumer group {group!r} has no subscription")
    return {
        "success": True,
        "consumerGroup": group,
        "subscriptionMode": mode,
        "subscriptionTimestamp": stamp(start),
        "queues": [r["queue_name"] for r in rows],
        "updated": len(rows),
    }
