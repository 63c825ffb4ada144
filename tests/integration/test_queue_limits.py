"""The options Queen stores but does not enforce, enforced here: retryDelay, ttl, maxSize,
and the long-poll fill wait minPopWaitTime."""

from __future__ import annotations

import asyncio
import time

from tests.conftest import let_a_long_poll_park, stored_for
from tests.integration.helpers import ack, ack_batch, configure, item, pop_messages, push, push_items, unique

# ---------------------------------------------------------------- retryDelay


async def test_failed_message_is_invisible_until_the_retry_delay_is_over(http, queue):
    await configure(http, queue, {"retryDelay": 1000})
    await push(http, queue, "m")
    [message] = await pop_messages(http, queue)
    assert (await ack(http, message, "failed"))["leaseReleased"] is True
    failed_at = time.monotonic()

    assert await pop_messages(http, queue) == []
    [again] = await pop_messages(http, queue, wait=True, timeout=5000)  # the long poll gets it once the delay is over
    assert time.monotonic() - failed_at >= 0.9
    assert again["transactionId"] == message["transactionId"]
    assert again["deliveryAttempt"] == 2


async def test_retry_status_waits_the_delay_too_and_zero_means_at_once(http):
    delayed, immediate = unique("delayed"), unique("immediate")
    await configure(http, delayed, {"retryDelay": 60_000})
    await configure(http, immediate, {"retryDelay": 0})
    for name in (delayed, immediate):
        await push(http, name, "m")
        [message] = await pop_messages(http, name)
        await ack(http, message, "retry")
    assert await pop_messages(http, delayed) == []
    assert [m["data"] for m in await pop_messages(http, immediate)] == ["m"]


async def test_retry_delay_holds_the_rest_of_the_span_back_in_order(http, queue):
    await configure(http, queue, {"retryDelay": 1000})
    await push(http, queue, "a", "b", "c")
    messages = await pop_messages(http, queue)
    await ack(http, messages[0], "completed")
    await ack(http, messages[1], "failed")
    await ack(http, messages[2], "completed")
    assert await pop_messages(http, queue) == []  # "c" waits behind "b": partition order holds
    again = await pop_messages(http, queue, wait=True, timeout=5000)
    assert [m["data"] for m in again] == ["b", "c"]


# ---------------------------------------------------------------- ttl


async def test_messages_older_than_the_ttl_are_skipped_and_counted(http, queue, db):
    await configure(http, queue, {"ttl": 1})
    await push(http, queue, "old-1", "old-2")
    await stored_for(db, queue, 1)
    await push(http, queue, "fresh")

    assert [m["data"] for m in await pop_messages(http, queue)] == ["fresh"]
    expired = await db.fetchval(
        "SELECT sum(e.expired) FROM rq_expired e JOIN rq_queues q ON q.id = e.queue_id WHERE q.name = $1", queue)
    assert expired == 2
    status = (await http.get(f"/api/v1/status/queues/{queue}")).json()
    assert status["totals"]["expired"] == 2


async def test_ttl_is_per_reader_and_zero_turns_it_off(http, queue, db):
    await configure(http, queue, {"ttl": 1})
    await push(http, queue, "m")
    await stored_for(db, queue, 1)
    assert await pop_messages(http, queue, consumerGroup="g1", subscriptionMode="all") == []
    await configure(http, queue, {"ttl": 0})
    assert [m["data"] for m in await pop_messages(http, queue, consumerGroup="g2", subscriptionMode="all")] == ["m"]
    assert [m["data"] for m in await pop_messages(http, queue)] == ["m"]


# ---------------------------------------------------------------- maxSize


async def test_push_past_max_size_is_refused_whole_with_a_reason_per_item(http, queue, db):
    await configure(http, queue, {"maxSize": 3})
    await push(http, queue, "a", "b")
    other = unique("other")

    response = await http.post("/api/v1/push", json={"items": [
        item(queue, "c"), item(other, "x"), item(queue, "d")]})

    assert response.status_code == 409
    body = response.json()
    assert body["code"] == "queue_full" and queue in body["error"]
    assert [i["status"] for i in body["items"]] == ["rejected", "not_written", "rejected"]
    assert body["queues"] == [{"queue": queue, "maxSize": 3, "size": 2, "incoming": 2}]
    stored = await db.fetchval(
        "SELECT coalesce(sum(p.last_offset + 1), 0) FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id "
        "WHERE q.name = ANY($1::text[])", [queue, other])
    assert stored == 2  # nothing of the refused push, not even the item for the other queue


async def test_consuming_frees_room_and_a_fitting_push_goes_through(http, queue):
    await configure(http, queue, {"maxSize": 2})
    await push(http, queue, "a", "b")
    assert (await http.post("/api/v1/push", json={"items": [item(queue, "c")]})).status_code == 409
    [first, _second] = await pop_messages(http, queue)
    await ack(http, first, "completed")
    assert (await push(http, queue, "c"))[0]["status"] == "queued"
    assert (await http.post("/api/v1/push", json={"items": [item(queue, "d")]})).status_code == 409


async def test_concurrent_pushes_never_exceed_max_size(http, queue, db):
    await configure(http, queue, {"maxSize": 25})

    async def one(n: int) -> int:
        response = await http.post("/api/v1/push", json={"items": [item(queue, n, partition=f"p{n % 7}")]})
        return response.status_code

    codes = await asyncio.gather(*(one(n) for n in range(60)))
    assert codes.count(201) == 25 and codes.count(409) == 35
    stored = await db.fetchval(
        "SELECT sum(p.last_offset + 1) FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1",
        queue)
    assert stored == 25


async def test_a_duplicate_takes_no_room(http, queue):
    await configure(http, queue, {"maxSize": 1})
    await push(http, queue, "a", txids=["t1"])
    [again] = await push_items(http, [item(queue, "a", txid="t1")])
    assert again["status"] == "duplicate"


async def test_transaction_pushing_into_a_full_queue_rolls_back(http, queue):
    await configure(http, queue, {"maxSize": 1})
    await push(http, queue, "a")
    [message] = await pop_messages(http, queue)
    response = await http.post("/api/v1/transaction", json={"operations": [
        {"type": "ack", "transactionId": message["transactionId"], "partitionId": message["partitionId"],
         "leaseId": message["leaseId"], "status": "completed"},
        {"type": "push", "items": [item(queue, "b"), item(queue, "c")]}]})
    body = response.json()
    assert body["success"] is False and body["reason"] == "queue_full"
    # the ack rolled back with it: the message is still leased, not consumed
    assert (await ack(http, message, "completed"))["success"] is True


# ---------------------------------------------------------------- minPopWaitTime


async def test_long_poll_holds_an_under_full_batch_for_the_fill_wait(http, queue):
    await configure(http, queue, {"minPopWaitTime": 800})
    await push(http, queue, "a")
    started = time.monotonic()
    messages = await pop_messages(http, queue, batch=10, wait=True, timeout=5000)
    assert [m["data"] for m in messages] == ["a"]
    assert time.monotonic() - started >= 0.75


async def test_fill_wait_answers_as_soon_as_the_batch_is_full(http, queue):
    await configure(http, queue, {"minPopWaitTime": 60_000})
    await push(http, queue, "a")

    async def fill() -> None:
        await let_a_long_poll_park()
        await push(http, queue, "b", "c")

    started = time.monotonic()
    messages, _ = await asyncio.gather(pop_messages(http, queue, batch=3, wait=True, timeout=30_000), fill())
    assert [m["data"] for m in messages] == ["a", "b", "c"]
    assert time.monotonic() - started < 10


async def test_fill_wait_does_not_apply_without_wait_or_to_batch_one(http, queue):
    await configure(http, queue, {"minPopWaitTime": 60_000})
    await push(http, queue, "a", "b")
    started = time.monotonic()
    first = await pop_messages(http, queue, batch=10)
    assert [m["data"] for m in first] == ["a", "b"]
    await ack_batch(http, first)
    await push(http, queue, "c")
    assert [m["data"] for m in await pop_messages(http, queue, batch=1, wait=True, timeout=30_000)] == ["c"]
    assert time.monotonic() - started < 10


async def test_fill_wait_above_a_minute_is_refused(http, queue):
    response = await http.post("/api/v1/configure", json={"queue": queue, "options": {"minPopWaitTime": 60_001}})
    assert response.status_code == 400
    assert "minPopWaitTime" in response.json()["error"]
