"""The binary push body: queen-mq's ``binary_push`` option (``queen/http/push_binary.py``).

A client that turns it on sends ``Content-Type: application/x-queen-push`` and, instead of a
JSON document, the items grouped by partition with length-prefixed names, transactionIds and
payloads, optionally zstd-compressed (flag 1), or each group's messages framed and compressed
once by the client, with message ids it minted (flag 8, its ``push_compression`` option). Flag
2 asks for the counts instead of one answer object per item. The transaction body ``QTB1``
carries a transaction's pushes the same way behind a JSON head holding its other operations.

Decoding ends where the JSON body's does: :class:`reginamq.engine.push.PushItem` values, so
validation, deduplication, fusion, the spool and the answer are the JSON push's own. The
payloads arrive as raw bytes; each must be one strict JSON document (jsonlimits.check), since
every pop splices it into its answer as it is.

Limits: the decompressed body counts against the same ``max_body_bytes`` as a body sent as it
is, and a zstd frame that declares (or turns out to hold) more is refused before it is
inflated; the item count against MAX_ITEMS_PER_PUSH, before any item is built.
"""

from __future__ import annotations

import struct
import uuid

import msgspec

from reginamq.common import jsonlimits
from reginamq.common.errors import BadRequest
from reginamq.common.inflate import inflate
from reginamq.engine.push import MAX_ITEMS_PER_PUSH, PushItem

CONTENT_TYPE = "application/x-queen-push"
PUSH_MAGIC = b"QPB1"
TRANSACTION_MAGIC = b"QTB1"
FLAG_ZSTD = 1
FLAG_COUNTS = 2
FLAG_TRANSACTION_IDS = 4
FLAG_FRAMES = 8
PUSH_FLAGS = FLAG_ZSTD | FLAG_COUNTS | FLAG_TRANSACTION_IDS | FLAG_FRAMES
TRANSACTION_FLAGS = FLAG_COUNTS
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


class Decoded(msgspec.Struct):
    items: list[PushItem]
    # the client-minted message id of each item (frames only), else None
    message_ids: list[str] | None
    counts: bool


class _Reader:
    """Bounds-checked little-endian reads; every shortfall is a 400 naming the byte."""

    def __init__(self, data: bytes, what: str):
        self.data = memoryview(data)
        self.at = 0
        self.what = what

    def take(self, size: int) -> memoryview:
        end = self.at + size
        if end > len(self.data):
            raise BadRequest(f"{self.what}: truncated at byte {self.at} (wanted {size} more)")
        chunk = self.data[self.at:end]
        self.at = end
        return chunk

    def u16(self) -> int:
        return _U16.unpack(self.take(2))[0]

    def u32(self) -> int:
        return _U32.unpack(self.take(4))[0]

    def text16(self, field: str) -> str:
        raw = self.take(self.u16())
        try:
            return str(raw, "utf-8")
        except UnicodeDecodeError:
            raise BadRequest(f"{self.what}: {field} at byte {self.at - len(raw)} is not UTF-8") from None

    def done(self) -> None:
        if self.at != len(self.data):
            raise BadRequest(f"{self.what}: {len(self.data) - self.at} bytes after the last group")


def sent(content_type: str | None) -> bool:
    return content_type is not None and content_type.split(";")[0].strip().lower() == CONTENT_TYPE


def push_counts(answer: list[dict]) -> dict:
    """Flag 2's answer to a push: how many items, and how each ended (an item never fails on
    its own here: a push is refused whole, with an error status)."""
    statuses = [item["status"] for item in answer]
    counts = {"count": len(statuses), "queued": statuses.count("queued"),
              "duplicate": statuses.count("duplicate"), "error": 0}
    if "buffered" in statuses:
        counts["buffered"] = statuses.count("buffered")
    return counts


def transaction_counts(answer: dict) -> dict:
    """Flag 2's answer to a transaction: the pushes' and acks' results counted, not listed (the
    kv rider's results stay listed: each is a verdict)."""
    if not answer.get("success"):
        return answer
    results = answer["results"]
    return {**answer, "results": [r for r in results if r["type"] == "kv"],
            "pushed": sum(r["type"] == "push" for r in results), "duplicate": 0,
            "acked": sum(r["type"] == "ack" for r in results)}


def encode_push(queue: str, partition: str, txids: list[str], payloads: list[bytes], *, counts: bool) -> bytes:
    """One partition's messages as a ``QPB1`` body with their transactionIds (flag 4), as a
    client sends it (``reginamq bench --binary-push``); ``counts`` sets flag 2."""
    parts = [PUSH_MAGIC, bytes([FLAG_TRANSACTION_IDS | (FLAG_COUNTS if counts else 0)]), _U32.pack(1),
             _text16(queue), _text16(partition), _U32.pack(len(payloads))]
    for txid, payload in zip(txids, payloads, strict=True):
        parts += (_text16(txid), _U32.pack(len(payload)), payload)
    return b"".join(parts)


def _text16(text: str) -> bytes:
    data = text.encode()
    return _U16.pack(len(data)) + data


def decode_push(body: bytes, max_bytes: int) -> Decoded:
    """A ``QPB1`` body as push items; BadRequest (400, or 413 over a limit) when it is not one."""
    flags, reader = _open(body, PUSH_MAGIC, PUSH_FLAGS, "push")
    if flags & FLAG_ZSTD:
        raw_len = reader.u32()
        reader = _Reader(inflate(bytes(reader.take(len(body) - reader.at)), raw_len, max_bytes), reader.what)
    decoded = Decoded([], [] if flags & FLAG_FRAMES else None, bool(flags & FLAG_COUNTS))
    _read_groups(reader, decoded, flags, max_bytes)
    reader.done()
    return decoded


def decode_transaction(body: bytes, max_bytes: int) -> tuple[bytes, Decoded]:
    """A ``QTB1`` body: its JSON head (the transaction without its pushes) and the pushes."""
    flags, reader = _open(body, TRANSACTION_MAGIC, TRANSACTION_FLAGS, "transaction")
    head = bytes(reader.take(reader.u32()))
    decoded = Decoded([], [], bool(flags & FLAG_COUNTS))
    _read_groups(reader, decoded, FLAG_FRAMES, max_bytes)
    reader.done()
    return head, decoded


def _open(body: bytes, magic: bytes, known_flags: int, kind: str) -> tuple[int, _Reader]:
    """The flags byte after ``magic``, and a reader placed after it."""
    if body[:4] != magic or len(body) < 5:
        raise BadRequest(f"a {CONTENT_TYPE} {kind} body starts with {magic.decode()} and a flags byte")
    flags = body[4]
    if flags & ~known_flags:
        raise BadRequest(f"binary {kind} body: unknown flags {flags:#04x}")
    reader = _Reader(body, f"binary {kind} body")
    reader.at = 5
    return flags, reader


def _read_groups(reader: _Reader, decoded: Decoded, flags: int, max_bytes: int) -> None:
    budget = max_bytes  # what the inflated groups may still add up to
    for _ in range(reader.u32()):
        queue = reader.text16("a queue name")
        partition = reader.text16("a partition name")
        count = reader.u32()
        if len(decoded.items) + count > MAX_ITEMS_PER_PUSH:
            raise BadRequest(f"a push carries at most {MAX_ITEMS_PER_PUSH} items", status=413)
        if flags & FLAG_FRAMES:
            budget -= _read_frames(reader, queue, partition, count, decoded, budget)
        else:
            _read_plain(reader, queue, partition, count, decoded, bool(flags & FLAG_TRANSACTION_IDS))


def _read_plain(reader: _Reader, queue: str, partition: str, count: int, decoded: Decoded,
                with_transaction_ids: bool) -> None:
    for _ in range(count):
        txid = reader.text16("a transactionId") if with_transaction_ids else ""
        _append(decoded, queue, partition, txid, bytes(reader.take(reader.u32())))


def _read_frames(reader: _Reader, queue: str, partition: str, count: int, decoded: Decoded,
                 budget: int) -> int:
    """One group's zstd frame of ``count`` stored-message frames (flag 8), inflated within
    ``budget`` bytes; returns how many it took."""
    frames = _Reader(inflate(bytes(reader.take(reader.u32())), None, budget),
                     f"binary push body: the frames of {queue}/{partition}")
    for _ in range(count):
        length = frames.u32()
        start = frames.at
        if frames.take(1)[0] != 0:
            raise BadRequest(f"{frames.what}: frame at byte {start - 4} is of an unknown kind")
        message_id = str(uuid.UUID(bytes=bytes(frames.take(16))))
        txid = frames.text16("a transactionId")
        payload_length = length - (frames.at - start)
        if payload_length < 0:
            raise BadRequest(f"{frames.what}: frame at byte {start - 4} is shorter than its header")
        _append(decoded, queue, partition, txid, bytes(frames.take(payload_length)))
        assert decoded.message_ids is not None
        decoded.message_ids.append(message_id)
    frames.done()
    return len(frames.data)


def _append(decoded: Decoded, queue: str, partition: str, txid: str, payload: bytes) -> None:
    """One item; its payload must be a JSON document on its own (an empty transactionId: none)."""
    try:
        jsonlimits.check(payload)
    except BadRequest as error:
        raise BadRequest(f"items[{len(decoded.items)}]: payload: {error}") from None
    decoded.items.append(PushItem(queue=queue, partition=partition, payload=msgspec.Raw(payload),
                                  transactionId=txid or None))

