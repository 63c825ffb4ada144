"""Transactions: acks and pushes that commit together or not at all.

Every operation is validated before the database is touched; then the acks and the pushes run
inside one database transaction, each kind as one call. A refused ack, a lease that is no
longer live or a duplicate push rolls the whole bundle back and is reported with a reason.

The answer's ``results`` are flat, as Queen's: one per acknowledgement and one per pushed
item (a push operation of three items answers three results), in request order, so that
``index`` counts acks and pushed items alike; the client's ``failedIndex`` arithmetic and
its binary transaction body (push_binary.py) both count that way.

The ``kv`` rider (Queen 2.x, engine/kv.py) runs first in the same database transaction, then the
``timers`` rider (engine/timers.py), and their results follow the operations' in the flat space,
kv's then the timers' (``opIndex`` is the op's place in its rider). A
``required`` op that lost its precondition rolls the bundle back and answers
``reason: "kv_precondition"`` with ``failedIndex`` in the flat space: the client returns that
verdict instead of raising, since it is what every redelivery meeting its own marker gets.
"""

from __future__ import annotations

import uuid

import msgspec

from reginamq.common.errors import BadRequest, QueueFull
from reginamq.engine import ack as acks
from reginamq.engine import kv, timers
from reginamq.engine import push as pushes
from reginamq.engine.encryption import Sealer
from reginamq.engine.names import check_uuid
from reginamq.store import Store

MAX_OPERATIONS = 10_000


class Operation(msgspec.Struct):
    type: str
    # ack
    transactionId: str | None = None
    partitionId: str | None = None
    consumerGroup: str | None = None
    leaseId: str | None = None
    status: str | None = None
    error: str | None = None
    # push
    items: list[pushes.PushItem] | None = None


class TransactionBody(msgspec.Struct):
    operations: list[Operation]
    requiredLeases: list[str] | None = None
    kv: list[msgspec.Raw] | None = None
    timers: list[msgspec.Raw] | None = None


class Rollback(Exception):
    def __init__(self, reason: str, error: str):
        super().__init__(error)
        self.reason = reason
        self.error = error


def prepare(body: TransactionBody, producer_sub: str | None = None,
            pushed: tuple[list[pushes.PushItem], list[str | None] | None] | None = None):
    """Validate the bundle; ``pushed`` are items (and their client-minted ids) that came beside
    the JSON operations (the binary transaction body), pushed after them."""
    if not body.operations and not (pushed and pushed[0]) and not body.kv and not body.timers:
        raise BadRequest("a transaction needs at least one operation")
    if len(body.operations) > MAX_OPERATIONS:
        raise BadRequest(f"a transaction carries at most {MAX_OPERATIONS} operations", status=413)
    ack_list: list[acks.Ack] = []
    items: list[pushes.PushItem] = []
    layout: list[tuple[str, int, int]] = []  # (type, first index, count) per operation
    for position, op in enumerate(body.operations):
        if op.type == "ack":
            if op.transactionId is None or op.partitionId is None:
                raise BadRequest(f"operations[{position}]: an ack needs transactionId and partitionId")
            layout.append(("ack", len(ack_list), 1))
            ack_list.append(acks.Ack(op.transactionId, op.partitionId, op.consumerGroup, op.leaseId,
                                     op.status, op.error))
        elif op.type == "push":
            if not op.items:
                raise BadRequest(f"operations[{position}]: a push needs a non-empty items list")
            layout.append(("push", len(items), len(op.items)))
            items.extend(op.items)
        else:
            raise BadRequest(f"operations[{position}]: unknown operation type {op.type!r} "
                             "(supported: ack, push)")
    message_ids: list[str | None] | None = None
    if pushed and pushed[0]:
        side_items, side_ids = pushed
        message_ids = [None] * len(items) + (side_ids or [None] * len(side_items))
        layout.append(("push", len(items), len(side_items)))
        items.extend(side_items)
    leases = sorted({check_uuid("requiredLeases[]", lease) for lease in body.requiredLeases or []})
    return (acks.prepare(ack_list), pushes.prepare(items, producer_sub, message_ids), layout, leases,
            kv.prepare(body.kv or [], in_transaction=True), timers.prepare(body.timers or [], in_transaction=True))


async def execute(store: Store, prepared, sealer: Sealer) -> dict:
    layout = prepared[2]
    transaction_id = str(uuid.uuid4())
    flat_base = sum(count for _kind, _first, count in layout)  # where the kv results start
    try:
        kv_results, timer_results, ack_results, push_results, partition_ids = await store.atomically(
            lambda tx: _apply(tx, prepared, sealer))
    except Rollback as rollback:
        return {"transactionId": transaction_id, "success": False, "reason": rollback.reason,
                "error": rollback.error, "results": []}
    except kv.PreconditionLost as lost:
        return {"transactionId": transaction_id, **lost.answer(flat_base + lost.index), "results": []}
    results: list[dict] = []
    for kind, first, count in layout:
        if kind == "ack":
            outcome = ack_results[first]
            results.append({"index": len(results), "type": "ack", "success": True,
                            "transactionId": outcome["transactionId"], "error": None,
                            "leaseReleased": outcome["leaseReleased"], "dlq": outcome["dlq"]})
            continue
        for item in range(first, first + count):
            pushed = push_results[item]
            results.append({"index": len(results), "type": "push", "success": True,
                            "transactionId": pushed["transaction_id"], "messageId": pushed["message_id"],
                            "partitionId": partition_ids[item], "queueName": pushed["queueName"],
                            "status": pushed["status"]})
    for kind, rider in (("kv", kv_results), ("timer", timer_results)):
        base = len(results)
        results.extend({**result, "index": base + position, "opIndex": position, "type": kind}
                       for position, result in enumerate(rider))
    return {"transactionId": transaction_id, "success": True, "results": results}


async def _apply(tx: Store, prepared, sealer: Sealer) -> tuple:
    """The bundle inside its database transaction; a :class:`Rollback` (or a lost kv
    precondition) undoes all of it."""
    ack_batch, push_batch, _layout, leases, kv_ops, timer_ops = prepared
    kv_results = await kv.apply(tx, kv_ops)
    timer_results = await timers.apply(tx, timer_ops)
    if leases and len(await tx.messages.live_leases(leases)) != len(leases):
        raise Rollback("lease_expired", "a required lease is invalid or expired")
    ack_results = await acks.write(tx, ack_batch)
    refused = next((r for r in ack_results if not r["success"]), None)
    if refused is not None:
        raise Rollback("ack_rejected", refused["error"] or "acknowledgment rejected")
    try:
        push_results = await pushes.write(tx, push_batch, sealer)
    except QueueFull as full:
        raise Rollback("queue_full", str(full)) from None
    duplicate = next((r for r in push_results if r["status"] == "duplicate"), None)
    if duplicate is not None:
        raise Rollback("duplicate", f"transactionId {duplicate['transaction_id']} was already "
                                    "pushed to this partition")
    return kv_results, timer_results, ack_results, push_results, await _partition_ids(tx, push_batch)


async def _partition_ids(tx: Store, prepared: pushes.PreparedPush) -> list[str]:
    """Each pushed item's partition id, in item order (inside the transaction that created them),
    for its result: the push itself answers without it."""
    if not prepared.slots:
        return []
    rows = await tx.messages.partition_ids([queue for _column, _txid, queue in prepared.slots],
                                           [prepared.partitions[column] for column, _txid, _queue in prepared.slots])
    ids = dict(rows)
    return [ids[position] for position in range(1, len(prepared.slots) + 1)]
