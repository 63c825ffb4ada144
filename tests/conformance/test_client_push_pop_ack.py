"""Push, pop and ack exactly as the official client sends them."""

from __future__ import annotations

import asyncio
import time
import uuid

from tests.conformance.helpers import create_queue, dlq_rows, drain, pop_now, pop_until
from tests.conftest import let_a_long_poll_park, outlast_lease

# ---------------------------------------------------------------- push


async def test_push_single_item_answers_one_queued_result(queen, queue):
    results = await queen.queue(queue).push({"data": {"hello": "world"}})

    assert isinstance(results, list) and len(results) == 1
    item = results[0]
    assert item["index"] == 0
    assert item["status"] == "queued"
    assert item["message_id"]
    assert item["transaction_id"]
    assert item["queueName"] == queue

    messages = await pop_now(queen, queue)
    assert [m["data"] for m in messages] == [{"hello": "world"}]
    assert messages[0]["id"] == item["message_id"]
    assert messages[0]["transactionId"] == item["transaction_id"]


async def test_push_list_answers_aligned_results_in_order(queen, queue):
    results = await queen.queue(queue).push([{"data": {"n": i}} for i in range(5)])

    assert [r["index"] for r in results] == [0, 1, 2, 3, 4]
    assert {r["status"] for r in results} == {"queued"}
    assert len({r["message_id"] for r in results}) == 5

    messages = await pop_now(queen, queue)
    assert [m["data"]["n"] for m in messages] == [0, 1, 2, 3, 4]
    assert [m["id"] for m in messages] == [r["message_id"] for r in results]


async def test_push_without_data_key_sends_the_item_as_payload(queen, queue):
    await queen.queue(queue).push({"plain": 1})

    messages = await pop_now(queen, queue)
    assert [m["data"] for m in messages] == [{"plain": 1}]


async def test_push_scalar_and_null_payloads(queen, queue):
    await queen.queue(queue).push([{"data": "text"}, {"data": 42}, {"data": None}, {"data": [1, 2]}])

    messages = await pop_now(queen, queue)
    assert [m["data"] for m in messages] == ["text", 42, None, [1, 2]]


async def test_push_to_named_partition(queen, queue):
    await queen.queue(queue).partition("p-1").push({"data": {"n": 1}})

    messages = await pop_now(queen, queue)
    assert len(messages) == 1
    assert messages[0]["partition"] == "p-1"
    assert messages[0]["partitionId"]


async def test_push_with_explicit_transaction_id_dedups(queen, queue):
    tx = f"order-{uuid.uuid4()}"
    first = await queen.queue(queue).push({"data": {"v": 1}, "transactionId": tx})
    duplicates_seen = []

    async def on_duplicate(items, error):
        duplicates_seen.extend(items)

    second = await queen.queue(queue).push({"data": {"v": 2}, "transactionId": tx}).on_duplicate(on_duplicate)

    assert first[0]["status"] == "queued"
    assert first[0]["transaction_id"] == tx
    # the client returns the broker's array as it is
    assert second[0]["status"] == "duplicate"
    assert second[0]["message_id"] == first[0]["message_id"]
    assert [d["transactionId"] for d in duplicates_seen] == [tx]

    messages = await pop_now(queen, queue)
    assert [(m["transactionId"], m["data"]) for m in messages] == [(tx, {"v": 1})]


async def test_duplicate_within_one_push_first_item_wins(queen, queue):
    tx = f"dup-{uuid.uuid4()}"
    results = await queen.queue(queue).push([
        {"data": {"v": "first"}, "transactionId": tx},
        {"data": {"v": "second"}, "transactionId": tx},
    ])

    assert [r["status"] for r in results] == ["queued", "duplicate"]
    assert results[1]["message_id"] == results[0]["message_id"]
    messages = await pop_now(queen, queue)
    assert [m["data"] for m in messages] == [{"v": "first"}]


async def test_dedup_is_per_partition(queen, queue):
    tx = f"tx-{uuid.uuid4()}"
    a = await queen.queue(queue).partition("a").push({"data": 1, "transactionId": tx})
    b = await queen.queue(queue).partition("b").push({"data": 2, "transactionId": tx})

    assert a[0]["status"] == "queued"
    assert b[0]["status"] == "queued"


async def test_dedup_window_zero_accepts_repeated_transaction_ids(queen, queue):
    await create_queue(queen, queue, dedup_window_seconds=0)
    tx = f"tx-{uuid.uuid4()}"
    first = await queen.queue(queue).push({"data": 1, "transactionId": tx})
    second = await queen.queue(queue).push({"data": 2, "transactionId": tx})

    assert first[0]["status"] == "queued"
    assert second[0]["status"] == "queued"
    assert second[0]["message_id"] != first[0]["message_id"]
    messages = await pop_now(queen, queue)
    assert [m["data"] for m in messages] == [1, 2]


async def test_push_with_trace_id_is_delivered_with_it(queen, queue):
    trace = str(uuid.uuid4())
    await queen.queue(queue).push([{"data": {"n": 1}, "traceId": trace}, {"data": {"n": 2}}])

    messages = await pop_now(queen, queue)
    assert [m["traceId"] for m in messages] == [trace, None]


async def test_non_uuid_trace_id_is_dropped_by_the_client(queen, queue):
    await queen.queue(queue).push({"data": {"n": 1}, "traceId": "not-a-uuid"})

    messages = await pop_now(queen, queue)
    assert len(messages) == 1
    assert messages[0]["traceId"] is None


# ---------------------------------------------------------------- pop


async def test_pop_batch_returns_at_most_batch_in_push_order(queen, queue):
    await queen.queue(queue).push([{"data": {"n": i}} for i in range(10)])

    first = await queen.queue(queue).batch(4).wait(False).pop()
    assert [m["data"]["n"] for m in first] == [0, 1, 2, 3]
    assert len({m["leaseId"] for m in first}) == 1 and first[0]["leaseId"]
    assert all(m["deliveryAttempt"] == 1 for m in first)
    assert (await queen.ack(first, True))["success"] is True

    rest = await queen.queue(queue).batch(100).wait(False).pop()
    assert [m["data"]["n"] for m in rest] == [4, 5, 6, 7, 8, 9]


async def test_bare_pop_uses_broker_default_batch(queen, queue):
    """A bare pop sends autopilot=true without batch: the broker's default (200) applies."""
    await queen.queue(queue).push([{"data": i} for i in range(30)])

    messages = await queen.queue(queue).wait(False).pop()
    assert [m["data"] for m in messages] == list(range(30))


async def test_pop_wait_false_on_empty_queue_returns_at_once(queen, queue):
    await create_queue(queen, queue)
    started = time.monotonic()
    messages = await queen.queue(queue).wait(False).pop()

    assert messages == []
    assert time.monotonic() - started < 3


async def test_long_poll_wakes_on_push(queen, queue):
    await create_queue(queen, queue)

    async def push_later():
        await let_a_long_poll_park()
        await queen.queue(queue).push({"data": {"late": True}})

    started = time.monotonic()
    pusher = asyncio.create_task(push_later())
    messages = await queen.queue(queue).batch(1).wait(True).timeout_millis(10_000).pop()
    elapsed = time.monotonic() - started
    await pusher

    assert [m["data"] for m in messages] == [{"late": True}]
    assert elapsed < 5


async def test_long_poll_times_out_empty(queen, queue):
    await create_queue(queen, queue)
    started = time.monotonic()
    messages = await queen.queue(queue).wait(True).timeout_millis(800).pop()
    elapsed = time.monotonic() - started

    assert messages == []
    assert 0.6 < elapsed < 5


async def test_pop_named_partition_only_returns_that_partition(queen, queue):
    await queen.queue(queue).partition("a").push([{"data": {"p": "a", "n": i}} for i in range(3)])
    await queen.queue(queue).partition("b").push([{"data": {"p": "b", "n": i}} for i in range(3)])

    messages = await pop_now(queen, queue, partition="b")

    assert [(m["data"]["p"], m["data"]["n"]) for m in messages] == [("b", 0), ("b", 1), ("b", 2)]
    assert {m["partition"] for m in messages} == {"b"}


async def test_pop_of_empty_named_partition_returns_nothing(queen, queue):
    await queen.queue(queue).partition("a").push({"data": 1})

    assert await pop_now(queen, queue, partition="zzz") == []


async def test_one_leased_batch_per_partition(queen, queue):
    await queen.queue(queue).push([{"data": i} for i in range(4)])

    first = await queen.queue(queue).batch(2).wait(False).pop()
    second = await queen.queue(queue).batch(2).wait(False).pop()

    assert [m["data"] for m in first] == [0, 1]
    assert second == []  # the partition is leased; FIFO means nobody else reads past it


async def test_commit_on_delivery_pop_needs_no_ack(queen, queue):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push([{"data": i} for i in range(3)])

    messages = await queen.queue(queue).batch(10).wait(False).commit_on_delivery().pop()
    popped_at = time.monotonic()
    assert [m["data"] for m in messages] == [0, 1, 2]
    assert not messages[0]["leaseId"]

    await outlast_lease(popped_at, 1)  # a lease, had there been one, would have run out
    assert await pop_now(queen, queue) == []


# ---------------------------------------------------------------- ack


async def test_ack_true_completes_the_message(queen, queue):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push({"data": 1})
    [message] = await pop_now(queen, queue)
    popped_at = time.monotonic()

    result = await queen.ack(message, True)

    assert result["success"] is True
    assert not result.get("error")
    await outlast_lease(popped_at, 1)  # an unacked message would be back now
    assert await pop_now(queen, queue) == []


async def test_ack_releases_the_lease_for_the_next_batch(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).push([{"data": i} for i in range(4)])
    first = await queen.queue(queue).batch(2).wait(False).pop()

    result = await queen.ack(first, True)
    nxt = await queen.queue(queue).batch(2).wait(False).pop()

    assert result["success"] is True
    assert [m["data"] for m in nxt] == [2, 3]


async def test_ack_false_redelivers_after_the_default_retry_delay(queen, queue):
    """The default retryDelay (1000 ms) is enforced: a failed message is not visible at once,
    and a client's ordinary long-polling pop receives it again once the delay is over."""
    await create_queue(queen, queue, lease_time=30, retry_limit=3)
    await queen.queue(queue).push({"data": "x"})
    [message] = await pop_now(queen, queue)

    result = await queen.ack(message, False, {"error": "boom"})
    failed_at = time.monotonic()

    assert result["success"] is True
    assert not result.get("error")
    assert await pop_now(queen, queue) == []
    [again] = await queen.queue(queue).pop()  # the client's default: a long poll
    assert time.monotonic() - failed_at >= 0.9
    assert again["transactionId"] == message["transactionId"]
    assert again["deliveryAttempt"] == 2


async def test_ack_retry_redelivers_without_charging_the_budget(queen, queue, db):
    await create_queue(queen, queue, lease_time=30, retry_limit=1, retry_delay=0)
    await queen.queue(queue).push({"data": "r"})

    attempts = []
    for _ in range(4):  # far past retry_limit=1: 'retry' never spends the budget
        [message] = await pop_now(queen, queue)
        attempts.append(message["deliveryAttempt"])
        result = await queen.ack(message, "retry")
        assert result["success"] is True
        assert not result.get("error")

    [last] = await pop_now(queen, queue)
    assert last["data"] == "r"
    assert attempts == [1, 2, 3, 4]
    assert await dlq_rows(db, queue) == []


async def test_ack_dlq_dead_letters_at_once(queen, queue, db):
    await create_queue(queen, queue, lease_time=1, retry_limit=5)
    await queen.queue(queue).push([{"data": "bad"}, {"data": "good"}])
    messages = await pop_now(queen, queue, batch=1)
    assert [m["data"] for m in messages] == ["bad"]

    result = await queen.ack(messages[0], "dlq", {"error": "poison"})

    assert result["success"] is True
    assert not result.get("error")
    assert result.get("dlq") is True
    rows = await dlq_rows(db, queue)
    assert [r["transaction_id"] for r in rows] == [messages[0]["transactionId"]]
    assert rows[0]["error_message"] == "poison"
    # the cursor moved past it: the next message is delivered, the dead one never again
    nxt = await pop_now(queen, queue)
    popped_at = time.monotonic()
    assert [m["data"] for m in nxt] == ["good"]
    await queen.ack(nxt, True)
    await outlast_lease(popped_at, 1)
    assert await pop_now(queen, queue) == []


async def test_batch_ack_with_group_reports_success(queen, queue, group):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push([{"data": i} for i in range(5)])
    messages = await pop_now(queen, queue, group=group)
    popped_at = time.monotonic()
    assert [m["data"] for m in messages] == [0, 1, 2, 3, 4]
    assert {m["consumerGroup"] for m in messages} == {group}

    result = await queen.ack(messages, True, {"group": group})

    assert result["success"] is True
    assert "error" not in result
    assert len(result["results"]) == 5
    assert all(r["success"] is True and not r.get("error") for r in result["results"])
    await outlast_lease(popped_at, 1)
    assert await pop_now(queen, queue, group=group) == []


async def test_batch_ack_in_queue_mode_sends_null_group(queen, queue):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push([{"data": i} for i in range(3)])
    messages = await pop_now(queen, queue)
    popped_at = time.monotonic()

    result = await queen.ack(messages, True)  # "consumerGroup": null on the wire

    assert result["success"] is True
    assert all(r["success"] is True and not r.get("error") for r in result["results"])
    await outlast_lease(popped_at, 1)
    assert await pop_now(queen, queue) == []


async def test_batch_ack_failed_redelivers_the_batch(queen, queue, group):
    await create_queue(queen, queue, lease_time=30, retry_limit=3, retry_delay=0)
    await queen.queue(queue).push([{"data": i} for i in range(3)])
    messages = await pop_now(queen, queue, group=group)

    result = await queen.ack(messages, False, {"group": group, "error": "handler failed"})

    assert result["success"] is True
    again = await pop_now(queen, queue, group=group)
    assert [m["transactionId"] for m in again] == [m["transactionId"] for m in messages]
    assert {m["deliveryAttempt"] for m in again} == {2}


async def test_batch_ack_with_individual_statuses(queen, queue):
    await create_queue(queen, queue, lease_time=30, retry_limit=3, retry_delay=0)
    await queen.queue(queue).push([{"data": i} for i in range(3)])
    messages = await pop_now(queen, queue)
    messages[0]["_status"] = True
    messages[1]["_status"] = False
    messages[1]["_error"] = "second failed"
    messages[2]["_status"] = True

    result = await queen.ack(messages, True)

    assert result["success"] is True
    # the cursor stops at the lowest failed offset: 1 and everything after it come back
    again = await pop_now(queen, queue)
    assert again[0]["data"] == 1
    assert again[0]["deliveryAttempt"] == 2


async def test_ack_with_expired_lease_is_refused(queen, queue):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push({"data": "late"})
    [stale] = await pop_now(queen, queue)
    [redelivered] = await pop_until(queen, queue)  # once the lease ran out
    assert redelivered["transactionId"] == stale["transactionId"]
    assert redelivered["deliveryAttempt"] == 2

    refused = await queen.ack(stale, True)
    refused_batch = await queen.ack([stale], True)
    accepted = await queen.ack(redelivered, True)

    assert refused["success"] is False
    assert refused["error"]
    assert refused_batch["success"] is False
    assert refused_batch["error"]
    assert accepted["success"] is True


async def test_smoke_three_partitions_with_group(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    for p in ("a", "b", "c"):
        await queen.queue(queue).partition(p).push([{"data": {"p": p, "n": i}} for i in range(20)])

    seen = await drain(queen, queue, group=group, batch=10)

    by_partition: dict[str, list[int]] = {}
    for m in seen:
        by_partition.setdefault(m["data"]["p"], []).append(m["data"]["n"])
    assert by_partition == {p: list(range(20)) for p in ("a", "b", "c")}
