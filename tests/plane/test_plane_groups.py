"""Consumer groups' delivery: every group gets every message, independently, and a group's
subscription mode is fixed when it is made; over HTTP and through the library (ported from
tests/conformance/test_client_groups.py; the client's consume loop is the client's)."""

from __future__ import annotations

import asyncio
import uuid

from reginamq.library import QueueOptions
from tests.conftest import let_a_long_poll_park
from tests.plane.helpers import data, pop_now


async def drain(plane, queue, group=None, batch=5) -> list:
    seen = []
    for _ in range(100):
        messages = await pop_now(plane, queue, group=group, batch=batch)
        if not messages:
            return seen
        seen.extend(messages)
        assert all(r.success for r in await plane.ack(messages, group=group))
    raise AssertionError(f"queue {queue} did not drain")


async def test_every_group_receives_every_message_in_partition_order(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30))
    groups = [f"g-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    for g in groups:  # register the groups before anything is pushed
        assert await pop_now(plane, queue, group=g) == []
    for p in ("a", "b"):
        await plane.push(queue, [{"p": p, "n": i} for i in range(8)], partition=p)

    for g in groups:
        seen = await drain(plane, queue, group=g)
        assert {m.consumer_group for m in seen} == {g}
        for p in ("a", "b"):
            assert [m.data["n"] for m in seen if m.data["p"] == p] == list(range(8)), (g, p)
    assert len(await drain(plane, queue, batch=50)) == 16  # queue mode is one more consumer


async def test_an_ack_in_one_group_does_not_touch_another(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30))
    g1, g2 = f"g1-{uuid.uuid4().hex[:6]}", f"g2-{uuid.uuid4().hex[:6]}"
    await plane.push(queue, [0, 1, 2])

    m1 = await pop_now(plane, queue, group=g1)
    assert all(r.success for r in await plane.ack(m1, group=g1))
    m2 = await pop_now(plane, queue, group=g2)

    assert data(m1) == data(m2) == [0, 1, 2]
    assert [r.success for r in await plane.ack(m1, group=g2)] == [False] * 3  # g1's lease is not g2's


async def test_subscription_mode_new_skips_the_history(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30))
    newcomer, historian = f"new-{uuid.uuid4().hex[:6]}", f"all-{uuid.uuid4().hex[:6]}"
    await plane.push(queue, [{"old": i} for i in range(5)])

    assert await pop_now(plane, queue, group=newcomer, subscription_mode="new") == []
    await plane.push(queue, [{"new": i} for i in range(3)])

    later = await pop_now(plane, queue, group=newcomer, subscription_mode="new")
    assert data(later) == [{"new": 0}, {"new": 1}, {"new": 2}]
    everything = await pop_now(plane, queue, group=historian, subscription_mode="all")
    assert len(everything) == 8 and everything[0].data == {"old": 0}


async def test_subscription_mode_is_fixed_when_the_group_is_made(plane, queue, group):
    await plane.configure(queue, QueueOptions(lease_time=30))
    await plane.push(queue, ["history"])
    assert await pop_now(plane, queue, group=group, subscription_mode="new") == []

    assert await pop_now(plane, queue, group=group, subscription_mode="all") == []  # no rewind


async def test_a_long_poll_of_a_group_is_woken_by_a_push(plane, queue, group):
    await plane.configure(queue, QueueOptions(lease_time=30))
    waiting = asyncio.create_task(plane.pop(queue, group=group, subscription_mode="new", wait=True,
                                            timeout_ms=30_000))
    await let_a_long_poll_park()
    await plane.push(queue, ["fresh"])

    popped = await asyncio.wait_for(waiting, 25)
    assert data(popped.messages) == ["fresh"] and popped.consumer_group == group
