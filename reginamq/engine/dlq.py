"""The dead-letter queue as the official client's DLQ builder reads it."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import orjson

from reginamq.engine.names import QUEUE_MODE

PAGE_SQL = "SELECT * FROM rq_dlq_page($1, $2, $3, $4, $5, $6, $7)"


@dataclasses.dataclass(frozen=True)
class DlqQuery:
    queue: str
    group: str | None
    partition: str | None
    since: datetime | None
    until: datetime | None
    limit: int
    offset: int


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def page(conn, query: DlqQuery) -> dict:
    rows = await conn.fetch(PAGE_SQL, query.queue, query.group, query.partition, query.since, query.until,
                            query.limit, query.offset)
    messages = []
    for row in rows:
        stored = orjson.loads(b"{" + row["payload"] + b"}")  # the fragment rendered at push time
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
            "createdAt": _stamp(row["created_at"]),
            "failedAt": _stamp(row["failed_at"]),
        })
    total = rows[0]["total"] if rows else await _count(conn, query)
    return {"messages": messages, "total": total, "limit": query.limit, "offset": query.offset}


async def _count(conn, query: DlqQuery) -> int:
    """An empty page (offset past the end) still reports the total of the filtered set."""
    if query.offset == 0:
        return 0
    first = await conn.fetch(PAGE_SQL, query.queue, query.group, query.partition, query.since, query.until, 1, 0)
    return first[0]["total"] if first else 0
