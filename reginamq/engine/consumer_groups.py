"""Consumer groups as operators see them: lag, detail, delete, seek, subscription change.

A group reads a queue when it has a durable subscription there (or, if that row is gone, any
cursor). On each partition of such a queue it stands on its cursor or, where it has none yet,
where its subscription will seed one; lag is ``last_offset`` minus that position and
``maxTimeLag`` the age in seconds of the oldest message it has not consumed (009_groups.sql).

The detail of one group has Queen's shape: an object keyed by queue name, each queue with its
``conflation`` policy and its partitions (offset lag, time lag, worker, lease, total consumed),
beside the group's figures on that queue; ``{}`` for a group that reads nothing. A queue may
hold a million partitions, so each queue lists one page of them, by name.

Queue mode (``__QUEUE_MODE__``) is not a group: the list and lagging routes leave it out
(its backlog is the queue's depth under /resources). The routes that name a group accept it
explicitly, so queue mode can be inspected, sought and reset like any group.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from reginamq.common.times import stamp
from reginamq.engine.views import Page, not_found
from reginamq.store import Store

LAGGING_SECONDS = 300  # a group whose oldest unconsumed message is older than this is Lagging


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
        "conflation": bool(row["conflation"]),
        "subscriptionCreatedAt": stamp(row["subscribed_at"]),
    }


async def summaries(store: Store, group: str | None, queue: str | None) -> list[dict]:
    """One entry per (group, queue); queue mode only when asked for by name."""
    return [_summary(r) for r in await store.consumer_groups.summaries(group, queue)]


async def lagging(store: Store, min_lag_seconds: int) -> list[dict]:
    return [s for s in await summaries(store, None, None)
            if s["totalLag"] > 0 and s["maxTimeLag"] >= min_lag_seconds]


def _partition(row) -> dict:
    """Queen's fields first; then where the group stands, in offsets, and the leased span."""
    active = bool(row["lease_active"])
    return {
        "partition": row["partition_name"],
        "workerId": str(row["lease_id"]) if active and row["lease_id"] else None,
        "lastConsumedAt": None,  # not recorded: acks keep no time per cursor
        "totalConsumed": 0 if row["committed"] is None else row["committed"] + 1,
        "offsetLag": row["lag"],
        "timeLagSeconds": max(row["time_lag"] or 0, 0),
        "leaseActive": active,
        "leaseExpiresAt": stamp(row["lease_expires_at"]) if active else None,
        "partitionId": str(row["partition_id"]),
        "committed": row["committed"],
        "position": row["effective"],
        "lastOffset": row["last_offset"],
        "logStart": row["log_start"],
        "oldestPendingAt": stamp(row["oldest_pending_at"]),
        "leasedFrom": row["span_start"] if active else None,
        "leasedTo": row["span_end"] if active else None,
    }


def _queue(row, partitions: list[dict], page: Page) -> dict:
    summary = _summary(row)
    return {
        "conflation": summary["conflation"],
        "partitions": partitions,
        "state": summary["state"],
        "subscriptionMode": summary["subscriptionMode"],
        "subscriptionTimestamp": summary["subscriptionTimestamp"],
        "subscriptionCreatedAt": summary["subscriptionCreatedAt"],
        "partitionCount": summary["partitions"],
        "cursors": summary["cursors"],
        "members": summary["members"],
        "totalLag": summary["totalLag"],
        "partitionsWithLag": summary["partitionsWithLag"],
        "maxTimeLag": summary["maxTimeLag"],
        "oldestPendingAt": summary["oldestPendingAt"],
        "limit": page.limit,
        "offset": page.offset,
    }


async def detail(store: Store, group: str, queue: str | None, page: Page) -> dict:
    """{queue name: the group on that queue}, queues by name, each with a page of its partitions."""
    queues = await store.consumer_groups.summaries(group, queue)
    if not queues:
        return {}
    partitions: dict[str, list[dict]] = defaultdict(list)
    for row in await store.consumer_groups.partition_pages(group, queue, page.limit, page.offset):
        partitions[row["queue_name"]].append(_partition(row))
    return {row["queue_name"]: _queue(row, partitions[row["queue_name"]], page) for row in queues}


async def delete(store: Store, group: str, queue: str | None, delete_metadata: bool) -> dict:
    row = await store.consumer_groups.delete(group, queue, delete_metadata)
    cursors, subscriptions = row["cursors"], row["subscriptions"]
    answer = {"deleted": bool(cursors or subscriptions), "consumerGroup": group}
    if queue is not None:
        answer["queueName"] = queue
    answer.update({"cursorsDeleted": cursors or 0, "subscriptionsDeleted": subscriptions or 0,
                   "metadataDeleted": delete_metadata})
    return answer


async def seek(store: Store, group: str, queue: str, to_end: bool, at: datetime | None) -> dict:
    row = await store.consumer_groups.seek(group, queue, to_end, at)
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


async def subscribe(store: Store, group: str, queue: str | None, mode: str, start: datetime | None) -> dict:
    rows = await store.consumer_groups.subscribe(group, queue, mode, start)
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
