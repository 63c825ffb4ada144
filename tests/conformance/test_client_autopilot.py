"""Pop autopilot: the official client leaves batch and/or partitions unset by default and sends
``autopilot=true``; the broker sizes the pop and echoes its choice under ``autopilot``. A knob the
client set is used as sent; with both set the client sends no autopilot and gets no echo."""

from __future__ import annotations

import asyncio

import httpx

from tests.conformance.helpers import create_queue

SPARSE_PARTITIONS = 1_000
CONSUMERS = 4


async def push_sparse(broker_url: str, queue: str) -> None:
    """One message in each of SPARSE_PARTITIONS partitions, in one request."""
    items = [{"queue": queue, "partition": f"p{n}", "payload": {"n": n}} for n in range(SPARSE_PARTITIONS)]
    async with httpx.AsyncClient(base_url=broker_url, timeout=60) as http:
        assert (await http.post("/api/v1/push", json={"items": items})).status_code == 201


async def drain_counting_pops(queen, queue: str, group: str, pin_partitions: bool) -> tuple[int, set[int]]:
    """CONSUMERS consumers pop (not waiting) and ack until the queue is empty for them; returns
    how many pops it took and the messages seen."""
    pops, seen = 0, set()

    async def consumer() -> None:
        nonlocal pops
        while True:
            builder = queen.queue(queue).group(group).subscription_mode("all").wait(False)
            if pin_partitions:
                builder = builder.partitions(1)
            messages = (await builder.pop_result()).messages
            pops += 1
            if not messages:
                return
            seen.update(m["data"]["n"] for m in messages)
            assert (await queen.ack(messages, True, {"group": group}))["success"] is True

    await asyncio.wait_for(asyncio.gather(*(consumer() for _ in range(CONSUMERS))), 120)
    return pops, seen


async def test_autopilot_consumers_drain_sparse_partitions_in_far_fewer_pops(queen, broker_url, queue, group):
    await create_queue(queen, queue, lease_time=60)
    await push_sparse(broker_url, queue)

    auto_pops, auto_seen = await drain_counting_pops(queen, queue, f"{group}-auto", pin_partitions=False)
    pinned_pops, pinned_seen = await drain_counting_pops(queen, queue, f"{group}-pinned", pin_partitions=True)

    assert auto_seen == pinned_seen == set(range(SPARSE_PARTITIONS))
    assert pinned_pops >= SPARSE_PARTITIONS  # one partition, one message, a pop
    assert auto_pops * 10 <= pinned_pops, (auto_pops, pinned_pops)


async def test_the_echo_carries_the_choice_and_keeps_what_the_client_pinned(queen, queue, group):
    await create_queue(queen, queue, lease_time=60)
    for partition in ("a", "b", "c"):
        await queen.queue(queue).partition(partition).push([{"data": {"n": n}} for n in range(5)])
    reader = queen.queue(queue).group(group).subscription_mode("all").wait(False)

    both_left = await reader.pop_result()
    assert both_left.autopilot is not None and both_left.autopilot.partitions >= 1
    assert both_left.autopilot.batch >= len(both_left.messages) > 0
    batch_pinned = await queen.queue(queue).group(f"{group}-2").subscription_mode("all").wait(False).batch(2) \
        .pop_result()
    assert batch_pinned.autopilot.batch == 2 and len(batch_pinned.messages) == 2
    partitions_pinned = await queen.queue(queue).group(f"{group}-3").subscription_mode("all").wait(False) \
        .partitions(1).pop_result()
    assert partitions_pinned.autopilot.partitions == 1
    assert len({m["partition"] for m in partitions_pinned.messages}) == 1
    both_pinned = await queen.queue(queue).group(f"{group}-4").subscription_mode("all").wait(False).batch(3) \
        .partitions(2).pop_result()
    assert both_pinned.autopilot is None and len(both_pinned.messages) == 3  # nothing was left to the broker


async def test_an_empty_pop_that_does_not_wait_gets_the_brokers_pacing_advice(queen, queue, group):
    await create_queue(queen, queue)
    result = await queen.queue(queue).group(group).wait(False).pop_result()
    assert result.messages == []
    assert result.autopilot is not None and result.autopilot.wait_millis > 0


async def test_consume_left_to_autopilot_hands_every_message_once_in_partition_order(queen, queue, group):
    await create_queue(queen, queue, lease_time=60)
    for partition in ("a", "b", "c", "d"):
        await queen.queue(queue).partition(partition).push([{"data": {"p": partition, "n": n}} for n in range(25)])
    handled: list[dict] = []

    async def handler(messages):
        handled.extend(messages if isinstance(messages, list) else [messages])

    await asyncio.wait_for(
        queen.queue(queue).group(group).subscription_mode("all").limit(100).consume(handler), 60)

    assert len(handled) == 100 and len({m["transactionId"] for m in handled}) == 100
    for partition in ("a", "b", "c", "d"):
        assert [m["data"]["n"] for m in handled if m["data"]["p"] == partition] == list(range(25))
