"""What is in the queues: overview, queues, partitions, namespaces, tasks and depth.

Every number is offset arithmetic done by aggregate SQL (008_resources.sql): a partition stores
``log_start..last_offset`` and a cursor has consumed everything ``<= committed``. Anything that
lists partitions is paged, so a queue with a million partitions never comes into memory.

Queue-level ``pending`` is the worst cursor's backlog: what the least advanced cursor of a
partition has not committed, or the partition's whole stored log when no one has read it yet.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import orjson

from reginamq.common.errors import BadRequest
from reginamq.engine.names import QUEUE_MODE


def stamp(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def not_found(message: str) -> BadRequest:
    return BadRequest(message, status=404)


@dataclasses.dataclass(frozen=True)
class Page:
    limit: int
    offset: int


async def overview(conn) -> dict:
    row = await conn.fetchrow("SELECT *, now() AS at FROM rq_res_overview()")
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


async def list_queues(conn, namespace: str | None, task: str | None, search: str | None, page: Page) -> dict:
    rows = await conn.fetch("SELECT * FROM rq_res_queue_page(NULL, $1, $2, $3, $4, $5)",
                            namespace, task, search, page.limit, page.offset)
    total = await conn.fetchval("SELECT rq_res_queue_count($1, $2, $3)", namespace, task, search)
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


async def list_partitions(conn, queue: str | None, search: str | None, page: Page) -> dict:
    if queue is not None and not await conn.fetchval("SELECT 1 FROM rq_queues WHERE name = $1", queue):
        raise not_found(f"queue {queue!r} does not exist")
    rows = await conn.fetch("SELECT * FROM rq_res_partition_page($1, $2, $3, $4)",
                            queue, search, page.limit, page.offset)
    total = await conn.fetchval("SELECT rq_res_partition_count($1, $2)", queue, search)
    return {"partitions": [_partition_entry(r) for r in rows], "total": total, "limit": page.limit,
            "offset": page.offset}


async def queue_detail(conn, queue: str, page: Page) -> dict:
    from reginamq.engine import groups  # the per-group view of the queue

    row = await conn.fetchrow("SELECT * FROM rq_res_queue_page($1, NULL, NULL, NULL, 1, 0)", queue)
    if row is None:
        raise not_found(f"queue {queue!r} does not exist")
    entry = _queue_entry(row)
    entry["partitionCount"] = entry.pop("partitions")
    parts = await conn.fetch("SELECT * FROM rq_res_partition_page($1, NULL, $2, $3)",
                             queue, page.limit, page.offset)
    entry["partitions"] = [_partition_entry(r) for r in parts]
    entry["limit"], entry["offset"] = page.limit, page.offset
    entry["groups"] = await groups.summaries(conn, None, queue)
    queue_mode = await groups.summaries(conn, QUEUE_MODE, queue)
    entry["queueMode"] = queue_mode[0] if queue_mode and queue_mode[0]["cursors"] else None
    return entry


GROUP_CONFLATES_SQL = "SELECT conflation FROM rq_consumer_groups WHERE queue_id = $1 AND name = $2"


async def depth(conn, queue: str, group: str | None, page: Page) -> dict:
    queue_id = await conn.fetchval("SELECT id FROM rq_queues WHERE name = $1", queue)
    if queue_id is None:
        raise not_found(f"queue {queue!r} does not exist")
    if group is not None and not await conn.fetchval("SELECT rq_group_reads_queue($1, $2)", queue_id, group):
        raise not_found(f"consumer group {group!r} does not read queue {queue!r}")
    totals = await conn.fetchrow("SELECT * FROM rq_res_depth_totals($1, $2)", queue_id, group)
    rows = await conn.fetch("SELECT * FROM rq_res_depth_page($1, $2, $3, $4)", queue_id, group,
                            page.limit, page.offset)
    # a conflating group gets one message a partition: its backlog is the partitions with any
    conflating = group is not None and bool(await conn.fetchval(GROUP_CONFLATES_SQL, queue_id, group))
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


async def groupings(conn, by_task: bool) -> dict:
    key = "task" if by_task else "namespace"
    rows = await conn.fetch("SELECT * FROM rq_res_groupings($1)", by_task)
    items = [{key: r["name"], "queues": r["queues"], "partitions": r["partitions"], "messages": r["messages"],
              "pending": r["pending"]} for r in rows]
    return {f"{key}s": items, "total": len(items)}
