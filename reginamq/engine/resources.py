"""What is in the queues: overview, queues, partitions, namespaces, tasks and depth.

Every number is offset arithmetic done by aggregate SQL (008_resources.sql): a partition stores
``log_start..last_offset`` and a cursor has consumed everything ``<= committed``. Anything that
lists partitions is paged, so a queue with a million partitions never comes into memory.

Queue-level ``pending`` is the worst cursor's backlog: what the least advanced cursor of a
partition has not committed, or the partition's whole stored log when no one has read it yet.
"""

from __future__ import annotations

import orjson

from reginamq.common.times import stamp
from reginamq.engine import consumer_groups
from reginamq.engine.names import QUEUE_MODE
from reginamq.engine.views import Page, not_found
from reginamq.store import Store


async def overview(store: Store) -> dict:
    row = await store.resources.overview()
    return {
        "queues": row["queues"],
        "partitions": row["partitions"],
        "namespaces": row["namespaces"],
        "tasks": row["tasks"],
        "messages": {"total": row["messages"], "pending": row["pending"], "inFlight": row["in_flight"],
                     "deadLetter": row["dlq"]},
        "consumerGroups": row["consumer_groups"],
        "subscriptions": row["subscriptions"],
        "dlq": row["dlq"],
        "lastWriteAt": stamp(row["last_write_at"]),
        "timestamp": stamp(row["at"]),
    }


def _queue_entry(row) -> dict:
    return {
        "name": row["name"],
        "id": str(row["id"]),
        "namespace": row["namespace"],
        "task": row["task"],
        "options": orjson.loads(row["options"]),
        "partitions": row["partitions"],
        "messages": row["messages"],
        "pending": row["pending"],
        "consumerGroups": row["consumer_groups"],
        "dlq": row["dlq"],
        "expired": row["expired"],
        "lastWriteAt": stamp(row["last_write_at"]),
        "createdAt": stamp(row["created_at"]),
        "updatedAt": stamp(row["updated_at"]),
    }


async def list_queues(store: Store, namespace: str | None, task: str | None, search: str | None,
                      page: Page) -> dict:
    rows = await store.resources.queue_page(namespace, task, search, page.limit, page.offset)
    total = await store.resources.queue_count(namespace, task, search)
    return {"queues": [_queue_entry(r) for r in rows], "total": total, "limit": page.limit,
            "offset": page.offset}


def _partition_entry(row) -> dict:
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "queue": row["queue_name"],
        "lastOffset": row["last_offset"],
        "logStart": row["log_start"],
        "messages": row["messages"],
        "pending": row["pending"],
        "cursors": row["cursors"],
        "oldestPendingAt": stamp(row["oldest_pending_at"]),
        "lastWriteAt": stamp(row["last_write_at"]),
        "createdAt": stamp(row["created_at"]),
    }


async def list_partitions(store: Store, queue: str | None, search: str | None, page: Page) -> dict:
    if queue is not None and not await store.resources.queue_exists(queue):
        raise not_found(f"queue {queue!r} does not exist")
    rows = await store.resources.partition_page(queue, search, page.limit, page.offset)
    total = await store.resources.partition_count(queue, search)
    return {"partitions": [_partition_entry(r) for r in rows], "total": total, "limit": page.limit,
            "offset": page.offset}


async def queue_detail(store: Store, queue: str, page: Page) -> dict:
    """The queue's entry with a page of its partitions and the groups that read it."""
    row = await store.resources.queue(queue)
    if row is None:
        raise not_found(f"queue {queue!r} does not exist")
    entry = _queue_entry(row)
    entry["partitionCount"] = entry.pop("partitions")
    parts = await store.resources.partition_page(queue, None, page.limit, page.offset)
    entry["partitions"] = [_partition_entry(r) for r in parts]
    entry["limit"], entry["offset"] = page.limit, page.offset
    entry["groups"] = await consumer_groups.summaries(store, None, queue)
    queue_mode = await consumer_groups.summaries(store, QUEUE_MODE, queue)
    entry["queueMode"] = queue_mode[0] if queue_mode and queue_mode[0]["cursors"] else None
    return entry


async def depth(store: Store, queue: str, group: str | None, page: Page) -> dict:
    queue_id = await store.resources.queue_id(queue)
    if queue_id is None:
        raise not_found(f"queue {queue!r} does not exist")
    if group is not None and not await store.consumer_groups.reads_queue(queue_id, group):
        raise not_found(f"consumer group {group!r} does not read queue {queue!r}")
    totals = await store.resources.depth_totals(queue_id, group)
    rows = await store.resources.depth_page(queue_id, group, page.limit, page.offset)
    # a conflating group gets one message a partition: its backlog is the partitions with any
    conflating = group is not None and await store.consumer_groups.conflates(queue_id, group)
    return {
        "queue": queue,
        "group": group,
        "pending": totals["pending"],
        "partitionsPending": totals["partitions_pending"],
        "conflation": conflating,
        "effectivePending": totals["partitions_pending"] if conflating else totals["pending"],
        "partitions": [{"partition": r["partition_name"], "pending": r["pending"]} for r in rows],
        "partitionCount": totals["partitions"],
        "limit": page.limit,
        "offset": page.offset,
    }


async def groupings(store: Store, by_task: bool) -> dict:
    key = "task" if by_task else "namespace"
    rows = await store.resources.groupings(by_task)
    items = [{key: r["name"], "queues": r["queues"], "partitions": r["partitions"], "messages": r["messages"],
              "pending": r["pending"]} for r in rows]
    return {f"{key}s": items, "total": len(items)}
