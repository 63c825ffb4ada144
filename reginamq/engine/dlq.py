"""The dead-letter queue as the official client's DLQ builder reads it."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import orjson
import uuid_utils

from reginamq.common.times import stamp
from reginamq.engine.names import QUEUE_MODE
from reginamq.store import Store


@dataclasses.dataclass(frozen=True)
class DlqQuery:
    queue: str
    group: str | None
    partition: str | None
    since: datetime | None
    until: datetime | None
    limit: int
    offset: int


async def page(store: Store, query: DlqQuery, reveal) -> dict:
    """One page of dead letters; ``reveal`` opens sealed fragments (see encryption.py)."""
    rows = await store.dead_letters.page(query.queue, query.group, query.partition, query.since, query.until,
                                         query.limit, query.offset)
    messages = []
    for row in rows:
        stored = orjson.loads(b"{" + reveal(row["payload"]) + b"}")  # the fragment rendered at push time
        messages.append({
            "id": str(row["id"]),
            "messageId": stored["id"],
            "transactionId": row["transaction_id"],
            "traceId": stored.get("traceId"),
            "partitionId": str(row["partition_id"]),
            "queue": row["queue_name"],
            "partition": row["partition_name"],
            "consumerGroup": None if row["consumer_group"] == QUEUE_MODE else row["consumer_group"],
            "errorMessage": row["error_message"],
            "retryCount": row["retry_count"],
            "data": stored.get("data"),
            "createdAt": stamp(row["created_at"]),
            "failedAt": stamp(row["failed_at"]),
        })
    total = rows[0]["total"] if rows else await _count(store, query)
    return {"messages": messages, "total": total, "limit": query.limit, "offset": query.offset}


async def _count(store: Store, query: DlqQuery) -> int:
    """An empty page (offset past the end) still reports the total of the filtered set."""
    if query.offset == 0:
        return 0
    first = await store.dead_letters.page(query.queue, query.group, query.partition, query.since, query.until, 1, 0)
    return first[0]["total"] if first else 0


class PartitionGone(Exception):
    """The dead letter's partition (or queue) was deleted: there is nowhere to replay it to."""


async def replay(store: Store, entry_id: str) -> dict | None:
    """Put a dead letter back at the end of its partition as a new message (new id, same
    transactionId, traceId and data) and remove the entry. ``None`` for an unknown id."""
    new_id = str(uuid_utils.uuid7())
    row = await store.dead_letters.replay(entry_id, new_id)
    if row is None:
        return None
    if row["message_offset"] is None:
        raise PartitionGone(entry_id)
    return {"success": True, "id": entry_id, "messageId": new_id, "transactionId": row["transaction_id"],
            "partitionId": row["partition_id"], "queue": row["queue_name"], "partition": row["partition_name"]}


async def purge(store: Store, queue: str, group: str | None, partition: str | None) -> int:
    return await store.dead_letters.purge(queue, group, partition)
