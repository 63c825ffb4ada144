"""Leases: expiry redelivers, queen.renew() keeps a lease alive."""

from __future__ import annotations

import asyncio
import time

from tests.conformance.helpers import create_queue, pop_now, pop_until
from tests.conftest import lease_runs_out, outlast_lease


async def test_lease_expiry_redelivers_the_batch(queen, queue):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push([{"data": i} for i in range(3)])
    first = await pop_now(queen, queue)
    assert await pop_now(queen, queue) == []  # leased

    again = await pop_until(queen, queue)  # once the lease ran out

    assert [m["transactionId"] for m in again] == [m["transactionId"] for m in first]
    assert {m["deliveryAttempt"] for m in again} == {2}
    assert again[0]["leaseId"] != first[0]["leaseId"]


async def test_lease_expiry_does_not_charge_the_retry_budget(queen, queue, db):
    await create_queue(queen, queue, lease_time=1, retry_limit=0)
    await queen.queue(queue).push({"data": "slow"})
    [message] = await pop_now(queen, queue)
    for attempt in (1, 2, 3):
        assert message["deliveryAttempt"] == attempt
        [message] = await pop_until(queen, queue)  # once the lease ran out
    assert (await queen.ack(message, True))["success"] is True


async def test_renew_keeps_a_short_lease_alive(queen, queue):
    await create_queue(queen, queue, lease_time=2)
    await queen.queue(queue).push({"data": "long job"})
    [message] = await pop_now(queen, queue)
    popped_at = time.monotonic()

    renewed = await queen.renew(message)  # POST /lease/:id/extend, no body: 60 s

    assert renewed["success"] is True
    assert renewed["leaseId"] == message["leaseId"]
    assert renewed["newExpiresAt"]
    assert "error" not in renewed

    await outlast_lease(popped_at, 2)  # the original lease is over
    assert await pop_now(queen, queue) == []  # nobody else gets it

    acked = await queen.ack(message, True)
    assert acked["success"] is True


async def test_renew_by_lease_id_string(queen, queue):
    await create_queue(queen, queue, lease_time=2)
    await queen.queue(queue).push({"data": 1})
    [message] = await pop_now(queen, queue)
    popped_at = time.monotonic()

    renewed = await queen.renew(message["leaseId"])

    assert renewed["success"] is True
    await outlast_lease(popped_at, 2)
    assert await pop_now(queen, queue) == []
    assert (await queen.ack(message, True))["success"] is True


async def test_renew_a_batch_renews_its_one_lease(queen, queue):
    await create_queue(queen, queue, lease_time=2)
    await queen.queue(queue).push([{"data": i} for i in range(4)])
    messages = await pop_now(queen, queue)
    popped_at = time.monotonic()
    assert len(messages) == 4

    results = await queen.renew(messages)

    assert isinstance(results, list) and len(results) == 1  # one lease for the whole batch
    assert results[0]["success"] is True
    await outlast_lease(popped_at, 2)
    assert await pop_now(queen, queue) == []
    assert (await queen.ack(messages, True))["success"] is True


async def test_renew_after_expiry_reports_failure(queen, queue, db):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push({"data": 1})
    [message] = await pop_now(queen, queue)
    await lease_runs_out(db, message["leaseId"])

    renewed = await queen.renew(message)

    assert renewed["success"] is False
    assert renewed["error"]
    [again] = await pop_now(queen, queue)  # it was not resurrected: another consumer gets it
    assert again["transactionId"] == message["transactionId"]


async def test_renew_after_ack_reports_failure(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).push({"data": 1})
    [message] = await pop_now(queen, queue)
    assert (await queen.ack(message, True))["success"] is True

    renewed = await queen.renew(message)

    assert renewed["success"] is False


async def test_consume_with_renew_lease_outlives_the_lease(queen, queue):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push({"data": "slow"})
    attempts = []

    async def handler(message):
        attempts.append(message["deliveryAttempt"])
        await outlast_lease(time.monotonic(), 1)  # renewed every 300 ms meanwhile
        assert await pop_now(queen, queue) == []  # still ours after the first lease would have run out

    await asyncio.wait_for(
        queen.queue(queue).batch(1).limit(1).renew_lease(True, 300).consume(handler), 30
    )

    assert attempts == [1]
    await outlast_lease(time.monotonic(), 1)
    assert await pop_now(queen, queue) == []  # acked, not redelivered
