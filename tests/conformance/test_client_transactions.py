"""queen.transaction(): ack + push committed atomically."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.conformance.helpers import create_queue, pop_now, pop_until
from tests.conftest import lease_runs_out, outlast_lease


async def test_ack_and_push_commit_together(queen, queue, queue2, group):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push({"data": {"step": 1}})
    [message] = await pop_now(queen, queue, group=group)
    popped_at = time.monotonic()
    trace = str(uuid.uuid4())

    result = await (
        queen.transaction()
        .ack(message, "completed", {"consumer_group": group})
        .queue(queue2).partition("out")
        .push([{"data": {"step": 2}, "traceId": trace}])
        .commit()
    )

    assert result["success"] is True
    assert bool(result) is True
    assert result["results"]
    assert all(r["success"] is True for r in result["results"])

    [pushed] = await pop_now(queen, queue2, partition="out")
    assert pushed["data"] == {"step": 2}
    assert pushed["partition"] == "out"
    assert pushed["traceId"] == trace

    await outlast_lease(popped_at, 1)  # were the ack not applied, it would be redelivered now
    assert await pop_now(queen, queue, group=group) == []


async def test_transaction_in_queue_mode_without_partition(queen, queue, queue2):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push({"data": "in"})
    [message] = await pop_now(queen, queue)
    popped_at = time.monotonic()

    result = await queen.transaction().ack(message).queue(queue2).push({"data": "out"}).commit()

    assert result["success"] is True
    [pushed] = await pop_now(queen, queue2)
    assert pushed["data"] == "out"
    assert pushed["partition"] == "Default"
    await outlast_lease(popped_at, 1)
    assert await pop_now(queen, queue) == []


async def test_transaction_acking_a_batch_and_pushing_many(queen, queue, queue2, group):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push([{"data": i} for i in range(3)])
    messages = await pop_now(queen, queue, group=group)
    popped_at = time.monotonic()
    assert len(messages) == 3

    result = await (
        queen.transaction()
        .ack(messages, "completed", {"consumer_group": group})
        .queue(queue2).partition("p").push([{"data": m["data"] * 10} for m in messages])
        .commit()
    )

    assert result["success"] is True
    assert [m["data"] for m in await pop_now(queen, queue2, partition="p")] == [0, 10, 20]
    await outlast_lease(popped_at, 1)
    assert await pop_now(queen, queue, group=group) == []


async def test_commit_with_expired_lease_raises_and_applies_nothing(queen, queue, queue2, group, db):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push({"data": "slow"})
    [message] = await pop_now(queen, queue, group=group)
    await lease_runs_out(db, message["leaseId"])  # while "processing"

    with pytest.raises(Exception):  # noqa: B017 - commit() raises a bare Exception
        await (
            queen.transaction()
            .ack(message, "completed", {"consumer_group": group})
            .queue(queue2).partition("p").push([{"data": "should not exist"}])
            .commit()
        )

    assert await pop_now(queen, queue2, partition="p") == []
    [again] = await pop_now(queen, queue, group=group)
    assert again["transactionId"] == message["transactionId"]
    assert again["deliveryAttempt"] == 2


async def test_commit_with_lease_taken_over_raises(queen, queue, queue2):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push({"data": "contended"})
    [stale] = await pop_now(queen, queue)
    [current] = await pop_until(queen, queue)  # the lease ran out: another consumer now holds it
    assert current["leaseId"] != stale["leaseId"]

    with pytest.raises(Exception):  # noqa: B017
        await queen.transaction().ack(stale).queue(queue2).push({"data": "zombie"}).commit()

    assert await pop_now(queen, queue2) == []
    ok = await queen.transaction().ack(current).queue(queue2).push({"data": "winner"}).commit()
    assert ok["success"] is True
    assert [m["data"] for m in await pop_now(queen, queue2)] == ["winner"]


async def test_duplicate_push_rolls_the_whole_transaction_back(queen, queue, queue2):
    await create_queue(queen, queue, lease_time=1)
    tx = f"once-{uuid.uuid4()}"
    await queen.queue(queue2).push({"data": "original", "transactionId": tx})
    await queen.queue(queue).push({"data": "work"})
    [message] = await pop_now(queen, queue)

    with pytest.raises(Exception):  # noqa: B017
        await (
            queen.transaction()
            .ack(message)
            .queue(queue2).push([{"data": "fresh"}, {"data": "again", "transactionId": tx}])
            .commit()
        )

    assert [m["data"] for m in await pop_now(queen, queue2)] == ["original"]
    [again] = await pop_until(queen, queue)  # the ack was rolled back too: back once the lease ran out
    assert again["transactionId"] == message["transactionId"]


async def test_empty_transaction_is_refused_by_the_client(queen):
    with pytest.raises(Exception, match="no operations"):
        await queen.transaction().commit()
