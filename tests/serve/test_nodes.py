"""Several broker nodes on one PostgreSQL behave as one broker.

Two `reginamq serve` processes (two workers each) share the session's database: a message
popped through one is acknowledged through the other, a push through one wakes a long poll
parked on the other at once, and both see the same leases.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid

import httpx
import pytest

from tests.conftest import start_broker, stop_process


@pytest.fixture(scope="module")
def two_nodes(database_url):
    first, first_url = start_broker(database_url, workers=2)
    second, second_url = start_broker(database_url, workers=2)
    try:
        yield first_url, second_url
    finally:
        stop_process(first)
        stop_process(second)


async def test_popped_on_one_node_acked_on_the_other(two_nodes):
    a, b = two_nodes
    queue = f"n-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(timeout=30) as http:
        await http.post(f"{a}/api/v1/push", json={"items": [{"queue": queue, "payload": n} for n in range(5)]})
        popped = (await http.get(f"{b}/api/v1/pop/queue/{queue}", params={"batch": 10})).json()["messages"]
        assert [m["data"] for m in popped] == [0, 1, 2, 3, 4]
        # the lease is visible to the other node: nothing to pop there meanwhile
        assert (await http.get(f"{a}/api/v1/pop/queue/{queue}")).status_code == 204
        acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"]}
                for m in popped]
        answer = (await http.post(f"{a}/api/v1/ack/batch", json={"acknowledgments": acks})).json()
        assert all(r["success"] for r in answer) and answer[-1]["leaseReleased"]
        renewed = (await http.post(f"{b}/api/v1/lease/{popped[0]['leaseId']}/extend")).json()
        assert renewed["success"] is False  # released through the other node
        assert (await http.get(f"{b}/api/v1/pop/queue/{queue}")).status_code == 204


async def let_its_rechecks_slow_down() -> None:
    """A parked poll re-checks after 0.1 s, then twice as long each time up to a second: its
    fourth re-check is at 1.5 s and the next one a second later. Pushing just past 1.5 s leaves
    0.9 s in which only a wake-up answers. How long a poll has waited is time; nothing stands for it."""
    await asyncio.sleep(1.6)


async def test_a_push_on_one_node_wakes_a_long_poll_on_the_other_at_once(two_nodes):
    """The poll waits long enough that its own re-check comes only every second; a woken
    poll answers within a small fraction of that."""
    a, b = two_nodes
    delays = []
    async with httpx.AsyncClient(timeout=30) as waiter, httpx.AsyncClient(timeout=30) as pusher:
        for _ in range(5):
            queue = f"n-{uuid.uuid4().hex[:8]}"
            poll = asyncio.create_task(waiter.get(f"{b}/api/v1/pop/queue/{queue}",
                                                  params={"wait": "true", "timeout": 20000}))
            await let_its_rechecks_slow_down()
            assert not poll.done()
            await pusher.post(f"{a}/api/v1/push", json={"items": [{"queue": queue, "payload": "wake"}]})
            pushed_at = time.monotonic()
            answer = await poll
            delays.append(time.monotonic() - pushed_at)
            assert answer.status_code == 200 and answer.json()["messages"][0]["data"] == "wake"
    print("cross-node wake-up delays (s):", [round(d, 4) for d in delays])
    assert statistics.median(delays) < 0.5, delays
