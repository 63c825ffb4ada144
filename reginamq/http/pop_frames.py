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
opened if sealed, each split into its fields where their keys stand. A partition's
number is the one its id carries (names.partition_number), which acks and every other route
taking a partition id read back. JSON is answered instead for a partition whose id carries no
number, and for a traceId that is not a canonical UUID (a frame holds 16 bytes).
"""

from __future__ import annotations

import binascii
import itertools
import struct
from datetime import UTC, datetime, timedelta

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


# A stored fragment (push.py) is '"id":"<36>","transactionId":<JSON string>,"traceId":<JSON
# string or null>,"data":<payload>,"producerSub":<JSON string or null>'. Its fields are found by
# their keys: a JSON string cannot hold one unescaped, and the producerSub key is the last one
# (rindex), whatever the payload holds.
_ID = slice(6, 42)
_TXID_AT = 60
_TRACE_KEY = b',"traceId":'
_DATA_KEY = b',"data":'
_SUB_KEY = b',"producerSub":'
_NULL = b"null"
_HYPHENS = (8, 13, 18, 23)


def _text(value: str) -> bytes:
    raw = value.encode()
    return _U16.pack(len(raw)) + raw


def _string(json_string: bytes) -> bytes:
    """A JSON string's text (unescaped only when it has escapes)."""
    text = json_string[1:-1]
    return orjson.loads(json_string).encode() if b"\\" in text else text


def _trace(json_string: bytes) -> bytes:
    """A traceId's 16 bytes; :class:`NotFramable` unless it is a UUID in canonical form."""
    text = json_string[1:-1]
    if len(text) != 36 or any(text[at] != 0x2D for at in _HYPHENS) or not text.islower():
        raise NotFramable("traceId")
    try:
        return binascii.unhexlify(text.replace(b"-", b""))
    except binascii.Error:
        raise NotFramable("traceId") from None


def _frames(fragments, reveal) -> bytes:
    """The frames of a record's messages, as one flat join of their parts."""
    parts: list[bytes] = []
    add = parts.append
    for sealed in fragments:
        fragment = reveal(sealed)
        trace_at = fragment.index(_TRACE_KEY, _TXID_AT)
        data_at = fragment.index(_DATA_KEY, trace_at)
        sub_at = fragment.rindex(_SUB_KEY)
        txid = _string(fragment[_TXID_AT:trace_at])
        payload = fragment[data_at + len(_DATA_KEY):sub_at]
        size = 19 + len(txid) + len(payload)  # flags, message id, the transactionId's length
        flags = 0
        trace = sub = None
        if not fragment.startswith(_NULL, trace_at + len(_TRACE_KEY)):
            trace = _trace(fragment[trace_at + len(_TRACE_KEY):data_at])
            flags, size = _FLAG_TRACE, size + 16
        if not fragment.startswith(_NULL, sub_at + len(_SUB_KEY)):
            sub = _string(fragment[sub_at + len(_SUB_KEY):])
            flags, size = flags | _FLAG_PRODUCER, size + 2 + len(sub)
        add(_FRAME_HEAD.pack(size, flags))
        add(binascii.unhexlify(fragment[_ID].replace(b"-", b"")))
        if trace is not None:
            add(trace)
        add(_U16.pack(len(txid)))
        add(txid)
        if sub is not None:
            add(_U16.pack(len(sub)))
            add(sub)
        add(payload)
    return b"".join(parts)


def render(popped: Popped, group: str, reveal) -> bytes:
    """The framed answer of a pop that delivered messages; :class:`NotFramable` if it cannot be."""
    rows = popped.rows
    claims: list[bytes] = []
    for partition_id, claimed in itertools.groupby(rows, key=lambda row: row[1]):  # a claim's rows follow each other
        number = partition_number(partition_id)
        if number is None:
            raise NotFramable(partition_id)
        slices = list(claimed)
        first, last = slices[0], slices[-1]
        records = [
            _RECORD_HEAD.pack(row[10], _micros(row[3]), len(row[5]), 0, len(frames)) + frames
            for row in slices
            for frames in (_frames(row[5], reveal),)
        ]
        claims.append(_CLAIM_HEAD.pack(number) + _text(first[2])
                      + _CLAIM_SPAN.pack(first[10], last[10] + len(last[5]) - 1, first[4], len(records))
                      + b"".join(records))
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
    at = len(_MAGIC_V1)
    own_length = _U32.unpack_from(answer, at)[0]
    at += 4
    result = orjson.loads(answer[at:at + own_length]) if own_length else {}
    at += own_length
    queue, at = _read_text(answer, at)
    lease_id, at = _read_text(answer, at)
    group, at = _read_text(answer, at)
    claims = _U32.unpack_from(answer, at)[0]
    at += 4
    messages = []
    for _ in range(claims):
        number = _CLAIM_HEAD.unpack_from(answer, at)[0]
        partition, at = _read_text(answer, at + _CLAIM_HEAD.size)
        first, last, attempt, records = _CLAIM_SPAN.unpack_from(answer, at)
        at += _CLAIM_SPAN.size
        partition_id = str(number)
        for _ in range(records):
            base, created_us, count, _codec, length = _RECORD_HEAD.unpack_from(answer, at)
            at += _RECORD_HEAD.size
            end_of_record = at + length
            for position in range(count):
                size, flags = _FRAME_HEAD.unpack_from(answer, at)
                end, cursor = at + 4 + size, at + _FRAME_HEAD.size
                message_id = _uuid_text(answer[cursor:cursor + 16])
                cursor += 16
                trace = None
                if flags & _FLAG_TRACE:
                    trace, cursor = _uuid_text(answer[cursor:cursor + 16]), cursor + 16
                txid, cursor = _read_text(answer, cursor)
                producer = None
                if flags & _FLAG_PRODUCER:
                    producer, cursor = _read_text(answer, cursor)
                if first <= base + position <= last:
                    messages.append({"id": message_id, "transactionId": txid, "traceId": trace,
                                     "data": orjson.loads(answer[cursor:end]), "producerSub": producer,
                                     "createdAt": created_us, "partitionId": partition_id,
                                     "partition": partition, "leaseId": lease_id, "consumerGroup": group,
                                     "deliveryAttempt": attempt, "offset": base + position})
                at = end
            at = end_of_record
    return {"success": True, "queue": queue, "leaseId": lease_id, "consumerGroup": group, **result,
            "messages": messages}


def _read_text(answer: bytes, at: int) -> tuple[str, int]:
    length = _U16.unpack_from(answer, at)[0]
    return answer[at + 2:at + 2 + length].decode(), at + 2 + length


def _uuid_text(raw: bytes) -> str:
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
