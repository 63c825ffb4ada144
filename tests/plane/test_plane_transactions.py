"""Transactions: acks and pushes commit together or not at all, over HTTP and through the
library (ported from tests/conformance/test_client_transactions.py)."""

from __future__ import annotations

import time
import uuid

from reginamq.library import PushItem, QueueOptions
from tests.conftest import lease_runs_out, outlast_lease
from tests.plane.helpers import data, pop_now, pop_until


async def test_ack_and_push_commit_together(plane, queue, queue2, group):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, [{"step": 1}])
    [message] = await pop_now(plane, queue, group=group)
    popped_at = time.monotonic()
    trace = str(uuid.uuid4())

    result = await plane.transaction(acks=[message], pushes=[PushItem(queue=queue2, partition="out",
                                                                      data={"step": 2}, trace_id=trace)])

    assert result.success and result.reason is None and result.transaction_id
    assert [type(r).__name__ for r in result.results] == ["TxAckResult", "TxPushResult"]
    assert all(r.success for r in result.results)
    [pushed] = await pop_now(plane, queue2, partition="out")
    assert (pushed.data, pushed.partition, pushed.trace_id) == ({"step": 2}, "out", trace)
    assert pushed.id == result.results[1].message_id
    await outlast_lease(popped_at, 1)  # were the ack not applied, it would be redelivered now
    assert await pop_now(plane, queue, group=group) == []


async def test_acking_a_batch_and_pushing_many(plane, queue, queue2):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, [0, 1, 2])
    messages = await pop_now(plane, queue)
    popped_at = time.monotonic()

    result = await plane.transaction(acks=messages, pushes=[PushItem(queue=queue2, partition="p", data=m.data * 10)
                                                           for m in messages],
                                     required_leases=[messages[0].lease_id])

    assert result.success and len(result.results) == 6
    assert data(await pop_now(plane, queue2, partition="p")) == [0, 10, 20]
    await outlast_lease(popped_at, 1)
    assert await pop_now(plane, queue) == []


async def test_expired_lease_rolls_everything_back(plane, queue, queue2, group, db):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, ["slow"])
    [message] = await pop_now(plane, queue, group=group)
    await lease_runs_out(db, message.lease_id)  # while "processing"

    result = await plane.transaction(acks=[message], pushes=[PushItem(queue=queue2, partition="p", data="no")])

    assert not result.success and result.reason in ("lease_expired", "ack_rejected") and result.error
    assert await pop_now(plane, queue2, partition="p") == []
    [again] = await pop_now(plane, queue, group=group)
    assert (again.transaction_id, again.delivery_attempt) == (message.transaction_id, 2)


async def test_a_lease_taken_over_rolls_back_and_the_new_holder_commits(plane, queue, queue2):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, ["contended"])
    [stale] = await pop_now(plane, queue)
    [current] = await pop_until(plane, queue)  # the lease ran out: another consumer holds it now
    assert current.lease_id != stale.lease_id

    refused = await plane.transaction(acks=[stale], pushes=[PushItem(queue=queue2, data="zombie")])
    accepted = await plane.transaction(acks=[current], pushes=[PushItem(queue=queue2, data="winner")])

    assert not refused.success and accepted.success
    assert data(await pop_now(plane, queue2)) == ["winner"]


async def test_a_duplicate_push_rolls_the_whole_transaction_back(plane, queue, queue2):
    await plane.configure(queue, QueueOptions(lease_time=1))
    tx = f"once-{uuid.uuid4()}"
    await plane.push(queue2, ["original"], transaction_ids=[tx])
    await plane.push(queue, ["work"])
    [message] = await pop_now(plane, queue)

    result = await plane.transaction(acks=[message], pushes=[PushItem(queue=queue2, data="fresh"),
                                                            PushItem(queue=queue2, data="again", transaction_id=tx)])

    assert not result.success and result.reason == "duplicate"
    assert data(await pop_now(plane, queue2)) == ["original"]
    [again] = await pop_until(plane, queue)  # the ack was rolled back too
    assert again.transaction_id == message.transaction_id


async def test_required_lease_that_ran_out_rolls_a_push_only_transaction_back(plane, queue, queue2, db):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, ["held"])
    [message] = await pop_now(plane, queue)
    await lease_runs_out(db, message.lease_id)

    result = await plane.transaction(pushes=[PushItem(queue=queue2, data="guarded")],
                                     required_leases=[message.lease_id])

    assert not result.success and result.reason == "lease_expired"
    assert await pop_now(plane, queue2) == []
