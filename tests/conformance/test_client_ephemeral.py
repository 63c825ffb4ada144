"""Ephemeral queues through the official client's ``client.ephemeral``."""

from __future__ import annotations

import uuid

import pytest
from queen.errors import EphemeralQueueNotFoundError


@pytest.fixture
def eq() -> str:
    return f"eph-{uuid.uuid4().hex[:10]}"


async def test_push_pop_ack_by_group(queen, eq):
    eph = queen.ephemeral
    assert await eph.push(eq, [{"user": "a", "typing": True}, {"data": {"user": "b"}}]) == {"pushed": 2}
    workers = await eph.pop(eq, group="workers", batch=10)
    assert [m["payload"] for m in workers["messages"]] == [{"user": "a", "typing": True}, {"user": "b"}]
    tail = await eph.pop(eq, group="tail", batch=10)
    assert len(tail["messages"]) == 2  # every group sees every message
    answer = await eph.ack(eq, workers["messages"], group="workers")
    assert [r["outcome"] for r in answer["results"]] == ["acked", "acked"]
    retried = await eph.ack(eq, tail["messages"][0], group="tail", status=False)
    assert retried["results"][0]["outcome"] == "redelivered"
    again = await eph.pop(eq, group="tail", batch=10)
    assert [m["attempts"] for m in again["messages"]] == [2]
    assert (await eph.pop(eq, group="workers"))["messages"] == []


async def test_declaration_depth_reset_and_delete(queen, eq):
    eph = queen.ephemeral
    declared = await eph.configure(eq, max_length=100, lease_seconds=10, window_buffer={"ms": 0, "count": 0})
    assert declared["options"]["maxLength"] == 100
    await eph.push(eq, ["x", "y"], partition="room-7")
    figures = await eph.depth(eq)
    assert figures["tier"] == "declared" and figures["pending"] == 2
    assert [p["partition"] for p in figures["partitions"]] == ["room-7"]
    assert any(q["queue"] == eq for q in (await eph.queues())["queues"])
    assert (await eph.reset(eq))["dropped"] == 2
    assert (await eph.delete(eq))["deleted"] is True
    with pytest.raises(EphemeralQueueNotFoundError):
        await eph.depth(eq)


async def test_a_buffered_push_arrives_on_flush(queen, eq):
    eph = queen.ephemeral
    assert (await eph.push(eq, [1, 2, 3], buffered={"message_count": 100, "time_millis": 60_000}))["buffered"]
    await eph.flush(eq)
    popped = await eph.pop(eq, batch=10, commit_on_delivery=True)
    assert [m["payload"] for m in popped["messages"]] == [1, 2, 3]
