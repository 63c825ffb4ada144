"""Validation parity: one table of bad calls, each made over HTTP and through the library; both
must refuse it with the same exception class, ``.status``, ``.error`` and ``.extra`` (the engine's
one validated path, engine/operations.py, is behind both doors), and change nothing.

A few inputs cannot be said the same way through both doors and are left out: a query string
has no bool or null for an integer (``batch=true`` is refused by the HTTP parser with its own
text before the engine sees it), and a pop's route cannot name a partition without its queue
or a queue together with a namespace. Those are refused by each door on its own terms, tested
in tests/integration (HTTP) and tests/library (the library).
"""

from __future__ import annotations

import uuid

import pytest

from reginamq.library import Ack, PushItem, ReginaError
from tests.plane.helpers import pop_now

NOT_A_UUID = "not-a-uuid"
SOME_UUID = str(uuid.UUID(int=12345))
TOO_LONG = "n" * 256


def ack_of(partition_id=SOME_UUID, lease_id=SOME_UUID, status="completed", transaction_id="t"):
    return Ack(transaction_id=transaction_id, partition_id=partition_id, lease_id=lease_id, status=status)


# name -> a call on (plane, queue) that must be refused
REFUSALS = {
    # names
    "push: empty queue name": lambda p, q: p.push("", [1]),
    "push: a slash in the queue name": lambda p, q: p.push(q + "/x", [1]),
    "push: a queue name over 255 characters": lambda p, q: p.push(TOO_LONG, [1]),
    "push: a control character in the partition": lambda p, q: p.push(q, [1], partition="a\x01b"),
    "push: an empty partition": lambda p, q: p.push(q, [1], partition=""),
    "push: an empty transactionId": lambda p, q: p.push(q, [1], transaction_ids=[""]),
    "push: a transactionId over 255 characters": lambda p, q: p.push(q, [1], transaction_ids=[TOO_LONG]),
    "pop: a group with a control character": lambda p, q: p.pop(q, group="g\x00"),
    "pop: a partition name over 255 characters": lambda p, q: p.pop(q, partition=TOO_LONG),
    "configure: a slash in the queue name": lambda p, q: p.configure(q + "/x"),
    "configure: an empty namespace": lambda p, q: p.configure(q, namespace=""),
    "dlq: a group over 255 characters": lambda p, q: p.dlq(q, group=TOO_LONG),
    "dlq purge: a slash in the queue name": lambda p, q: p.dlq_purge(q + "/x"),
    # bounds
    "pop: batch 0": lambda p, q: p.pop(q, batch=0),
    "pop: batch over 10 000": lambda p, q: p.pop(q, batch=10_001),
    "pop: partitions 0": lambda p, q: p.pop(q, partitions=0),
    "pop: partitions over 1 000": lambda p, q: p.pop(q, partitions=1_001),
    "pop: a negative timeout": lambda p, q: p.pop(q, wait=True, timeout_ms=-1),
    "pop: a timeout over an hour": lambda p, q: p.pop(q, wait=True, timeout_ms=3_600_001),
    "pop: negative leaseSeconds": lambda p, q: p.pop(q, lease_seconds=-1),
    "pop: an unknown subscription mode": lambda p, q: p.pop(q, group="g", subscription_mode="sometimes"),
    "renew: zero seconds": lambda p, q: p.renew(SOME_UUID, 0),
    "renew: over ten years": lambda p, q: p.renew(SOME_UUID, 10 * 365 * 24 * 3600 + 1),
    "dlq: limit 0": lambda p, q: p.dlq(q, limit=0),
    "dlq: limit over 1 000": lambda p, q: p.dlq(q, limit=1_001),
    "dlq: a negative offset": lambda p, q: p.dlq(q, offset=-1),
    "configure: leaseTime 0": lambda p, q: p.configure(q, {"leaseTime": 0}),
    "configure: a negative retryLimit": lambda p, q: p.configure(q, {"retryLimit": -1}),
    "configure: minPopWaitTime over a minute": lambda p, q: p.configure(q, {"minPopWaitTime": 60_001}),
    # bools, strings and nulls where an integer or a bool belongs (said alike in a JSON body)
    "renew: a bool for seconds": lambda p, q: p.renew(SOME_UUID, True),
    "renew: null for seconds": lambda p, q: p.renew(SOME_UUID, None),
    "configure: a bool for leaseTime": lambda p, q: p.configure(q, {"leaseTime": True}),
    "configure: a string for retryLimit": lambda p, q: p.configure(q, {"retryLimit": "3"}),
    "configure: a fraction for leaseTime": lambda p, q: p.configure(q, {"leaseTime": 1.5}),
    "configure: an integer for deadLetterQueue": lambda p, q: p.configure(q, {"deadLetterQueue": 1}),
    # ids the broker minted are UUIDs
    "renew: a lease id that is not a UUID": lambda p, q: p.renew(NOT_A_UUID),
    "ack: a partitionId that is not a UUID": lambda p, q: p.ack(ack_of(partition_id=NOT_A_UUID)),
    "ack: a leaseId that is not a UUID": lambda p, q: p.ack(ack_of(lease_id=NOT_A_UUID)),
    "ack: an empty transactionId": lambda p, q: p.ack(ack_of(transaction_id="")),
    "transaction: an ack with a bad partitionId": lambda p, q: p.transaction(acks=[ack_of(partition_id=NOT_A_UUID)]),
    "transaction: a required lease that is not a UUID": lambda p, q: p.transaction(
        pushes=[PushItem(queue=q, data=1)], required_leases=[NOT_A_UUID]),
    "transaction: nothing in it": lambda p, q: p.transaction(),
    "dlq replay: an id that is not a UUID": lambda p, q: p.dlq_replay(NOT_A_UUID),
    "dlq replay: an unknown id": lambda p, q: p.dlq_replay(SOME_UUID),
    # oversize calls and payloads
    "push: over 10 000 items": lambda p, q: p.push(q, [0] * 10_001),
    "push: a payload over 4 MiB": lambda p, q: p.push(q, ["x" * (4 * 1024 * 1024)]),
    "ack: over 10 000 acks": lambda p, q: p.ack([ack_of()] * 10_001),
    "transaction: over 10 000 operations": lambda p, q: p.transaction(acks=[ack_of()] * 10_001),
    "push: a number out of range (1e400)": lambda p, q: p.push_items([PushItem(queue=q, raw=b"1e400")]),
    "push: a payload nested too deep": lambda p, q: p.push_items([PushItem(queue=q, raw=b"[" * 2000 + b"]" * 2000)]),
    # what cannot be asked together, or without what it needs
    "pop: conflation with autoAck": lambda p, q: p.pop(q, group="g", conflation=True, auto_ack=True),
    "pop: conflation in queue mode": lambda p, q: p.pop(q, conflation=True),
    "pop: neither queue nor namespace nor task": lambda p, q: p.pop(),
    "configure: an unknown queue option": lambda p, q: p.configure(q, {"leaseTime": 5, "colour": "blue"}),
    "configure: encryption without a key on the broker": lambda p, q: p.configure(q, {"encryptionEnabled": True}),
    "configure: an unknown mode": lambda p, q: p.configure(q, {}, mode="upsert"),
}


async def refusal(call) -> ReginaError:
    with pytest.raises(ReginaError) as refused:
        await call
    return refused.value


@pytest.mark.parametrize("name", list(REFUSALS))
async def test_both_doors_refuse_alike(name, http_plane, plane_library, queue):
    call = REFUSALS[name]

    over_http = await refusal(call(http_plane, queue))
    in_process = await refusal(call(plane_library, queue))

    assert type(over_http) is type(in_process), name
    assert (over_http.status, over_http.error, dict(over_http.extra)) == \
        (in_process.status, in_process.error, dict(in_process.extra)), name
    assert 400 <= over_http.status < 500 and over_http.error
    assert await pop_now(plane_library, queue) == []  # nothing of it was written


async def test_a_payload_that_is_not_json_is_refused_alike_but_for_the_byte_position(http_plane, plane_library,
                                                                                     queue):
    """The parser's position is into what each door parsed: the whole HTTP body, or the
    library's payloads; the rest of the refusal is the same."""
    def call(plane):
        return plane.push_items([PushItem(queue=queue, raw=b"{nope")])

    over_http, in_process = await refusal(call(http_plane)), await refusal(call(plane_library))

    assert (type(over_http), over_http.status) == (type(in_process), in_process.status) == (type(in_process), 400)
    assert over_http.error.split(" (byte ")[0] == in_process.error.split(" (byte ")[0]
    assert over_http.error.startswith("malformed JSON")
