"""The binary push body on the wire (Content-Type application/x-queen-push), built with the
official client's own encoder (queen/http/push_binary.py): the counts answer, and every way a
body can be wrong answered with a 4xx that writes nothing."""

from __future__ import annotations

import struct

import pytest
import zstandard
from queen.http.push_binary import PushBatch, encode_push_binary, encode_push_frames

from tests.integration.helpers import pop_messages, push, queue_count, unique

BINARY = {"Content-Type": "application/x-queen-push"}
MAX_BODY = 8 * 1024 * 1024  # the broker's default max_body_bytes


async def send(http, body: bytes, path: str = "/api/v1/push"):
    return await http.post(path, content=body, headers=BINARY)


async def test_flag_2_answers_the_counts(http, queue):
    await push(http, queue, "first", txids=["known"])
    body = encode_push_binary([PushBatch(queue, "Default", [b'"again"', b'{"new":1}'], ["known", ""])], counts=True)
    response = await send(http, body)
    assert response.status_code == 201, response.text
    assert response.json() == {"count": 2, "queued": 1, "duplicate": 1, "error": 0}
    assert [m["data"] for m in await pop_messages(http, queue, batch=10)] == ["first", {"new": 1}]


async def test_an_empty_transaction_id_is_minted_by_the_broker(http, queue):
    body = encode_push_binary([PushBatch(queue, "p", [b"1"], [""])])
    [answer] = (await send(http, body)).json()
    assert answer["transaction_id"] == answer["message_id"]


async def test_a_compressed_body_pops_back(http, queue):
    body = encode_push_binary([PushBatch(queue, "p", [b'{"z":%d}' % n for n in range(50)])], compress=True)
    assert body[4] & 1  # the zstd flag
    assert len((await send(http, body)).json()) == 50
    assert [m["data"]["z"] for m in await pop_messages(http, queue, "p", batch=100)] == list(range(50))


def corrupt_frames_body(queue: str, frames: bytes, count: int) -> bytes:
    name = queue.encode()
    z = zstandard.ZstdCompressor(write_content_size=True).compress(frames)
    return (b"QPB1\x08" + struct.pack("<I", 1) + struct.pack("<H", len(name)) + name + struct.pack("<H", 1) + b"p"
            + struct.pack("<I", count) + struct.pack("<I", len(z)) + z)


def frame(payload: bytes, kind: int = 0, txid: bytes = b"t") -> bytes:
    return struct.pack("<I", 1 + 16 + 2 + len(txid) + len(payload)) + bytes([kind]) + bytes(16) \
        + struct.pack("<H", len(txid)) + txid + payload


BAD_BODIES = {
    "no magic": lambda q: b'{"items": []}',
    "unknown flag": lambda q: b"QPB1\x40" + encode_push_binary([PushBatch(q, "p", [b"1"])])[5:],
    "truncated": lambda q: encode_push_binary([PushBatch(q, "p", [b'{"a":1}'])])[:-3],
    "trailing bytes": lambda q: encode_push_binary([PushBatch(q, "p", [b"1"])]) + b"\0",
    "payload not JSON": lambda q: encode_push_binary([PushBatch(q, "p", [b"1", b"{nope"])]),
    "two JSON documents in one payload": lambda q: encode_push_binary([PushBatch(q, "p", [b"1,2"])]),
    "empty payload": lambda q: encode_push_binary([PushBatch(q, "p", [b""])]),
    "payload not UTF-8": lambda q: encode_push_binary([PushBatch(q, "p", [b'"\xff"'])]),
    "partition name not UTF-8": lambda q: encode_push_binary([PushBatch(q, "p", [b"1"])]).replace(b"\x01\x00p",
                                                                                                  b"\x01\x00\xff"),
    "invalid queue name": lambda q: encode_push_binary([PushBatch(q + "/x", "p", [b"1"])]),
    "empty partition name": lambda q: encode_push_binary([PushBatch(q, "", [b"1"])]),
    "garbage instead of zstd": lambda q: b"QPB1\x01" + struct.pack("<I", 10) + b"not a zstd frame",
    "size header disagrees": lambda q: (lambda b: b[:5] + struct.pack("<I", struct.unpack("<I", b[5:9])[0] + 1)
                                        + b[9:])(encode_push_binary([PushBatch(q, "p", [b"1"])], compress=True)),
    "frame of unknown kind": lambda q: corrupt_frames_body(q, frame(b"1", kind=3), 1),
    "fewer frames than counted": lambda q: corrupt_frames_body(q, frame(b"1"), 2),
    "frame shorter than its header": lambda q: corrupt_frames_body(
        q, struct.pack("<I", 5) + bytes(17) + struct.pack("<H", 1) + b"t1", 1),
}


@pytest.mark.parametrize("case", list(BAD_BODIES))
async def test_a_bad_body_is_a_400_and_writes_nothing(http, db, case):
    queue = unique("bin")
    response = await send(http, BAD_BODIES[case](queue))
    assert response.status_code == 400, (case, response.status_code, response.text)
    assert response.json()["error"]
    assert await queue_count(db, queue) == 0 and await queue_count(db, queue + "/x") == 0


@pytest.mark.parametrize("frames", [False, True], ids=["whole body", "one group"])
async def test_a_body_inflating_past_the_size_limit_is_a_413_before_it_is_inflated(http, db, frames):
    queue = unique("bin")
    big = b"0" * (MAX_BODY + 1)  # one JSON number, compressed to a few hundred bytes
    if frames:
        body = encode_push_frames([PushBatch(queue, "p", [big])])
    else:
        raw = encode_push_binary([PushBatch(queue, "p", [big])])[5:]
        body = b"QPB1\x01" + struct.pack("<I", len(raw)) + zstandard.ZstdCompressor().compress(raw)
    assert len(body) < 10_000
    response = await send(http, body)
    assert response.status_code == 413, response.text
    assert await queue_count(db, queue) == 0


async def test_too_many_items_is_a_413_before_they_are_read(http, db):
    queue = unique("bin")
    name = queue.encode()
    body = (b"QPB1\x00" + struct.pack("<I", 1) + struct.pack("<H", len(name)) + name + struct.pack("<H", 1) + b"p"
            + struct.pack("<I", 10_001))
    response = await send(http, body)
    assert response.status_code == 413, response.text
    assert await queue_count(db, queue) == 0


@pytest.mark.parametrize(("rider", "code"), [("kv", "kv_bad_namespace"), ("timers", "timer_unknown_op")])
async def test_a_transaction_whose_rider_cannot_run_is_refused_not_ignored(http, db, rider, code):
    queue = unique("bin")
    response = await http.post("/api/v1/transaction", json={
        "operations": [{"type": "push", "items": [{"queue": queue, "payload": 1}]}],
        rider: [{"op": "get", "key": "k"}]})
    assert response.status_code == 400, response.text
    assert response.json()["error"] == code
    assert await queue_count(db, queue) == 0
