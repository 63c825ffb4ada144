"""Traces: events consumers record about a message (``msg.trace()`` in the client).

A trace belongs to a message address (partitionId, transactionId) and carries up to
``MAX_NAMES`` names, through which traces of many messages are found together. ``data`` is
any JSON value of at most ``MAX_DATA_BYTES``; it is stored as jsonb and answered as stored.

The reads answer in Queen's shapes, snake_case as Queen's are: a trace is {id, transaction_id,
partition_id, event_type, data, consumer_group (``__QUEUE_MODE__`` for queue mode), worker_id
(null: the broker does not know the consumer's worker), created_at, queue_name,
partition_name, trace_names}; pages carry ``total`` and ``pagination: {limit, offset}``.
"""

from __future__ import annotations

from datetime import datetime

import msgspec
import orjson
import uuid_utils

from reginamq.common.errors import BadRequest
from reginamq.common.times import iso_millis
from reginamq.engine.names import QUEUE_MODE, check_name, check_partition_id
from reginamq.store import Store

MAX_DATA_BYTES = 64 * 1024
MAX_NAMES = 16


class TraceBody(msgspec.Struct, forbid_unknown_fields=False):
    transactionId: str
    partitionId: str
    data: msgspec.Raw
    consumerGroup: str | None = None
    eventType: str | None = "info"
    traceNames: list[str] | None = None


class PreparedTrace(msgspec.Struct):
    id: str
    partition_id: str
    txid: str
    group: str | None
    event_type: str
    data: str
    names: list[str]


def prepare(body: TraceBody) -> PreparedTrace:
    raw = bytes(body.data)
    if len(raw) > MAX_DATA_BYTES:
        raise BadRequest(f"data is larger than {MAX_DATA_BYTES} bytes", status=413)
    names: list[str] = []
    for position, name in enumerate(body.traceNames or []):
        check_name(f"traceNames[{position}]", name)
        if name not in names:
            names.append(name)
    if len(names) > MAX_NAMES:
        raise BadRequest(f"a trace carries at most {MAX_NAMES} names")
    group = body.consumerGroup
    return PreparedTrace(
        id=str(uuid_utils.uuid7()),
        partition_id=check_partition_id("partitionId", body.partitionId),
        txid=check_name("transactionId", body.transactionId),
        group=None if group in (None, "", QUEUE_MODE) else check_name("consumerGroup", group),
        event_type=check_name("eventType", body.eventType or "info"),
        data=raw.decode("utf-8"),
        names=names,
    )


async def add(store: Store, trace: PreparedTrace) -> datetime:
    return await store.traces.add(trace.id, trace.partition_id, trace.txid, trace.group, trace.event_type,
                                  trace.data, trace.names)


def _render(row) -> dict:
    return {
        "id": str(row["id"]),
        "transaction_id": row["transaction_id"],
        "partition_id": str(row["partition_id"]),
        "event_type": row["event_type"],
        "data": orjson.Fragment(row["data"]),
        "consumer_group": row["consumer_group"] or QUEUE_MODE,
        "worker_id": None,
        "created_at": iso_millis(row["created_at"]).decode(),
        "queue_name": row["queue_name"],
        "partition_name": row["partition_name"],
        "trace_names": list(row["trace_names"]),
    }


async def for_message(store: Store, partition_id: str, txid: str, limit: int) -> dict:
    """A message's traces, oldest first."""
    return {"traces": [_render(r) for r in await store.traces.for_message(partition_id, txid, limit)]}


async def by_name(store: Store, name: str, since: datetime | None, until: datetime | None, limit: int,
                  offset: int) -> dict:
    """A page of the traces carrying a name, newest first."""
    rows = await store.traces.by_name(name, since, until, limit, offset)
    total = rows[0]["total"] if rows else None
    if total is None:
        first = await store.traces.by_name(name, since, until, 1, 0) if offset else []
        total = first[0]["total"] if first else 0
    return {"traces": [_render(r) for r in rows], "total": total,
            "pagination": {"limit": limit, "offset": offset}}


async def names(store: Store, search: str | None, limit: int, offset: int) -> dict:
    """A page of the trace names, the most recently used first."""
    rows = await store.traces.names(search, limit, offset)
    total = rows[0]["total"] if rows else None
    if total is None:
        first = await store.traces.names(search, 1, 0) if offset else []
        total = first[0]["total"] if first else 0
    return {
        "trace_names": [{"trace_name": r["name"], "trace_count": r["trace_count"],
                         "message_count": r["message_count"], "last_seen": iso_millis(r["last_seen"]).decode()}
                        for r in rows],
        "total": total, "pagination": {"limit": limit, "offset": offset},
    }
