"""Push: turn items into pre-rendered message fragments and write them in one call.

Each message is rendered once, here, into the bytes every later pop sends for it (id,
transactionId, traceId, data, producerSub); a pop only appends the few per-delivery fields.
The payload is never decoded: msgspec hands us its raw JSON bytes.
"""

from __future__ import annotations

import msgspec
import orjson
import uuid_utils

from reginamq.common.errors import BadRequest, QueueFull, Unavailable
from reginamq.engine import options as queue_options
from reginamq.engine.encryption import Sealer
from reginamq.engine.names import check_name, check_queue_name
from reginamq.store import Store
from reginamq.store.messages import Unsealed

MAX_ITEMS_PER_PUSH = 10_000
MAX_PAYLOAD_BYTES = 4 * 1024 * 1024
NEW_QUEUE_OPTIONS = orjson.dumps(queue_options.PUSH_CREATED_DEFAULTS).decode()


class PushItem(msgspec.Struct, forbid_unknown_fields=False):
    queue: str
    payload: msgspec.Raw
    partition: str = "Default"
    transactionId: str | None = None
    traceId: str | None = None


class PushBody(msgspec.Struct):
    items: list[PushItem]


class PreparedPush(msgspec.Struct):
    """Columns for rq_push, plus what the answer needs for items the database never sees."""

    queues: list[str]
    partitions: list[str]
    txids: list[str]
    message_ids: list[str]
    fragments: list[bytes]
    # per request item: (index into the columns above, transactionId, queue)
    slots: list[tuple[int, str, str]]


# What rq_push takes: the columns several requests' calls are made of (push fusion); the
# slots stay each request's own.
COLUMNS = ("queues", "partitions", "txids", "message_ids", "fragments")


def prepare(items: list[PushItem], producer_sub: str | None = None,
            message_ids: list[str | None] | None = None) -> PreparedPush:
    """Validate, mint ids (unless the client minted them: ``message_ids``, one an item or None,
    from the binary push body's frames), render fragments; the first of in-request duplicates
    wins.

    This loop is the broker's largest per-message Python cost, so names (which repeat within
    a request) are checked once each, and error labels are built only when there is an error.
    """
    if len(items) > MAX_ITEMS_PER_PUSH:
        raise BadRequest(f"a push carries at most {MAX_ITEMS_PER_PUSH} items", status=413)
    sub = orjson.dumps(producer_sub)
    prepared = PreparedPush([], [], [], [], [], [])
    seen: dict[tuple[str, str, str], int] = {}
    queues: set[str] = set()
    partitions: set[str] = set()
    for position, item in enumerate(items):
        try:
            queue, partition = item.queue, item.partition
            if queue not in queues:
                queues.add(check_queue_name(queue))
            if partition not in partitions:
                partitions.add(check_name("partition", partition))
            raw = bytes(item.payload)
            if len(raw) > MAX_PAYLOAD_BYTES:
                raise BadRequest(f"payload is larger than {MAX_PAYLOAD_BYTES} bytes", status=413)
            message_id = (message_ids and message_ids[position]) or str(uuid_utils.uuid7())
            txid = message_id if item.transactionId is None else check_name("transactionId", item.transactionId)
            trace = b"null" if item.traceId is None else orjson.dumps(check_name("traceId", item.traceId))
        except BadRequest as error:
            raise BadRequest(f"items[{position}]: {error}", status=error.status) from None
        key = (queue, partition, txid)
        first = seen.get(key)
        if first is not None:
            prepared.slots.append((first, txid, queue))
            continue
        column = seen[key] = len(prepared.queues)
        prepared.slots.append((column, txid, queue))
        prepared.queues.append(queue)
        prepared.partitions.append(partition)
        prepared.txids.append(txid)
        prepared.message_ids.append(message_id)
        prepared.fragments.append(b"".join((
            b'"id":"', message_id.encode(), b'","transactionId":', orjson.dumps(txid),
            b',"traceId":', trace, b',"data":', raw, b',"producerSub":', sub,
        )))
    return prepared


async def execute(store: Store, prepared: PreparedPush, sealer: Sealer,
                  enforce_max_size: bool = True) -> dict[int, str]:
    """Write the push (the store announces what it wrote: after the commit, or inside the
    caller's transaction); returns {column index: original message id} for duplicates.

    Fragments of encrypted queues are sealed first. ``enforce_max_size`` is off only for the
    spool's replay: those messages were already acknowledged to their producers, so a queue
    that filled up meanwhile cannot refuse them."""
    if not prepared.queues:
        return {}
    seal(prepared, sealer, await sealer.encrypted_queues(store))
    try:
        rows = await _push(store, prepared, enforce_max_size)
    except Unsealed as refused:
        # A queue was encrypted since this process last looked: look again, seal, and (outside
        # a transaction, where the refused call left nothing behind) write again.
        if not refused.retry:
            sealer.forget()
            raise Unavailable("a queue of this push was just encrypted; send it again") from None
        seal(prepared, sealer, await sealer.encrypted_queues(store, fresh=True))
        rows = await _push(store, prepared, enforce_max_size)
    return {row[0]: row[1] for row in rows if row[0] is not None}


def pairs(prepared: PreparedPush) -> tuple[list[str], list[str], list[int]]:
    """The distinct (queue, partition) pairs of a push and each item's pair (1-based), so that
    rq_push looks every name up once per pair, not once per message."""
    index: dict[tuple[str, str], int] = {}
    groups = [index.setdefault(pair, len(index) + 1)
              for pair in zip(prepared.queues, prepared.partitions, strict=True)]
    return [queue for queue, _ in index], [partition for _, partition in index], groups


async def _push(store: Store, prepared: PreparedPush, enforce_max_size: bool):
    queues, partitions, groups = pairs(prepared)
    return await store.messages.push(queues, partitions, groups, prepared.txids, prepared.message_ids,
                                     prepared.fragments, NEW_QUEUE_OPTIONS, enforce_max_size)


def seal(prepared: PreparedPush, sealer: Sealer, encrypted: frozenset[str]) -> None:
    """Seal, in place, the fragments bound for encrypted queues."""
    if encrypted:
        prepared.fragments = [sealer.seal(fragment) if queue in encrypted else fragment
                              for queue, fragment in zip(prepared.queues, prepared.fragments, strict=True)]


def refusal(prepared: PreparedPush, error: QueueFull) -> QueueFull:
    """The queue-full error with the answer per request item: which were refused and why,
    and that the others were not written either (a push is all or nothing)."""
    full = {entry["queue"]: entry for entry in error.full}
    items = []
    for index, (_column, txid, queue) in enumerate(prepared.slots):
        entry = full.get(queue)
        items.append({"index": index, "transaction_id": txid, "queueName": queue,
                      "status": "rejected" if entry else "not_written",
                      "error": (f"queue {queue} is full: {entry['size']} unconsumed of maxSize {entry['maxSize']}"
                                if entry else "not written: another item of this push was refused")})
    error.extra = {**error.extra, "queues": error.full, "items": items}
    return error


def answer(prepared: PreparedPush, duplicates: dict[int, str]) -> list[dict]:
    """The per-item answer, aligned with the request's items."""
    out = []
    seen: set[int] = set()
    for index, (column, txid, queue) in enumerate(prepared.slots):
        original = duplicates.get(column)
        status = "duplicate" if original is not None or column in seen else "queued"
        seen.add(column)
        out.append({"index": index, "message_id": original or prepared.message_ids[column],
                    "transaction_id": txid, "queueName": queue, "status": status})
    return out


async def write(store: Store, prepared: PreparedPush, sealer: Sealer) -> list[dict]:
    """Push through ``store`` (inside its transaction, if it has one) and build the answer."""
    return answer(prepared, await execute(store, prepared, sealer))


def keys(prepared: PreparedPush) -> set[tuple[str, str, str]]:
    return set(zip(prepared.queues, prepared.partitions, prepared.txids, strict=True))
