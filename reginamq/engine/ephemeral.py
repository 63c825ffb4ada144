"""Queen 2.x's ephemeral queues: what queen-mq's ``client.ephemeral`` asks of /api/v1/ephemeral/*.

A queue whose contents may be lost, in exchange for being cheap: the messages live in UNLOGGED
PostgreSQL tables (store/sql/019_ephemeral.sql), written without the write-ahead log and emptied
by a database crash, and shared by every broker process and node, so any of them serves any
queue. A queue's declared options are durable; a queue is also created by the first push or
pop that names it, with the defaults below.

Consumption follows the group, as on durable queues: each group has its own cursor over each
ring (one per partition), so groups fan out and the consumers of one group share its messages.
A message handed out is leased until acknowledged; an expired lease or a ``failed``/``retry``
ack hands it out again with ``attempts`` grown, until ``retryLimit``, after which it is dropped
and counted (there is no dead-letter queue). ``autoAck`` hands out without a lease. The bounds
(``maxLength``, ``maxBytes``) refuse a push with 429 (policy ``reject``) or drop the oldest
messages (``dropOldest``); ``ttlSeconds`` drops messages older than that.

A message id is ``<ring epoch>:<seq>:<partition>``: an ack for a message of a ring that has
since been reset, deleted or lost answers ``stale``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime
from typing import Any

import msgspec
import orjson

from reginamq.common.errors import BadRequest
from reginamq.engine.meter import Meter
from reginamq.engine.names import check_name, group_or_queue_mode
from reginamq.engine.push import MAX_PAYLOAD_BYTES
from reginamq.engine.waiters import EPHEMERAL_CHANNEL, Waiters, announce, ephemeral_key
from reginamq.store import Store

DEFAULTS = {"maxBytes": 64 * 1024 * 1024, "maxLength": 100_000, "policy": "reject", "ttlSeconds": 0,
            "leaseSeconds": 30, "retryLimit": 3, "windowBuffer": {"ms": 0, "count": 0}}
DEFAULTS_JSON = orjson.dumps(DEFAULTS).decode()
POLICIES = ("reject", "dropOldest")
MAX_ITEMS = 10_000
MAX_BATCH = 10_000
MAX_TIMEOUT_MS = 300_000
MAX_OPTION = 2**31 - 1
DEFAULT_PARTITION = "Default"
RECHECK_SECONDS = 1.0  # a waiting pop looks again at least this often, should a wake-up be lost
IDLE_SECONDS = 600  # an empty ring without a push this long is collected


class Message(msgspec.Struct):
    payload: msgspec.Raw = msgspec.field(default_factory=lambda: msgspec.Raw(b""))


class PushBody(msgspec.Struct):
    queue: str
    messages: list[Message]
    partition: str | None = None


class AckItem(msgspec.Struct):
    id: str
    status: str | None = None
    error: str | None = None  # accepted, not kept: there is no dead-letter queue


class AckBody(msgspec.Struct):
    queue: str
    acks: list[AckItem]
    group: str | None = None


class ConfigureBody(msgspec.Struct):
    queue: str
    options: dict[str, Any] | None = None


class QueueBody(msgspec.Struct):
    queue: str


def refuse(message: str, status: int = 400, code: str = "ephemeral_bad_request"):
    raise BadRequest(message, status=status, extra={"code": code})


def name(kind: str, value: Any) -> str:
    try:
        return check_name(kind, value)
    except BadRequest as error:
        refuse(str(error))


def options(given: dict[str, Any] | None) -> dict[str, Any]:
    """The declared options, checked against the closed list (an unknown one is refused, not
    ignored: a typo would otherwise leave a default in force unseen)."""
    given = given or {}
    unknown = sorted(set(given) - set(DEFAULTS))
    if unknown:
        refuse(f"unknown option(s) {', '.join(unknown)}; the ephemeral options are {', '.join(DEFAULTS)}")
    checked: dict[str, Any] = {}
    for key, value in given.items():
        if value is None:
            continue
        if key == "policy":
            if value not in POLICIES:
                refuse('policy must be "reject" or "dropOldest"')
        elif key == "windowBuffer":
            if not isinstance(value, dict) or set(value) - {"ms", "count"}:
                refuse("windowBuffer must be an object {ms?, count?}")
            value = {field: _whole(f"windowBuffer.{field}", value.get(field, 0)) for field in ("ms", "count")}
        else:
            value = _whole(key, value)
        checked[key] = value
    return checked


def _whole(key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_OPTION:
        refuse(f"{key} must be an integer from 0 to {MAX_OPTION}")
    return value


def message_id(message: dict) -> bytes:
    return orjson.dumps(f"{message['epoch']}:{message['seq']}:{message['partition']}")


def parse_id(value: str) -> tuple[str, str, int] | None:
    """(partition, epoch, seq) of a message id, or None when it is not one of ours."""
    epoch, _, rest = value.partition(":")
    seq, _, partition = rest.partition(":")
    try:
        return partition, str(uuid.UUID(epoch)), int(seq)
    except ValueError:
        return None


async def push(store: Store, body: PushBody) -> int:
    """How many were pushed; 429 ``queue_full`` when the bounds and the policy refuse them all."""
    queue = name("queue", body.queue)
    partition = name("partition", body.partition or DEFAULT_PARTITION)
    if len(body.messages) > MAX_ITEMS:
        refuse(f"at most {MAX_ITEMS} messages per push")
    payloads = [bytes(message.payload) for message in body.messages]
    if any(not payload for payload in payloads):
        refuse("every message needs a payload")
    if any(len(payload) > MAX_PAYLOAD_BYTES for payload in payloads):
        refuse(f"a payload is larger than {MAX_PAYLOAD_BYTES} bytes", status=413)
    if not payloads:
        return 0

    async def commit(tx: Store) -> int:
        pushed = await tx.ephemeral.push(queue, partition, [p.decode() for p in payloads], [len(p) for p in payloads],
                                         DEFAULTS_JSON)
        if pushed < 0:
            refuse("the ephemeral queue is at its maxBytes/maxLength and its policy is reject", 429, "queue_full")
        await announce(tx, [queue], EPHEMERAL_CHANNEL)
        return pushed

    return await store.atomically(commit)


async def pop(store: Store, waiters: Waiters, meter: Meter, queue: str, partition: str | None, group: str | None,
              batch: int, wait: bool, timeout_ms: int, auto_ack: bool) -> bytes:
    """200's body ``{queue, messages: [{id, partition, attempts, payload}]}``, an empty list when
    nothing came within the wait. A waiting pop holds no connection; a push wakes it, and with a
    ``windowBuffer`` it waits up to ``ms`` after its first message for ``count`` of them. The pop
    counts in worker-metrics as a durable one does, its lag from its oldest message's push."""
    queue = name("queue", queue)
    partition = None if partition is None else name("partition", partition)
    group = group_or_queue_mode(None if group is None else name("group", group))
    deadline = time.monotonic() + timeout_ms / 1000
    held: list[dict] = []
    oldest: datetime | None = None
    first_at: float | None = None
    while True:
        parked = waiters.park(ephemeral_key(queue), group) if wait else None
        try:
            wanted = batch - len(held)
            answer = msgspec.json.decode(await store.ephemeral.pop(queue, partition, group, wanted, auto_ack,
                                                                    DEFAULTS_JSON))
            held += answer["messages"]
            if answer.get("oldest") is not None:  # absent from a function an older node laid out
                pushed = datetime.fromisoformat(answer["oldest"])
                oldest = pushed if oldest is None else min(oldest, pushed)
            if held and first_at is None:
                first_at = time.monotonic()
            window_ms, window_count = answer["windowMs"], answer["windowCount"]
            until = deadline
            if first_at is not None:
                if not window_count or len(held) >= min(window_count, batch) or not window_ms:
                    break
                until = min(deadline, first_at + window_ms / 1000)
            remaining = until - time.monotonic()
            if parked is None or remaining <= 0 or waiters.closing:
                break
            await asyncio.wait({parked}, timeout=min(remaining, RECHECK_SECONDS))
        finally:
            if parked is not None:
                waiters.unpark(ephemeral_key(queue), group, parked)
    if held:
        meter.popped(queue, len(held), oldest)
    else:
        meter.empty_pop()
    listed = b",".join(b'{"id":' + message_id(m) + b',"partition":' + orjson.dumps(m["partition"])
                       + b',"attempts":' + str(m["attempts"]).encode() + b',"payload":' + m["payload"].encode() + b"}"
                       for m in held)
    return b'{"queue":' + orjson.dumps(queue) + b',"messages":[' + listed + b"]}"


async def ack(store: Store, body: AckBody) -> dict:
    """``{results: [{id, outcome}]}``: acked, redelivered, stale or unknown, one per id."""
    queue = name("queue", body.queue)
    group = group_or_queue_mode(None if body.group is None else name("group", body.group))
    if len(body.acks) > MAX_ITEMS:
        refuse(f"at most {MAX_ITEMS} acks per call")
    parsed = [parse_id(item.id) for item in body.acks]
    known = [(position, found) for position, found in enumerate(parsed) if found is not None]
    outcomes = ["unknown"] * len(parsed)
    if known:

        async def commit(tx: Store) -> list[str]:
            answered = await tx.ephemeral.ack(
                queue, group, [found[0] for _, found in known], [found[1] for _, found in known],
                [found[2] for _, found in known],
                [body.acks[position].status not in ("failed", "retry", "nack") for position, _ in known])
            if "redelivered" in answered:
                await announce(tx, [queue], EPHEMERAL_CHANNEL)
            return answered

        for (position, _), outcome in zip(known, await store.atomically(commit), strict=True):
            outcomes[position] = outcome
    return {"results": [{"id": item.id, "outcome": outcome} for item, outcome in zip(body.acks, outcomes, strict=True)]}


async def configure(store: Store, body: ConfigureBody) -> bytes:
    queue = name("queue", body.queue)
    stored = await store.ephemeral.declare(queue, orjson.dumps(options(body.options)).decode())
    return (b'{"configured":true,"queue":' + orjson.dumps(queue) + b',"tier":"declared","options":'
            + stored.encode() + b"}")


async def reset(store: Store, queue: str) -> dict:
    queue = name("queue", queue)
    return {"queue": queue, "dropped": await store.ephemeral.reset(queue)}


async def delete(store: Store, queue: str) -> dict:
    queue = name("queue", queue)
    row = await store.ephemeral.delete(queue)
    return {"queue": queue, "deleted": row["deleted"], "declared": row["declared"]}


async def depth(store: Store, queue: str, group: str | None) -> bytes | None:
    queue = name("queue", queue)
    group = None if group is None else name("group", group)
    answer = await store.ephemeral.depth(queue, group, DEFAULTS_JSON)
    return None if answer is None else answer.encode()


async def listing(store: Store) -> bytes:
    return (await store.ephemeral.listing(DEFAULTS_JSON)).encode()
