"""Queen 2.x's timers: what queen-mq's ``client.timers``, ``client.timer(queue)`` and a
transaction's ``tx.timer(queue)`` ask.

A timer is a message scheduled to enter its queue ``delayMs`` from now (a delay in the past is
due at once): it waits under its (queue, timer key), where it can be rescheduled (the same
upsert as a schedule, with a new txn and its attempts back at 0) or cancelled, until the fire
(maintenance/timer_fire.py) pushes it and deletes it in one transaction. Its transactionId
(``txn``, minted by the client) and message id (minted here) are answered at schedule time and
are the delivered message's, so ``absent`` on a later cancel -- which may mean "already
delivered" -- can be checked against the queue. ``deliverAt`` means "not before".

The payload travels as base64 (zstd-compressed with ``payloadZstd``) and must be JSON, since it
becomes a message. Fields the broker owns (the producer, the message id, an absolute instant,
attempts) are refused, not ignored.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec
import uuid_utils

from reginamq.common import jsonlimits
from reginamq.common.errors import BadRequest, refuse
from reginamq.common.inflate import inflate
from reginamq.engine.names import check_name, check_queue_name
from reginamq.engine.op_batch import OpBatch
from reginamq.engine.push import MAX_PAYLOAD_BYTES
from reginamq.store import Store

MAX_OPS = {False: 256, True: 64}   # by whether the call rides in a transaction
MAX_DELAY_MS = 10 * 365 * 86_400_000
LIST_DEFAULT, LIST_MAX = 100, 1000
OPS = ("schedule", "reschedule", "cancel")
SERVER_OWNED = ("producerSub", "producer_sub", "messageId", "message_id", "tenant", "tenantId", "tenant_id",
                "deliverAt", "deliver_at", "delaySeconds", "delay_seconds", "attempts", "claimToken",
                "claim_token", "claimedUntil")


class TimerOp(msgspec.Struct, forbid_unknown_fields=False):
    op: Any = None
    queue: Any = None
    timerKey: Any = None
    payload: Any = None
    delayMs: Any = None
    txn: Any = None
    partition: Any = None
    payloadZstd: Any = False


def _payload(where: str, op: TimerOp) -> str:
    """The message's JSON bytes, base64 again for rq_timers_apply; refused unless JSON."""
    if not isinstance(op.payload, str):
        refuse("timer_bad_payload", f"{where}: payload is the message's bytes in base64")
    try:
        raw = base64.b64decode(op.payload, validate=True)
    except (binascii.Error, ValueError):
        refuse("timer_bad_payload", f"{where}: payload is not valid base64")
    if op.payloadZstd is True:
        raw = inflate(raw, None, MAX_PAYLOAD_BYTES)
    elif op.payloadZstd is not False:
        refuse("timer_bad_request", f"{where}: payloadZstd must be a boolean")
    if len(raw) > MAX_PAYLOAD_BYTES:
        refuse("timer_payload_too_large", f"{where}: the payload is larger than {MAX_PAYLOAD_BYTES} bytes")
    try:
        jsonlimits.check(raw)
    except BadRequest:
        refuse("timer_bad_payload", f"{where}: the payload must be one JSON document (it becomes a message)")
    return base64.b64encode(raw).decode()


def _prepare_op(index: int, raw: msgspec.Raw) -> dict:
    where = f"op at index {index}"
    try:
        fields = msgspec.json.decode(raw, type=dict[str, Any])
        op = msgspec.convert(fields, TimerOp)
    except (msgspec.ValidationError, msgspec.DecodeError):
        refuse("timer_bad_request", f"{where} is not an object")
    owned = next((name for name in fields if name in SERVER_OWNED or name.startswith("_")), None)
    if owned is not None:
        refuse("timer_server_owned_field", f"{where}: {owned} is the broker's, not an input")
    if op.op not in OPS:
        refuse("timer_unknown_op", f"{where}: unknown operation {op.op!r} (one of {', '.join(OPS)})")
    try:
        queue = check_queue_name(op.queue)
        key = check_name("timerKey", op.timerKey)
        txn = None if op.txn is None else check_name("txn", op.txn)
        partition = "Default" if op.partition is None else check_name("partition", op.partition)
    except BadRequest as error:
        refuse("timer_bad_request", f"{where}: {error}")
    normal: dict[str, Any] = {"i": index, "op": op.op, "queue": queue, "key": key, "txn": txn}
    if op.op == "cancel":
        return normal
    if txn is None:
        refuse("timer_bad_request", f"{where}: {op.op} needs txn, the delivered message's transactionId")
    delay = op.delayMs
    if isinstance(delay, bool) or not isinstance(delay, int | float) or abs(delay) > MAX_DELAY_MS:
        refuse("timer_bad_delay", f"{where}: delayMs is a number of milliseconds within ±{MAX_DELAY_MS}")
    return {**normal, "partition": partition, "payload": _payload(where, op), "delayMs": delay,
            "messageId": str(uuid_utils.uuid7())}


def prepare(operations: list[msgspec.Raw], *, in_transaction: bool = False) -> OpBatch:
    """Validate a call's ops (all before anything runs); they apply in the order given."""
    if len(operations) > MAX_OPS[in_transaction]:
        refuse("timer_too_many_ops", f"{len(operations)} ops in one call, the ceiling is {MAX_OPS[in_transaction]}")
    ops = [_prepare_op(index, raw) for index, raw in enumerate(operations)]
    return OpBatch(msgspec.json.encode(ops), len(ops))


async def apply(store: Store, prepared: OpBatch) -> list[dict]:
    """Run the ops in ``store``'s transaction (one of :meth:`Store.atomically`: the call's own,
    or the transaction's that carries the rider); one result per op, in order."""
    if not prepared.count:
        return []
    return msgspec.json.decode(await store.timers.apply(prepared.ops.decode()))


def cancel_op(queue: str, key: str, txn: str | None) -> OpBatch:
    """DELETE /api/v1/timers/:queue/:timerKey as the one op it is."""
    return prepare([msgspec.Raw(msgspec.json.encode({"op": "cancel", "queue": queue, "timerKey": key, "txn": txn}))])


async def peek(store: Store, queue: str, key: str) -> bytes:
    return (await store.timers.peek(check_queue_name(queue), check_name("timerKey", key))).encode()


async def page(store: Store, queue: str, after: str | None, limit: int) -> bytes:
    return (await store.timers.page(check_queue_name(queue), after, limit)).encode()
