"""Between the library's types and the engine's: payloads into push items, popped rows into
:class:`~reginamq.library.types.Message`.

A push item's payload becomes JSON bytes once (``data`` encoded by msgspec, ``raw`` taken as
it is) and goes to the engine as :class:`msgspec.Raw`, as an HTTP body's payload does. A pop
answer is built from the same stored fragments HTTP joins into its answer (engine/pop.py:
``"id":..,"transactionId":..,"traceId":..,"data":<payload>,"producerSub":..``), each decoded
once into its fields, the payload kept as the bytes that were pushed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import msgspec

from reginamq.common.errors import BadRequest
from reginamq.engine import push as pushes
from reginamq.engine.names import QUEUE_MODE
from reginamq.engine.pop import Popped, PopRequest, extras
from reginamq.library.types import AutopilotAdvice, Message, PopResult, PushItem

_encode = msgspec.json.Encoder().encode


class _Fragment(msgspec.Struct):
    """The fields a message's stored fragment holds (engine/push.py renders it)."""

    id: str
    transactionId: str
    traceId: str | None
    data: msgspec.Raw
    producerSub: str | None


_fragment = msgspec.json.Decoder(_Fragment).decode


def push_items(items: Sequence[PushItem]) -> list[pushes.PushItem]:
    """The engine's push items; a payload that cannot be JSON is refused (400) by its index."""
    out = []
    for position, item in enumerate(items):
        if item.raw is not None:
            if item.data is not msgspec.UNSET:
                raise BadRequest(f"items[{position}]: give data or raw, not both")
            raw = bytes(item.raw)
        elif item.data is msgspec.UNSET:
            raise BadRequest(f"items[{position}]: data or raw is required")
        else:
            try:
                raw = _encode(item.data)
            except (TypeError, msgspec.EncodeError) as error:
                raise BadRequest(f"items[{position}]: data cannot be encoded as JSON: {error}") from None
        out.append(pushes.PushItem(queue=item.queue, payload=msgspec.Raw(raw), partition=item.partition,
                                   transactionId=item.transaction_id, traceId=item.trace_id))
    return out


def pop_result(popped: Popped, request: PopRequest, reveal: Callable[[bytes], bytes]) -> PopResult:
    """A pop's delivery as HTTP would answer it, decoded; ``reveal`` opens sealed fragments."""
    group = None if request.group == QUEUE_MODE else request.group
    extra = extras(popped)
    advice = extra.get("autopilot")
    autopilot = None if advice is None else AutopilotAdvice(partitions=advice["partitions"], batch=advice["batch"],
                                                            wait_ms=advice["waitMs"])
    conflation, conflict = bool(extra.get("conflation")), bool(extra.get("conflationConflict"))
    rows = popped.rows
    if not rows:
        return PopResult(queue=request.queue or "", consumer_group=group, conflation=conflation,
                         conflation_conflict=conflict, autopilot=autopilot)
    lease = popped.lease_id or None
    messages: list[Message] = []
    claimed: set[str] = set()
    for row in rows:
        queue, partition_id, partition, created_at, attempt = row[0], row[1], row[2], row[3], row[4]
        claimed.add(partition_id)
        messages.extend(_message(_fragment(b"{" + reveal(fragment) + b"}"), queue, partition, partition_id,
                                 created_at, attempt, lease, group) for fragment in row[5])
    first = rows[0]
    return PopResult(queue=first[0], partition=first[2], partition_id=first[1], lease_id=lease,
                     consumer_group=group, partitions_claimed=len(claimed), messages=messages,
                     conflation=conflation, conflation_conflict=conflict, autopilot=autopilot)


def _message(stored: _Fragment, queue: str, partition: str, partition_id: str, created_at: datetime, attempt: int,
             lease: str | None, group: str | None) -> Message:
    return Message(id=stored.id, transaction_id=stored.transactionId, trace_id=stored.traceId, payload=stored.data,
                   producer_sub=stored.producerSub, created_at=created_at, queue=queue, partition=partition,
                   partition_id=str(partition_id), lease_id=lease, consumer_group=group, delivery_attempt=attempt)
