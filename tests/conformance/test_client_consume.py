"""consume(): the client's worker loop (pop, call the handler, ack or nack)."""

from __future__ import annotations

import asyncio

from tests.conformance.helpers import create_queue, dlq_rows, pop_now
from tests.conftest import let_a_long_poll_park

CONSUME_DEADLINE = 30


async def test_consume_batch_one_hands_single_messages_in_order(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).push([{"data": {"n": i}} for i in range(6)])
    received = []

    async def handler(message):
        received.append(message)

    await asyncio.wait_for(queen.queue(queue).batch(1).limit(6).consume(handler), CONSUME_DEADLINE)

    assert all(isinstance(m, dict) for m in received)
    assert [m["data"]["n"] for m in received] == [0, 1, 2, 3, 4, 5]
    assert len({m["transactionId"] for m in received}) == 6
    assert await pop_now(queen, queue) == []  # every message was acked


async def test_consume_batch_n_hands_lists_and_sees_every_message_once(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    partitions = ("p0", "p1", "p2")
    for p in partitions:
        await queen.queue(queue).partition(p).push([{"data": {"p": p, "n": i}} for i in range(12)])
    batches = []

    async def handler(messages):
        batches.append(messages)

    await asyncio.wait_for(queen.queue(queue).batch(5).limit(36).consume(handler), CONSUME_DEADLINE)

    assert batches and all(isinstance(b, list) for b in batches)
    assert all(1 <= len(b) <= 5 for b in batches)
    handled = [m for b in batches for m in b]
    assert len(handled) == 36
    assert len({m["transactionId"] for m in handled}) == 36
    for p in partitions:
        assert [m["data"]["n"] for m in handled if m["data"]["p"] == p] == list(range(12))
    assert await pop_now(queen, queue) == []


async def test_consume_with_group_acks_in_that_group(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).push([{"data": i} for i in range(4)])
    received = []

    async def handler(message):
        received.append(message)

    await asyncio.wait_for(
        queen.queue(queue).group(group).subscription_mode("all").batch(1).limit(4).consume(handler),
        CONSUME_DEADLINE,
    )

    assert [m["data"] for m in received] == [0, 1, 2, 3]
    assert {m["consumerGroup"] for m in received} == {group}
    assert await pop_now(queen, queue, group=group) == []
    # queue mode has its own cursor and still sees everything
    assert [m["data"] for m in await pop_now(queen, queue)] == [0, 1, 2, 3]


async def test_consume_each_processes_one_at_a_time(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).push([{"data": i} for i in range(5)])
    received = []

    async def handler(message):
        received.append(message)

    await asyncio.wait_for(queen.queue(queue).batch(5).each().limit(5).consume(handler), CONSUME_DEADLINE)

    assert all(isinstance(m, dict) for m in received)
    assert [m["data"] for m in received] == [0, 1, 2, 3, 4]
    assert await pop_now(queen, queue) == []


async def test_handler_error_nacks_the_batch_and_it_is_redelivered(queen, queue):
    await create_queue(queen, queue, lease_time=30, retry_limit=3)
    await queen.queue(queue).push([{"data": i} for i in range(3)])
    calls = []

    async def handler(messages):
        calls.append([(m["transactionId"], m["deliveryAttempt"]) for m in messages])
        if len(calls) == 1:
            raise RuntimeError("first attempt fails")

    # limit counts handled messages, failed batches included: 3 failed + 3 succeeded
    await asyncio.wait_for(queen.queue(queue).batch(3).limit(6).consume(handler), CONSUME_DEADLINE)

    assert len(calls) == 2
    assert [tx for tx, _ in calls[1]] == [tx for tx, _ in calls[0]]
    assert [attempt for _, attempt in calls[0]] == [1, 1, 1]
    assert [attempt for _, attempt in calls[1]] == [2, 2, 2]
    assert await pop_now(queen, queue) == []


async def test_handler_always_failing_ends_in_the_dlq(queen, queue, db):
    retry_limit = 2
    await create_queue(queen, queue, lease_time=30, retry_limit=retry_limit)
    [pushed] = await queen.queue(queue).push({"data": {"poison": True}})
    attempts = []

    async def handler(message):
        attempts.append(message["deliveryAttempt"])
        raise ValueError("cannot process this")

    await asyncio.wait_for(
        queen.queue(queue).batch(1).wait(False).idle_millis(1500).consume(handler), CONSUME_DEADLINE
    )

    # first delivery + retry_limit retries, then dead-lettered and never delivered again
    assert attempts == list(range(1, retry_limit + 2))
    rows = await dlq_rows(db, queue)
    assert [r["transaction_id"] for r in rows] == [pushed["transaction_id"]]
    assert rows[0]["error_message"] == "cannot process this"
    assert await pop_now(queen, queue) == []


async def test_handler_failure_does_not_block_other_partitions_forever(queen, queue, db):
    await create_queue(queen, queue, lease_time=30, retry_limit=0)
    [bad] = await queen.queue(queue).partition("bad").push({"data": "bad"})
    await queen.queue(queue).partition("good").push([{"data": "good-1"}, {"data": "good-2"}])
    handled = []

    async def handler(message):
        if message["data"] == "bad":
            raise RuntimeError("bad message")
        handled.append(message["data"])

    await asyncio.wait_for(
        queen.queue(queue).batch(1).wait(False).idle_millis(1500).consume(handler), CONSUME_DEADLINE
    )

    assert handled == ["good-1", "good-2"]
    assert [r["transaction_id"] for r in await dlq_rows(db, queue)] == [bad["transaction_id"]]
    assert await pop_now(queen, queue) == []


async def test_consume_stops_at_limit_with_messages_left(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).push([{"data": i} for i in range(5)])
    received = []

    async def handler(message):
        received.append(message["data"])

    await asyncio.wait_for(queen.queue(queue).batch(1).limit(2).consume(handler), CONSUME_DEADLINE)

    assert received == [0, 1]
    assert [m["data"] for m in await pop_now(queen, queue)] == [2, 3, 4]


async def test_consume_long_polls_for_messages_pushed_later(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    received = []

    async def handler(message):
        received.append(message["data"])

    consumer = asyncio.ensure_future(
        queen.queue(queue).batch(1).limit(3).timeout_millis(10_000).consume(handler)
    )
    await let_a_long_poll_park()
    for i in range(3):
        await queen.queue(queue).push({"data": i})
    await asyncio.wait_for(consumer, CONSUME_DEADLINE)

    assert received == [0, 1, 2]
