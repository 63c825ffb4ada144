"""POST /api/v1/ack and /api/v1/ack/batch: statuses, cursor rules, retries, DLQ, refusals."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.helpers import (
    ACK_FIELDS,
    ack,
    ack_batch,
    ack_body,
    configure,
    dlq_count,
    pop,
    pop_messages,
    push,
)


async def test_single_ack_answers_array_of_one(http, queue):
    await push(http, queue, "m", txids=["tx-1"])
    [message] = await pop_messages(http, queue)
    response = await http.post("/api/v1/ack", json={
        "transactionId": "tx-1", "partitionId": message["partitionId"], "leaseId": message["leaseId"],
        "status": "completed", "consumerGroup": None, "error": None})
    assert response.status_code == 200
    body = response.json()
    assert isinstance(body, list) and len(body) == 1
    [result] = body
    assert set(result) == ACK_FIELDS
    assert result == {"index": 0, "transactionId": "tx-1", "success": True, "error": None,
                      "leaseReleased": True, "dlq": False, "noop": False}


async def test_batch_ack_answers_aligned_array(http, queue):
    await push(http, queue, "a", "b", "c", txids=["ta", "tb", "tc"])
    messages = await pop_messages(http, queue)
    results = await ack_batch(http, messages)
    assert [r["index"] for r in results] == [0, 1, 2]
    assert [r["transactionId"] for r in results] == ["ta", "tb", "tc"]
    for r in results:
        assert set(r) == ACK_FIELDS
        assert r["success"] is True
        assert r["error"] is None
        assert r["dlq"] is False
        assert r["noop"] is False
    assert any(r["leaseReleased"] for r in results)


async def test_consumer_group_null_means_queue_mode(http, queue):
    await push(http, queue, "m")
    [message] = await pop_messages(http, queue)
    response = await http.post("/api/v1/ack", json={
        "transactionId": message["transactionId"], "partitionId": message["partitionId"],
        "leaseId": message["leaseId"], "consumerGroup": None, "status": "completed", "error": None})
    assert response.json()[0]["success"] is True
    assert await pop(http, queue) is None


async def test_named_group_ack_only_affects_that_group(http, queue):
    await push(http, queue, "m")
    [g1] = await pop_messages(http, queue, consumerGroup="g1", subscriptionMode="all")
    [g2] = await pop_messages(http, queue, consumerGroup="g2", subscriptionMode="all")
    assert (await ack(http, g1))["success"] is True
    assert await pop(http, queue, consumerGroup="g1") is None
    # g2 still holds its own lease and its own cursor
    assert (await ack(http, g2))["noop"] is False
    # the wrong group has nothing to acknowledge
    wrong = await ack(http, g1, lease=False, consumerGroup="never-popped")
    assert wrong["success"] is False


@pytest.mark.parametrize("status", ["completed", "success", "acked", "ok", None])
async def test_completed_synonyms(http, queue, status):
    await push(http, queue, "m", "next")
    [message] = await pop_messages(http, queue, batch=1)
    result = await ack(http, message, status)
    assert result["success"] is True
    assert result["leaseReleased"] is True
    assert result["dlq"] is False
    assert [m["data"] for m in await pop_messages(http, queue)] == ["next"]


@pytest.mark.parametrize("status", ["Completed", "COMPLETED", "OK", "failed", "nack", "whatever"])
async def test_other_statuses_count_as_failed(http, queue, status):
    await configure(http, queue, {"retryDelay": 0})
    await push(http, queue, "m")
    [message] = await pop_messages(http, queue)
    result = await ack(http, message, status)
    assert result["success"] is True
    assert result["dlq"] is False
    again = await pop_messages(http, queue)
    assert [m["id"] for m in again] == [message["id"]]
    assert again[0]["deliveryAttempt"] == 2


async def test_acking_whole_batch_releases_lease_and_next_pop_gets_next(http, queue):
    await push(http, queue, *range(6))
    first = await pop_messages(http, queue, batch=3)
    results = await ack_batch(http, first)
    assert results[-1]["leaseReleased"] is True
    second = await pop_messages(http, queue, batch=3)
    assert [m["data"] for m in second] == [3, 4, 5]
    assert all(m["deliveryAttempt"] == 1 for m in second)


async def test_partial_ack_keeps_the_lease(http, queue):
    await push(http, queue, 1, 2)
    messages = await pop_messages(http, queue)
    result = await ack(http, messages[0])
    assert result["success"] is True
    assert result["leaseReleased"] is False
    assert await pop(http, queue) is None
    result = await ack(http, messages[1])
    assert result["leaseReleased"] is True


async def test_completing_later_offset_completes_earlier_silent_ones(http, queue):
    await push(http, queue, "a", "b", "c")
    messages = await pop_messages(http, queue)
    result = await ack(http, messages[2])
    assert result["success"] is True
    assert result["leaseReleased"] is True
    assert await pop(http, queue) is None
    await push(http, queue, "d")
    assert [m["data"] for m in await pop_messages(http, queue)] == ["d"]
    # the silent ones were completed: acking them now is a no-op
    assert (await ack(http, messages[0], lease=False))["noop"] is True


async def test_retry_redelivers_from_lowest_retried(http, queue):
    await configure(http, queue, {"retryDelay": 0})
    await push(http, queue, "a", "b", "c", "d")
    messages = await pop_messages(http, queue)
    results = await ack_batch(http, messages, ["completed", "retry", "completed", "retry"])
    assert all(r["success"] for r in results)
    assert all(r["dlq"] is False for r in results)
    again = await pop_messages(http, queue)
    assert [m["data"] for m in again] == ["b", "c", "d"]
    assert all(m["deliveryAttempt"] == 2 for m in again)


async def test_retry_does_not_charge_the_retry_budget(http, queue, db):
    await configure(http, queue, {"retryLimit": 1, "retryDelay": 0})
    await push(http, queue, "m")
    for attempt in (1, 2, 3):
        [message] = await pop_messages(http, queue)
        assert message["deliveryAttempt"] == attempt
        result = await ack(http, message, "retry")
        assert result["success"] is True and result["dlq"] is False
    # three retries later the whole budget (1) is still there: one failure is absorbed
    [message] = await pop_messages(http, queue)
    assert message["deliveryAttempt"] == 4
    result = await ack(http, message, "failed")
    assert result["dlq"] is False
    [message] = await pop_messages(http, queue)
    assert message["deliveryAttempt"] == 5
    result = await ack(http, message, "failed")
    assert result["dlq"] is True
    assert await dlq_count(db, queue) == 1


async def test_failed_charges_budget_then_dead_letters(http, queue, db):
    await configure(http, queue, {"retryLimit": 2, "retryDelay": 0})
    await push(http, queue, "poison", "after", txids=["poison", "after"])
    for attempt in (1, 2, 3):
        [message] = await pop_messages(http, queue, batch=1)
        assert message["data"] == "poison"
        assert message["deliveryAttempt"] == attempt
        result = await ack(http, message, "failed", error=f"boom {attempt}")
        assert result["success"] is True
        assert result["dlq"] is (attempt == 3)
        assert await dlq_count(db, queue) == (1 if attempt == 3 else 0)
    # the cursor moved past the dead-lettered message
    [message] = await pop_messages(http, queue, batch=1)
    assert message["data"] == "after"
    assert message["deliveryAttempt"] == 1
    row = await db.fetchrow(
        "SELECT d.transaction_id, d.error_message FROM rq_dlq d JOIN rq_queues q ON q.id = d.queue_id "
        "WHERE q.name = $1", queue)
    assert row["transaction_id"] == "poison"
    assert row["error_message"] == "boom 3"


async def test_failed_whole_batch_is_charged_once_per_delivery(http, queue, db):
    await configure(http, queue, {"retryLimit": 1, "retryDelay": 0})
    await push(http, queue, "a", "b")
    messages = await pop_messages(http, queue)
    results = await ack_batch(http, messages, "failed")
    assert [r["dlq"] for r in results] == [False, False]
    again = await pop_messages(http, queue)
    assert [m["data"] for m in again] == ["a", "b"]
    assert all(m["deliveryAttempt"] == 2 for m in again)
    results = await ack_batch(http, again, "failed")
    assert [r["dlq"] for r in results] == [True, True]
    assert await dlq_count(db, queue) == 2
    assert await pop(http, queue) is None


async def test_dlq_status_dead_letters_at_once(http, queue, db):
    await push(http, queue, "bad", "good")
    [message] = await pop_messages(http, queue, batch=1)
    result = await ack(http, message, "dlq")
    assert result["success"] is True
    assert result["dlq"] is True
    assert result["leaseReleased"] is True
    assert await dlq_count(db, queue) == 1
    [message] = await pop_messages(http, queue, batch=1)
    assert message["data"] == "good"


async def test_dlq_off_drops_the_message(http, queue, db):
    await configure(http, queue, {"retryLimit": 0, "deadLetterQueue": False, "dlqAfterMaxRetries": False})
    await push(http, queue, "drop-me", "keep")
    [message] = await pop_messages(http, queue, batch=1)
    result = await ack(http, message, "failed")
    assert result["success"] is True
    assert result["dlq"] is False
    assert await dlq_count(db, queue) == 0
    [message] = await pop_messages(http, queue, batch=1)
    assert message["data"] == "keep"


async def test_dlq_status_with_dlq_off_drops(http, queue, db):
    await configure(http, queue, {"deadLetterQueue": False, "dlqAfterMaxRetries": False})
    await push(http, queue, "drop-me", "keep")
    [message] = await pop_messages(http, queue, batch=1)
    result = await ack(http, message, "dlq")
    assert result["dlq"] is False
    assert await dlq_count(db, queue) == 0
    assert [m["data"] for m in await pop_messages(http, queue)] == ["keep"]


async def test_dlq_stays_on_when_only_one_flag_is_false(http, queue, db):
    await configure(http, queue, {"retryLimit": 0, "deadLetterQueue": False})
    await push(http, queue, "m")
    [message] = await pop_messages(http, queue)
    assert (await ack(http, message, "failed"))["dlq"] is True
    assert await dlq_count(db, queue) == 1


async def test_wrong_lease_is_refused_and_changes_nothing(http, queue):
    await push(http, queue, "m", "n")
    messages = await pop_messages(http, queue)
    result = await ack(http, messages[0], leaseId=str(uuid.uuid4()))
    assert result["success"] is False
    assert result["error"] == "invalid or expired lease"
    assert result["leaseReleased"] is False
    assert result["noop"] is False
    # nothing changed: the lease is still held and the message is still unacknowledged
    assert await pop(http, queue) is None
    results = await ack_batch(http, messages)
    assert [r["success"] for r in results] == [True, True]
    assert [r["noop"] for r in results] == [False, False]


async def test_stale_lease_from_earlier_delivery_is_refused(http, queue):
    await configure(http, queue, {"retryDelay": 0})
    await push(http, queue, "m")
    [first] = await pop_messages(http, queue)
    assert (await ack(http, first, "retry"))["leaseReleased"] is True
    [second] = await pop_messages(http, queue)
    assert second["leaseId"] != first["leaseId"]
    result = await ack(http, second, leaseId=first["leaseId"])
    assert result["success"] is False
    assert result["error"] == "invalid or expired lease"
    assert (await ack(http, second))["success"] is True


async def test_ack_without_lease_id_skips_validation(http, queue):
    await push(http, queue, "m", "n")
    [message] = await pop_messages(http, queue, batch=1)
    result = await ack(http, message, lease=False)
    assert result["success"] is True
    assert result["leaseReleased"] is True
    assert [m["data"] for m in await pop_messages(http, queue)] == ["n"]


async def test_ack_of_already_acked_is_noop(http, queue):
    await push(http, queue, "m")
    [message] = await pop_messages(http, queue)
    assert (await ack(http, message))["noop"] is False
    again = await ack(http, message, lease=False)
    assert again["success"] is True
    assert again["noop"] is True
    assert again["error"] is None


async def test_ack_of_unknown_transaction_is_refused(http, queue):
    await push(http, queue, "m")
    [message] = await pop_messages(http, queue)
    result = await ack(http, {**message, "transactionId": "no-such-tx"})
    assert result["success"] is False
    assert result["error"]
    # and the real message is still leased and unacknowledged
    assert (await ack(http, message))["noop"] is False


async def test_ack_of_unknown_partition_is_refused(http):
    response = await http.post("/api/v1/ack", json={"transactionId": "x", "partitionId": str(uuid.uuid4())})
    assert response.status_code == 200
    [result] = response.json()
    assert result["success"] is False
    assert result["error"]


async def test_batch_ack_mixed_outcomes(http, queue):
    await push(http, queue, "a", "b")
    messages = await pop_messages(http, queue)
    response = await http.post("/api/v1/ack/batch", json={"consumerGroup": None, "acknowledgments": [
        {"transactionId": messages[0]["transactionId"], "partitionId": messages[0]["partitionId"],
         "leaseId": messages[0]["leaseId"], "status": "completed", "error": None},
        {"transactionId": "nope", "partitionId": messages[0]["partitionId"],
         "leaseId": messages[0]["leaseId"], "status": "completed", "error": None},
        {"transactionId": messages[1]["transactionId"], "partitionId": messages[1]["partitionId"],
         "leaseId": str(uuid.uuid4()), "status": "completed", "error": None},
    ]})
    results = response.json()
    assert [r["index"] for r in results] == [0, 1, 2]
    assert [r["success"] for r in results] == [True, False, False]
    assert results[0]["error"] is None
    assert results[2]["error"] == "invalid or expired lease"


async def test_one_call_completing_whole_spans_of_many_partitions(http, queue):
    """The set-based path of rq_ack: every partition's span completed in one call, answered
    in request order, every lease released, and the next pop gets each partition's next."""
    for p in ("p1", "p2", "p3"):
        await push(http, queue, f"{p}-a", partition=p)  # two segments to a span
        await push(http, queue, f"{p}-b", partition=p)
    first = await pop_messages(http, queue, batch=6, partitions=3)
    assert len(first) == 6
    # interleave partitions so the answer order is not the cursor order
    shuffled = first[::2] + first[1::2]
    results = await ack_batch(http, shuffled)
    assert [r["transactionId"] for r in results] == [m["transactionId"] for m in shuffled]
    assert all(r["success"] and r["leaseReleased"] and not r["noop"] and not r["dlq"] for r in results)
    for p in ("p1", "p2", "p3"):
        await push(http, queue, f"{p}-c", partition=p)
    rest = await pop_messages(http, queue, batch=10, partitions=3)
    assert sorted(m["data"] for m in rest) == ["p1-c", "p2-c", "p3-c"]


async def test_whole_span_path_leaves_mixed_calls_to_the_rules(http, queue):
    """One call: a partition whose span is acked whole, one acked in part, one under a wrong
    lease. Each gets the answer the per-message rules give."""
    for p in ("a", "b", "c"):
        await push(http, queue, f"{p}1", f"{p}2", partition=p)
    messages = await pop_messages(http, queue, batch=6, partitions=3)
    by_partition: dict[str, list[dict]] = {}
    for m in messages:
        by_partition.setdefault(m["data"][0], []).append(m)
    acks = [ack_body(m) for m in by_partition["a"]]
    acks.append(ack_body(by_partition["b"][0]))
    acks += [ack_body(m, leaseId=str(uuid.uuid4())) for m in by_partition["c"]]
    response = await http.post("/api/v1/ack/batch", json={"consumerGroup": None, "acknowledgments": acks})
    results = response.json()
    assert [r["success"] for r in results] == [True, True, True, False, False]
    assert [r["leaseReleased"] for r in results] == [True, True, False, False, False]
    assert results[3]["error"] == "invalid or expired lease"
    # b's second message and c's span are still leased: nothing to pop
    assert await pop(http, queue) is None
    assert (await ack(http, by_partition["b"][1]))["leaseReleased"] is True


async def test_whole_span_answers_interleaved_with_rule_answers_keep_request_order(http, queue):
    """rq_ack counts the items of a released whole span instead of answering each; the broker
    fills them in between the items the per-message rules answered, each at its own index."""
    for p in ("a", "b"):
        await push(http, queue, f"{p}1", f"{p}2", partition=p)
    messages = await pop_messages(http, queue, batch=4, partitions=2)
    by_partition: dict[str, list[dict]] = {}
    for m in messages:
        by_partition.setdefault(m["data"][0], []).append(m)
    (a1, a2), (b1, b2) = by_partition["a"], by_partition["b"]
    # a: acked whole, in order; b: its second message under a foreign lease, its first alone
    acks = [ack_body(b2, leaseId=str(uuid.uuid4())), ack_body(a1), ack_body(b1), ack_body(a2)]
    response = await http.post("/api/v1/ack/batch", json={"consumerGroup": None, "acknowledgments": acks})
    results = response.json()
    assert [r["index"] for r in results] == [0, 1, 2, 3]
    assert [r["transactionId"] for r in results] == [m["transactionId"] for m in (b2, a1, b1, a2)]
    assert [r["success"] for r in results] == [False, True, True, True]
    assert [r["leaseReleased"] for r in results] == [False, True, False, True]
    assert results[0]["error"] == "invalid or expired lease"
    assert [r["error"] for r in results[1:]] == [None, None, None]


async def test_repeated_transaction_id_in_a_span_is_not_taken_for_the_whole_span(http, queue):
    """With dedup off a partition may hold one transactionId twice. Acking it once plus an
    unknown id, as many acknowledgements as the span has messages, must not complete the span."""
    await configure(http, queue, {"dedupWindowSeconds": 0})
    await push(http, queue, "first", txids=["same"])
    await push(http, queue, "second", txids=["same"])
    messages = await pop_messages(http, queue, batch=2)
    assert [m["transactionId"] for m in messages] == ["same", "same"]
    results = await ack_batch(http, [messages[0], {**messages[1], "transactionId": "other"}])
    assert [r["success"] for r in results] == [True, False]
    assert results[0]["leaseReleased"] is False
    assert await pop(http, queue) is None


async def test_whole_span_acked_in_another_order_completes_it(http, queue):
    """The one-statement path takes a span acked in delivery order; any other order goes
    through the per-message rules and must end the same: every message acked, lease released."""
    await push(http, queue, "a", "b", "c")
    await push(http, queue, "d")
    messages = await pop_messages(http, queue, batch=4)
    assert [m["data"] for m in messages] == ["a", "b", "c", "d"]
    results = await ack_batch(http, messages[::-1])
    assert [r["success"] for r in results] == [True] * 4
    assert results[-1]["leaseReleased"] is True
    await push(http, queue, "e")
    assert [m["data"] for m in await pop_messages(http, queue, batch=4)] == ["e"]


async def test_span_holding_one_transaction_id_twice_is_completed_by_acking_both(http, queue):
    """With dedup off a partition may hold one transactionId twice; acking each delivered
    message, in order, completes the span: neither comes back."""
    await configure(http, queue, {"dedupWindowSeconds": 0})
    await push(http, queue, "first", txids=["same"])
    await push(http, queue, "second", txids=["same"])
    messages = await pop_messages(http, queue, batch=2)
    results = await ack_batch(http, messages)
    assert [r["success"] for r in results] == [True, True]
    assert results[-1]["leaseReleased"] is True
    assert await pop(http, queue) is None


async def test_a_batch_mixing_acks_with_and_without_a_lease_id(http, queue):
    await push(http, queue, "m", "n", "o")
    messages = await pop_messages(http, queue, batch=3)
    acknowledgments = [ack_body(messages[0]), ack_body(messages[1], lease=False), ack_body(messages[2])]
    assert "leaseId" not in acknowledgments[1] and acknowledgments[2]["leaseId"]
    response = await http.post("/api/v1/ack/batch", json={"acknowledgments": acknowledgments})
    results = response.json()
    assert [r["success"] for r in results] == [True, True, True]
    assert results[2]["leaseReleased"] is True
    assert await pop_messages(http, queue) == []
