"""The consumer loop: acks on success, a failure charged to the retry budget (and dead-lettered
after retryLimit), failures that let the loop go on in partition order, and a lease kept alive
while a slow handler runs."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from reginamq.library import QueueOptions
from tests.conftest import eventually


async def test_handled_messages_are_acked(library, queue, group):
    await library.push(queue, [1, 2, 3])
    seen = []
    async with library.consume(queue, group=group, subscription_mode="all", batch=10, limit=3) as messages:
        async for message in messages:
            seen.append(message.data)
    assert seen == [1, 2, 3]
    assert not await library.pop(queue, group=group)


async def test_an_exception_fails_the_message_and_releases_the_rest_in_order(library, queue):
    await library.configure(queue, QueueOptions(retry_delay=0, retry_limit=3))
    await library.push(queue, ["first", "second", "third"])
    with pytest.raises(ValueError, match="cannot ship"):
        async with library.consume(queue, batch=10) as messages:
            async for message in messages:
                if message.data == "second":
                    raise ValueError("cannot ship")
    again = await library.pop(queue, batch=10, wait=True, timeout_ms=10_000)
    # both delivered a second time; the cursor's budget was charged once, for "second"
    assert [(m.data, m.delivery_attempt) for m in again.messages] == [("second", 2), ("third", 2)]


async def test_failures_go_to_the_dead_letter_queue_after_the_retry_limit(library, queue):
    await library.configure(queue, QueueOptions(retry_delay=0, retry_limit=1))
    await library.push(queue, ["poison"])
    attempts = []

    async def handler(message):
        attempts.append(message.delivery_attempt)
        raise RuntimeError("always")

    handled = await library.consume(queue, batch=1, limit=2, wait_ms=10_000).run(handler)
    assert handled == 2 and attempts == [1, 2]

    async def dead():
        return (await library.dlq(queue)).messages
    letters = await eventually(dead)
    assert [letter.data for letter in letters] == ["poison"] and "always" in letters[0].error_message


async def test_fail_and_continue_keeps_each_partitions_order(library, queue):
    await library.configure(queue, QueueOptions(retry_delay=0, retry_limit=5))
    await library.push(queue, ["a1", "a2"], partition="a")
    await library.push(queue, ["b1"], partition="b")
    order = []
    failed_once = False
    async with library.consume(queue, batch=10, partitions=2, limit=5, wait_ms=10_000) as messages:
        async for message in messages:
            if message.data == "a1" and not failed_once:
                failed_once = True
                await messages.fail(message, "later")
                continue
            order.append(message.data)
            if len(order) == 3:
                break
    assert sorted(order) == ["a1", "a2", "b1"]
    assert order.index("a1") < order.index("a2")


async def test_a_slow_handler_keeps_its_lease(library, queue, db):
    await library.configure(queue, QueueOptions(lease_time=2))
    await library.push(queue, ["slow"])

    async def now():
        return await db.fetchval("SELECT now()")

    async with library.consume(queue, batch=1, limit=1) as messages:
        async for message in messages:
            first_expiry = await db.fetchval(
                "SELECT max(lease_expires_at) FROM rq_consumers WHERE lease_id = $1::uuid", message.lease_id)

            until = first_expiry + timedelta(seconds=1.5)

            async def past_the_first_lease(until=until):
                return await now() > until
            assert await eventually(past_the_first_lease, 10)
            live = await db.fetchval(
                "SELECT max(lease_expires_at) > now() FROM rq_consumers WHERE lease_id = $1::uuid", message.lease_id)
            assert live, "the renewer did not keep the lease"
            assert not await library.pop(queue)  # nobody else gets it meanwhile
    gone = await library.pop(queue, wait=True, timeout_ms=3_000)
    assert not gone, "the handled message came back: its ack was refused"


async def test_run_in_several_loops(library, queue):
    for partition in range(4):
        await library.push(queue, [partition], partition=str(partition))
    seen = []

    async def handler(message):
        seen.append(message.data)
        await asyncio.sleep(0)

    await library.consume(queue, batch=1, limit=4, wait_ms=5_000).run(handler, concurrency=2)
    assert sorted(seen) == [0, 1, 2, 3]
