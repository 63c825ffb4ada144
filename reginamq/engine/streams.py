"""Streaming queries: what queen-mq's ``Stream.run`` asks of the broker.

The client pops a source partition, runs the operators (map, filter, windows, reducers, gates)
itself, and hands the broker one *cycle* per partition: state changes, pushes to the sink queue,
and the ack of what it consumed. The broker commits the three in one database transaction, so a
cycle happens once or not at all: an ack refused (the lease expired and another consumer has the
messages) takes the state changes and the sink pushes back with it.

- register: a query by name, with the hash of its operator chain; another hash is a conflict
  (409) unless the client asks to reset, which wipes the query's state.
- state: a partition's rows of a query, optionally by keys, key prefix, or windows that closed
  by a time (the client's idle flush of quiet partitions).
- cycle: the ack is the client's ack of the last message it consumed, through the ordinary ack
  rules (engine/ack.py): completing it completes the silent messages below it, and reaching the
  end of the leased span releases the lease; a gate that let only the first messages through acks
  the last of those and keeps the lease on the rest.
"""

from __future__ import annotations

from typing import Any

import msgspec
import orjson

from reginamq.common.errors import BadRequest, QueueFull
from reginamq.common.times import iso_millis
from reginamq.engine import ack as acks
from reginamq.engine import push as pushes
from reginamq.engine.encryption import Sealer
from reginamq.engine.names import check_name, check_partition_id, check_queue_name, check_uuid
from reginamq.store import Store

MAX_STATE_OPS = 10_000
MAX_KEYS = 10_000
MAX_KEY_LENGTH = 4096


class Register(msgspec.Struct):
    name: str
    source_queue: str
    config_hash: str
    sink_queue: str | None = None
    reset: bool = False


class StateGet(msgspec.Struct):
    query_id: str
    partition_id: str
    keys: list[str] | None = None
    key_prefix: str | None = None
    ripe_at_or_before: int | None = None


class StateOp(msgspec.Struct):
    type: str
    key: str
    value: Any = None


class CycleAck(msgspec.Struct):
    transactionId: str
    leaseId: str | None = None
    status: str | None = None
    error: str | None = None


class Cycle(msgspec.Struct):
    query_id: str
    partition_id: str
    consumer_group: str | None = None
    state_ops: list[StateOp] = []
    push_items: list[pushes.PushItem] = []
    ack: CycleAck | None = None


def _check_key(key: str) -> str:
    """State keys hold the client's separators (U+001F between operator, window and user key), so
    only what PostgreSQL's text cannot hold is refused, and the length."""
    if not key or len(key) > MAX_KEY_LENGTH or "\x00" in key:
        raise BadRequest(f"a state key is a non-empty string of at most {MAX_KEY_LENGTH} characters, without NUL")
    return key


class Refused(Exception):
    """The cycle cannot commit; everything it did so far is rolled back."""


async def register(store: Store, body: Register) -> dict:
    name = check_name("name", body.name)
    source = check_queue_name(body.source_queue, "source_queue")
    sink = check_queue_name(body.sink_queue, "sink_queue") if body.sink_queue else None
    config_hash = check_name("config_hash", body.config_hash)
    row = await store.streams.register(name, source, sink, config_hash, body.reset)
    answer = {"success": not row[3], "query_id": row[0], "name": name}
    if row[3]:
        answer["error"] = (f"config_hash mismatch: operator chain changed for queryId {name!r}. "
                           "Pass reset:true to wipe existing state, or use a new queryId.")
        return answer
    return {**answer, "config_hash": config_hash, "fresh": row[1], "reset": row[2]}


async def state(store: Store, body: StateGet) -> bytes:
    query_id = check_uuid("query_id", body.query_id)
    partition_id = check_partition_id("partition_id", body.partition_id)
    keys = [_check_key(key) for key in body.keys or []]
    if len(keys) > MAX_KEYS:
        raise BadRequest(f"at most {MAX_KEYS} keys per read")
    if body.key_prefix and "\x00" in body.key_prefix:
        raise BadRequest("key_prefix must not contain NUL")
    rows = await store.streams.state(query_id, partition_id, keys, body.key_prefix or None, body.ripe_at_or_before)
    listed = b",".join(b'{"key":' + orjson.dumps(row[0]) + b',"value":' + row[1].encode()
                       + b',"updated_at":"' + iso_millis(row[2]) + b'"}' for row in rows)
    return b'{"success":true,"rows":[' + listed + b"]}"


def prepare(body: Cycle, producer_sub: str | None) -> tuple:
    """Validate everything before the database is touched."""
    query_id = check_uuid("query_id", body.query_id)
    partition_id = check_partition_id("partition_id", body.partition_id)
    if len(body.state_ops) > MAX_STATE_OPS:
        raise BadRequest(f"at most {MAX_STATE_OPS} state_ops per cycle", status=413)
    for op in body.state_ops:
        if op.type not in ("upsert", "delete"):
            raise BadRequest(f"unknown state_op type {op.type!r} (upsert or delete)")
        _check_key(op.key)
    ack = None
    if body.ack is not None:
        ack = acks.prepare([acks.Ack(body.ack.transactionId, partition_id, body.consumer_group, body.ack.leaseId,
                                     body.ack.status, body.ack.error)])
    push = pushes.prepare(body.push_items, producer_sub) if body.push_items else None
    return query_id, partition_id, body.state_ops, push, ack


async def cycle(store: Store, prepared: tuple, sealer: Sealer) -> dict:
    query_id, partition_id, state_ops, push, ack = prepared
    answer: dict[str, Any] = {"success": True, "query_id": query_id, "partition_id": partition_id,
                              "queueName": None, "state_ops_applied": 0, "push_results": [], "ack_result": None}

    async def commit(tx: Store) -> tuple[dict | None, list[dict]]:
        answer["queueName"] = await tx.streams.apply(
            query_id, partition_id, [op.type == "delete" for op in state_ops], [op.key for op in state_ops],
            [None if op.type == "delete" else orjson.dumps({} if op.value is None else op.value).decode()
             for op in state_ops])
        if answer["queueName"] is None:
            raise Refused("query or partition not found")
        ack_result = (await acks.write(tx, ack))[0] if ack is not None else None
        if ack_result is not None and not ack_result["success"]:
            raise Refused(ack_result["error"] or "acknowledgment rejected")
        try:
            push_results = await pushes.write(tx, push, sealer) if push is not None else []
        except QueueFull as full:
            raise Refused(str(full)) from None
        return ack_result, push_results

    try:
        ack_result, push_results = await store.atomically(commit)
    except Refused as refused:
        return {**answer, "success": False, "error": str(refused)}
    answer.update(state_ops_applied=len(state_ops), push_results=push_results)
    if ack_result is not None:
        answer["ack_result"] = {"success": True, "lease_released": ack_result["leaseReleased"],
                                "dlq": ack_result["dlq"]}
    return answer
