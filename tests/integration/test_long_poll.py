"""Long poll: an empty wait answers 204 at its timeout; a push wakes a waiting pop."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.conftest import eventually, let_a_long_poll_park
from tests.integration.helpers import configure, push, unique


async def test_empty_long_poll_answers_204_after_the_timeout(http, queue):
    started = time.monotonic()
    response = await http.get(f"/api/v1/pop/queue/{queue}", params={"wait": "true", "timeout": "500"})
    elapsed = time.monotonic() - started
    assert response.status_code == 204
    assert response.content == b""
    assert elapsed >= 0.4
    assert elapsed < 10


async def test_wait_false_answers_at_once(http, queue):
    started = time.monotonic()
    response = await http.get(f"/api/v1/pop/queue/{queue}", params={"wait": "false", "timeout": "5000"})
    assert response.status_code == 204
    assert time.monotonic() - started < 4


async def test_empty_discovery_long_poll_answers_204(http):
    started = time.monotonic()
    response = await http.get("/api/v1/pop", params={"namespace": unique("ns"), "wait": "true",
                                                     "timeout": "500"})
    assert response.status_code == 204
    assert time.monotonic() - started >= 0.4


async def _woken_by_push(broker_url: str, queue: str, pop_path: str, push_items: list[dict],
                         params: dict | None = None) -> tuple[float, dict]:
    async with httpx.AsyncClient(base_url=broker_url, timeout=30) as waiter_client:
        started = time.monotonic()
        waiting = asyncio.create_task(waiter_client.get(
            pop_path, params={"wait": "true", "timeout": "10000", **(params or {})}))
        await let_a_long_poll_park()
        assert not waiting.done(), "the pop answered before anything was pushed"
        async with httpx.AsyncClient(base_url=broker_url, timeout=30) as pusher:
            response = await pusher.post("/api/v1/push", json={"items": push_items})
            assert response.status_code == 201
        response = await waiting
        elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text
    return elapsed, response.json()


async def test_push_wakes_a_waiting_pop_repeatedly_across_processes(broker_url):
    for round_ in range(6):
        queue = unique("q")
        elapsed, body = await _woken_by_push(
            broker_url, queue, f"/api/v1/pop/queue/{queue}",
            [{"queue": queue, "payload": {"round": round_}}])
        assert [m["data"] for m in body["messages"]] == [{"round": round_}]
        assert elapsed < 5, f"round {round_}: woken after {elapsed:.2f}s, timeout was 10s"


async def test_push_wakes_a_waiting_partition_pop(broker_url):
    queue = unique("q")
    elapsed, body = await _woken_by_push(
        broker_url, queue, f"/api/v1/pop/queue/{queue}/partition/p7",
        [{"queue": queue, "partition": "p7", "payload": "hello"}])
    assert body["partition"] == "p7"
    assert [m["data"] for m in body["messages"]] == ["hello"]
    assert elapsed < 5


async def test_push_wakes_a_waiting_discovery_pop(broker_url):
    namespace = unique("ns")
    queue = f"{namespace}.task.q"
    elapsed, body = await _woken_by_push(
        broker_url, queue, "/api/v1/pop", [{"queue": queue, "payload": "found"}],
        params={"namespace": namespace})
    assert [m["data"] for m in body["messages"]] == ["found"]
    assert elapsed < 5


async def test_push_to_another_queue_does_not_answer_the_wait(http, broker_url):
    queue, other = unique("q"), unique("q")
    started = time.monotonic()
    waiting = asyncio.create_task(http.get(f"/api/v1/pop/queue/{queue}",
                                           params={"wait": "true", "timeout": "1000"}))
    await let_a_long_poll_park()
    await push(http, other, "elsewhere")
    response = await waiting
    assert response.status_code == 204
    assert time.monotonic() - started >= 0.9


async def test_ack_release_wakes_a_waiting_pop_of_the_same_group(http, broker_url, queue):
    await push(http, queue, "first", "second")
    first = (await http.get(f"/api/v1/pop/queue/{queue}", params={"batch": "1"})).json()
    async with httpx.AsyncClient(base_url=broker_url, timeout=30) as waiter_client:
        started = time.monotonic()
        waiting = asyncio.create_task(waiter_client.get(
            f"/api/v1/pop/queue/{queue}", params={"wait": "true", "timeout": "10000"}))
        await let_a_long_poll_park()
        assert not waiting.done()
        [message] = first["messages"]
        result = (await http.post("/api/v1/ack", json={
            "transactionId": message["transactionId"], "partitionId": message["partitionId"],
            "leaseId": message["leaseId"]})).json()[0]
        assert result["leaseReleased"] is True
        response = await waiting
    assert response.status_code == 200
    assert [m["data"] for m in response.json()["messages"]] == ["second"]
    assert time.monotonic() - started < 5


async def test_a_lease_expiring_during_a_long_poll_is_delivered_to_it(http, queue):
    """No push announces an expired lease: the waiting pop's own re-checks (the once-a-second
    look-up) must find it while it waits."""
    await push(http, queue, "m")
    first = (await http.get(f"/api/v1/pop/queue/{queue}", params={"leaseSeconds": "1"})).json()
    started = time.monotonic()
    response = await http.get(f"/api/v1/pop/queue/{queue}", params={"wait": "true", "timeout": "6000"})
    assert response.status_code == 200
    [message] = response.json()["messages"]
    assert message["id"] == first["messages"][0]["id"]
    assert message["deliveryAttempt"] == 2
    assert time.monotonic() - started < 3.5


async def test_a_long_poll_whose_client_hung_up_leases_nothing(broker_url, http, queue):
    """A client that hangs up mid-wait ends its long poll: a push that comes after it goes to
    the group's next pop instead of being leased to a connection nobody reads."""
    await configure(http, queue)  # the group's subscription starts at the pop that leaves
    params = {"wait": "true", "timeout": "20000", "consumerGroup": "g"}

    async def group_subscribed():
        answer = await http.get("/api/v1/consumer-groups/g", params={"queue": queue})
        return queue in answer.json()

    async with httpx.AsyncClient(base_url=broker_url, timeout=30) as leaving:
        waiting = asyncio.create_task(leaving.get(f"/api/v1/pop/queue/{queue}", params=params))
        assert await eventually(group_subscribed)
        await let_a_long_poll_park()
        assert not waiting.done()
        waiting.cancel()
    await let_a_long_poll_park()  # the broker hears the hang-up
    await push(http, queue, {"n": 1})
    await let_a_long_poll_park()  # a poll still parked would have been woken and leased it by now
    response = await http.get(f"/api/v1/pop/queue/{queue}", params={**params, "timeout": "5000"})
    assert response.status_code == 200, response.text
    assert [m["data"] for m in response.json()["messages"]] == [{"n": 1}]
