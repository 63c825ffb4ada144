"""The framed pop answer: a pop's messages as binary frames (queen-mq's ``framed_pop``).

A client that asks with ``frames=true`` may get this answer (``application/x-queen-pop``)
instead of the JSON one; queen-mq tells the two apart by their first bytes, so the broker
answers JSON whenever a pop holds something the frames cannot carry exactly. All integers
little-endian, strings a u16 length and UTF-8::

    "QPF1" | u8 1 | u32 length, the answer's own keys as JSON (conflation, autopilot)
    queue | leaseId | consumerGroup | u32 claims
    per claim:  u64 partition number | partition | u64 first offset | u64 last offset
                | u32 deliveryAttempt | u32 records
    per record: u64 first offset | i64 createdAt (us) | u32 count | u8 codec (0: raw) | u32 length | frames
    per frame:  u32 length | u8 flags (1 trace id, 2 producerSub) | 16 bytes message id
                | [16 bytes trace id] | transactionId | [producerSub] | payload

A claim is one partition, a record one stored segment's slice (the rows of rq_pop), so the
answer is built from what the JSON answer is built from: the fragments stored at push time,
opened if sealed, split into their fields by one msgspec decode per record. A partition's
number is the one its id carries (names.partition_number), which acks and every other route
taking a partition id read back. JSON is answered instead for a partition created before ids
carried numbers, and for a traceId that is not a canonical UUID (a frame holds 16 bytes).
"""

from __future__ import annotations

import struct
import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import orjson

from reginamq.engine.names import partition_number
from reginamq.engine.pop import Popped, extras

CONTENT_TYPE = "application/x-queen-pop"
_MAGIC_V1 = b"QPF1\x01"
_FLAG_TRACE = 1
_FLAG_PRODUCER = 2
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_FRAME_HEAD = struct.Struct("<IB")
_CLAIM_HEAD = struct.Struct("<Q")
_CLAIM_SPAN = struct.Struct("<QQII")
_RECORD_HEAD = struct.Struct("<QqIBI")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


class NotFramable(Exception):
    """The pop holds something the frames cannot carry exactly: answer JSON."""


class _Fragment(msgspec.Struct):
    """A stored message fragment's fields (push.py renders them)."""

    id: str
    transactionId: str
    traceId: str | None
    data: msgspec.Raw
    producerSub: str | None


_FRAGMENTS = msgspec.json.Decoder(list[_Fragment])


def _text(value: str) -> bytes:
    raw = value.encode()
    return _U16.pack(len(raw)) + raw


def _uuid_bytes(value: str) -> bytes:
    parsed = uuid.UUID(value)
    if str(parsed) != value:
        raise NotFramable(value)
    return parsed.bytes


def _frames(fragments: list[bytes], reveal) -> bytes:
    try:
        decoded = _FRAGMENTS.decode(b"[{" + b"},{".join([reveal(fragment) for fragment in fragments]) + b"}]")
    except msgspec.DecodeError as error:  # never for fragments the broker stored
        raise NotFramable(str(error)) from None
    out = []
    for message in decoded:
        flags = 0
        parts = [uuid.UUID(message.id).bytes]
        if message.traceId is not None:
            try:
                parts.append(_uuid_bytes(message.traceId))
            except ValueError:
                raise NotFramable("traceId") from None
            flags |= _FLAG_TRACE
        parts.append(_text(message.transactionId))
        if message.producerSub is not None:
            parts.append(_text(message.producerSub))
            flags |= _FLAG_PRODUCER
        parts.append(message.data)
        body = b"".join(parts)
        out.append(_FRAME_HEAD.pack(len(body) + 1, flags) + body)
    return b"".join(out)


def render(popped: Popped, group: str, reveal) -> bytes:
    """The framed answer of a pop that delivered messages; :class:`NotFramable` if it cannot be."""
    rows = popped.rows
    claims: list[bytes] = []
    start = 0
    while start < len(rows):
        partition_id = rows[start][1]
        end = start
        while end + 1 < len(rows) and rows[end + 1][1] == partition_id:
            end += 1
        number = partition_number(partition_id)
        if number is None:
            raise NotFramable(partition_id)
        first, last = rows[start], rows[end]
        records = [
            _RECORD_HEAD.pack(row[10], _micros(row[3]), len(row[5]), 0, len(frames)) + frames
            for row in rows[start:end + 1]
            for frames in (_frames(row[5], reveal),)
        ]
        claims.append(_CLAIM_HEAD.pack(number) + _text(first[2])
                      + _CLAIM_SPAN.pack(first[10], last[10] + len(last[5]) - 1, first[4], len(records))
                      + b"".join(records))
        start = end + 1
    own_keys = extras(popped)
    own = orjson.dumps(own_keys) if own_keys else b""
    return b"".join((_MAGIC_V1, _U32.pack(len(own)), own, _text(rows[0][0]), _text(popped.lease_id), _text(group),
                     _U32.pack(len(claims)), *claims))


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // _MICROSECOND


def is_framed(answer: bytes) -> bool:
    return answer[:4] == _MAGIC_V1[:4]


def decode(answer: bytes) -> dict:
    """A framed answer as the dict its JSON twin parses to (for ``reginamq bench --framed-pop``
    and the tests): the answer's own keys, and each message's fields with ``data`` parsed."""
    reader = memoryview(answer)
    at = len(_MAGIC_V1)

    def take(size: int) -> memoryview:
        nonlocal at
        piece = reader[at:at + size]
        at += size
        return piece

    def number(layout: struct.Struct):
        return layout.unpack(take(layout.size))[0]

    def text() -> str:
        return bytes(take(number(_U16))).decode()

    own_length = number(_U32)
    result = orjson.loads(bytes(take(own_length))) if own_length else {}
    queue, lease_id, group = text(), text(), text()
    messages = []
    for _ in range(number(_U32)):
        partition_number_ = number(_CLAIM_HEAD)
        partition = text()
        first, last, attempt, records = _CLAIM_SPAN.unpack(take(_CLAIM_SPAN.size))
        for _ in range(records):
            base, created_us, count, _codec, length = _RECORD_HEAD.unpack(take(_RECORD_HEAD.size))
            frames, offset = bytes(take(length)), 0
            for position in range(count):
                size, flags = _FRAME_HEAD.unpack_from(frames, offset)
                body = memoryview(frames)[offset + _FRAME_HEAD.size:offset + 4 + size]
                offset += 4 + size
                message_id, cursor = str(uuid.UUID(bytes=bytes(body[:16]))), 16
                trace = None
                if flags & _FLAG_TRACE:
                    trace, cursor = str(uuid.UUID(bytes=bytes(body[cursor:cursor + 16]))), cursor + 16
                length_ = _U16.unpack_from(body, cursor)[0]
                txid, cursor = bytes(body[cursor + 2:cursor + 2 + length_]).decode(), cursor + 2 + length_
                producer = None
                if flags & _FLAG_PRODUCER:
                    length_ = _U16.unpack_from(body, cursor)[0]
                    producer = bytes(body[cursor + 2:cursor + 2 + length_]).decode()
                    cursor += 2 + length_
                if first <= base + position <= last:
                    messages.append({"id": message_id, "transactionId": txid, "traceId": trace,
                                     "data": orjson.loads(body[cursor:]), "producerSub": producer,
                                     "createdAt": created_us, "partitionId": str(partition_number_),
                                     "partition": partition, "leaseId": lease_id, "consumerGroup": group,
                                     "deliveryAttempt": attempt, "offset": base + position})
    return {"success": True, "queue": queue, "leaseId": lease_id, "consumerGroup": group, **result,
            "messages": messages}
