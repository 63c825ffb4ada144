"""The binary push decoder on damaged input: whatever bytes arrive, it returns items or raises
BadRequest (a 4xx), never another exception (which the app would answer with a 5xx)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from queen.http.push_binary import PushBatch, encode_push_binary, encode_push_frames, encode_transaction_frames

from reginamq.common.errors import BadRequest
from reginamq.http import binary_push

LIMIT = 1 << 20
BATCHES = [PushBatch("q", "p", [b'{"a":1}', b"[1,2]", b'"s"'], ["t1", "", "t3"]),
           PushBatch("q.x", "other", [b"null"], ["t4"])]
VALID = {
    "plain": encode_push_binary(BATCHES),
    "zstd": encode_push_binary(BATCHES, compress=True),
    "counts": encode_push_binary(BATCHES, counts=True),
    "frames": encode_push_frames(BATCHES),
    "transaction": encode_transaction_frames(b'{"operations":[]}', BATCHES),
}


def decode(body: bytes):
    if body[:4] == b"QTB1":
        return binary_push.decode_transaction(body, LIMIT)[1]
    return binary_push.decode_push(body, LIMIT)


def test_the_clients_bodies_decode_to_its_items():
    for name, body in VALID.items():
        decoded = decode(body)
        assert [(i.queue, i.partition, bytes(i.payload)) for i in decoded.items] == \
            [(b.queue, b.partition, p) for b in BATCHES for p in b.payloads], name
        assert decoded.counts is (name == "counts")
        if name in ("frames", "transaction"):  # the client minted ids and transactionIds
            assert len(set(decoded.message_ids)) == 4 and all(i.transactionId for i in decoded.items)
        else:
            assert decoded.message_ids is None
            assert [i.transactionId for i in decoded.items] == ["t1", None, "t3", "t4"]


@st.composite
def damaged(draw):
    body = bytearray(VALID[draw(st.sampled_from(sorted(VALID)))])
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(body) - 1))
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        if kind == "flip":
            body[at] = draw(st.integers(0, 255))
        elif kind == "cut":
            del body[at:]
        elif kind == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del body[at:at + draw(st.integers(1, 8))]
        if not body:
            break
    return bytes(body)


@settings(max_examples=400, deadline=None)
@given(body=damaged())
def test_a_damaged_body_is_decoded_or_refused_with_a_4xx(body):
    try:
        decoded = decode(body)
    except BadRequest as error:
        assert 400 <= error.status < 500
        return
    assert all(isinstance(bytes(i.payload), bytes) for i in decoded.items)
