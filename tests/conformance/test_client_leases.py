"""Leases: expiry redelivers, queen.renew() keeps a lease alive."""

from __future__ import annotations

import asyncio

from tests.conformance.helpers import create_queue, pop_now


async def test_lease_expiry_redelivers_the_batch(queen, queue):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push([{"data": i} for i in range(3)])
    first = await pop_now(queen, queue)
    assert await pop_now(queen, queue) == []  # leased

    await asyncio.sleep(1.5)
    again = await pop_now(queen, queue)

    assert [m["transactionId"] for m in again] == [m["transactionId"] for m in first]
    assert {m["deliveryAttempt"] for m in again} == {2}
    assert again[0]["leaseId"] != first[0]["leaseId"]


async def test_lease_expiry_does_not_charge_the_retry_budget(queen, queue, db):
    await create_queue(queen, queue, lease_time=1, retry_limit=0)
    await queen.queue(queue).push({"data": "slow"})
    for attempt in (1, 2, 3):
        [message] = await pop_now(queen, queue)
        assert message["deliveryAttempt"] == attempt
        await asyncio.sleep(1.3)

    [message] = await pop_now(queen, queue)
    assert (await queen.ack(message, True))["success"] is True


async def test_renew_keeps_a_short_lease_alive(queen, queue):
    await create_queue(queen, queue, lease_time=2)
    await queen.queue(queue).push({"data": "long job"})
    [message] = await pop_now(queen, queue)

    await asyncio.sleep(1.0)
    renewed = await queen.renew(message)  # POST /lease/:id/extend, no body: 60 s

    assert renewed["success"] is True
    assert renewed["leaseId"] == message["leaseId"]
    assert renewed["newExpiresAt"]
    assert "error" not in renewed

    await asyncio.sleep(2.0)  # 3 s after the pop: the original 2 s lease is long gone
    assert await pop_now(queen, queue) == []  # nobody else gets it

    acked = await queen.ack(message, True)
    assert acked["success"] is True


async def test_renew_by_lease_id_string(queen, queue):
    await create_queue(queen, queue, lease_time=2)
    await queen.queue(queue).push({"data": 1})
    [message] = await pop_now(queen, queue)

    renewed = await queen.renew(message["leaseId"])

    assert renewed["success"] is True
    await asyncio.sleep(2.5)
    assert await pop_now(queen, queue) == []
    assert (await queen.ack(message, True))["success"] is True


async def test_renew_a_batch_renews_its_one_lease(queen, queue):
    await create_queue(queen, queue, lease_time=2)
    await queen.queue(queue).push([{"data": i} for i in range(4)])
    messages = await pop_now(queen, queue)
    assert len(messages) == 4

    results = await queen.renew(messages)

    assert isinstance(results, list) and len(results) == 1  # one lease for the whole batch
    assert results[0]["success"] is True
    await asyncio.sleep(2.5)
    assert await pop_now(queen, queue) == []
    assert (await queen.ack(messages, True))["success"] is True


async def test_renew_after_expiry_reports_failure(queen, queue):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push({"data": 1})
    [message] = await pop_now(queen, queue)
    await asyncio.sleep(1.5)

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
        await asyncio.sleep(2.5)  # well past the 1 s lease; renewed every 300 ms
        assert await pop_now(queen, queue) == []  # still ours meanwhile

    await asyncio.wait_for(
        queen.queue(queue).batch(1).limit(1).renew_lease(True, 300).consume(handler), 30
    )

    assert attempts == [1]
    await asyncio.sleep(1.2)
    assert await pop_now(queen, queue) == []  # acked, not redelivered
