"""Consumer groups and subscription modes, through the client's .group() / .subscription_mode()."""

from __future__ import annotations

import asyncio
import uuid

from tests.conformance.helpers import create_queue, drain, pop_now
from tests.conftest import eventually

CONSUME_DEADLINE = 30


async def test_every_group_receives_every_message(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    groups = [f"g-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    for g in groups:  # register the groups before anything is pushed
        assert await pop_now(queen, queue, group=g) == []
    for p in ("a", "b"):
        await queen.queue(queue).partition(p).push([{"data": {"p": p, "n": i}} for i in range(8)])

    for g in groups:
        seen = await drain(queen, queue, group=g, batch=5)
        assert {m["consumerGroup"] for m in seen} == {g}
        for p in ("a", "b"):
            assert [m["data"]["n"] for m in seen if m["data"]["p"] == p] == list(range(8)), (g, p)
    # queue mode is one more independent consumer
    queue_mode = await drain(queen, queue, batch=50)
    assert len(queue_mode) == 16


async def test_groups_consume_concurrently_and_independently(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    g1, g2 = f"g1-{uuid.uuid4().hex[:6]}", f"g2-{uuid.uuid4().hex[:6]}"
    await queen.queue(queue).push([{"data": i} for i in range(10)])
    got: dict[str, list[int]] = {g1: [], g2: []}

    def handler_for(g):
        async def handler(messages):
            got[g].extend(m["data"] for m in messages)
        return handler

    await asyncio.wait_for(asyncio.gather(
        queen.queue(queue).group(g1).subscription_mode("all").batch(3).limit(10).consume(handler_for(g1)),
        queen.queue(queue).group(g2).subscription_mode("all").batch(4).limit(10).consume(handler_for(g2)),
    ), CONSUME_DEADLINE)

    assert got[g1] == list(range(10))
    assert got[g2] == list(range(10))


async def test_ack_in_one_group_does_not_touch_another(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    g1, g2 = f"g1-{uuid.uuid4().hex[:6]}", f"g2-{uuid.uuid4().hex[:6]}"
    await queen.queue(queue).push([{"data": i} for i in range(3)])

    m1 = await queen.queue(queue).group(g1).subscription_mode("all").batch(10).wait(False).pop()
    assert (await queen.ack(m1, True, {"group": g1}))["success"] is True
    m2 = await queen.queue(queue).group(g2).subscription_mode("all").batch(10).wait(False).pop()

    assert [m["data"] for m in m1] == [0, 1, 2]
    assert [m["data"] for m in m2] == [0, 1, 2]


async def test_subscription_mode_new_skips_history(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    newcomer, historian = f"new-{uuid.uuid4().hex[:6]}", f"all-{uuid.uuid4().hex[:6]}"
    await queen.queue(queue).push([{"data": {"old": i}} for i in range(5)])
    await asyncio.sleep(0.1)

    first = await queen.queue(queue).group(newcomer).subscription_mode("new").batch(10).wait(False).pop()
    assert first == []

    await queen.queue(queue).push([{"data": {"new": i}} for i in range(3)])
    later = await queen.queue(queue).group(newcomer).subscription_mode("new").batch(10).wait(False).pop()
    assert [m["data"] for m in later] == [{"new": 0}, {"new": 1}, {"new": 2}]

    everything = await queen.queue(queue).group(historian).subscription_mode("all").batch(10).wait(False).pop()
    assert len(everything) == 8
    assert everything[0]["data"] == {"old": 0}


async def test_subscription_mode_is_fixed_when_the_group_is_created(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    g = f"g-{uuid.uuid4().hex[:6]}"
    await queen.queue(queue).push([{"data": "history"}])
    await asyncio.sleep(0.1)
    assert await queen.queue(queue).group(g).subscription_mode("new").batch(10).wait(False).pop() == []

    # asking for "all" later does not rewind an existing cursor
    again = await queen.queue(queue).group(g).subscription_mode("all").batch(10).wait(False).pop()
    assert again == []


async def test_consume_with_subscription_new_only_sees_later_pushes(queen, queue, db):
    await create_queue(queen, queue, lease_time=30)
    g = f"g-{uuid.uuid4().hex[:6]}"
    await queen.queue(queue).push([{"data": "history"}])
    await asyncio.sleep(0.1)
    received = []

    async def handler(message):
        received.append(message["data"])

    consumer = asyncio.ensure_future(
        queen.queue(queue).group(g).subscription_mode("new").batch(1).limit(2)
        .timeout_millis(10_000).consume(handler)
    )

    async def subscribed():  # the consumer's first pop made the group: "new" counts from then
        return await db.fetchval("SELECT count(*) FROM rq_consumer_groups g JOIN rq_queues q ON q.id = g.queue_id "
                                 "WHERE q.name = $1 AND g.name = $2", queue, g)

    assert await eventually(subscribed)
    await queen.queue(queue).push([{"data": "fresh-1"}, {"data": "fresh-2"}])
    await asyncio.wait_for(consumer, CONSUME_DEADLINE)

    assert received == ["fresh-1", "fresh-2"]
