"""Dead letters: made through the client, read back through the client's DLQ builder.

DLQBuilder.get() sends GET /api/v1/dlq?queue=..&limit=..&offset=..[&consumerGroup=..]
[&partition=..] and turns any error into {"messages": [], "total": 0}, so every test here
asserts on content: an empty answer is a failure, never a pass.
"""

from __future__ import annotations

import asyncio

from tests.conformance.helpers import create_queue, dlq_rows, pop_now


async def _dead_letter_one(queen, queue, group=None, error="poison"):
    await create_queue(queen, queue, lease_time=30, retry_limit=3)
    [pushed] = await queen.queue(queue).push({"data": {"bad": True}})
    [message] = await pop_now(queen, queue, group=group)
    result = await queen.ack(message, "dlq", {"group": group, "error": error} if group else {"error": error})
    assert result["success"] is True
    return pushed


async def test_retry_exhaustion_dead_letters_with_the_error(queen, queue, db):
    await create_queue(queen, queue, lease_time=30, retry_limit=1, retry_delay=0)
    [pushed] = await queen.queue(queue).push({"data": "doomed"})

    attempts = []
    for _ in range(5):
        messages = await pop_now(queen, queue)
        if not messages:
            break
        attempts.append(messages[0]["deliveryAttempt"])
        assert (await queen.ack(messages[0], False, {"error": f"try {len(attempts)}"}))["success"] is True

    assert attempts == [1, 2]  # first delivery + retry_limit retries
    rows = await dlq_rows(db, queue)
    assert [r["transaction_id"] for r in rows] == [pushed["transaction_id"]]
    assert rows[0]["error_message"] == "try 2"


async def test_dlq_is_per_consumer_group(queen, queue, db, group):
    await create_queue(queen, queue, lease_time=30, retry_limit=3)
    await queen.queue(queue).push({"data": "x"})
    [message] = await queen.queue(queue).group(group).subscription_mode("all").batch(10).wait(False).pop()

    await queen.ack(message, "dlq", {"group": group, "error": "group-specific"})

    rows = await dlq_rows(db, queue)
    assert [r["consumer_group"] for r in rows] == [group]
    # queue mode never failed it and still gets it
    assert [m["data"] for m in await pop_now(queen, queue)] == ["x"]


async def test_dlq_off_drops_exhausted_messages(queen, queue, db):
    await create_queue(queen, queue, lease_time=30, retry_limit=0,
                       dead_letter_queue=False, dlq_after_max_retries=False)
    await queen.queue(queue).push([{"data": "dropped"}, {"data": "next"}])
    [message] = await pop_now(queen, queue, batch=1)

    assert (await queen.ack(message, False, {"error": "nope"}))["success"] is True

    assert await dlq_rows(db, queue) == []
    nxt = await pop_now(queen, queue)
    assert [m["data"] for m in nxt] == ["next"]


async def test_dead_letter_is_never_redelivered(queen, queue):
    await _dead_letter_one(queen, queue)
    await asyncio.sleep(0.2)

    assert await pop_now(queen, queue) == []


async def test_dlq_builder_lists_dead_letters(queen, queue):
    pushed = await _dead_letter_one(queen, queue, error="poison")

    result = await queen.queue(queue).dlq().limit(10).get()

    assert result["total"] == 1
    [entry] = result["messages"]
    assert entry["transactionId"] == pushed["transaction_id"]
    assert entry["queue"] == queue
    assert entry["errorMessage"] == "poison"
    assert entry["data"] == {"bad": True}


async def test_dlq_builder_filters_by_consumer_group(queen, queue, group):
    pushed = await _dead_letter_one(queen, queue, group=group)

    mine = await queen.queue(queue).dlq(group).get()
    other = await queen.queue(queue).dlq("some-other-group").get()

    assert [m["transactionId"] for m in mine["messages"]] == [pushed["transaction_id"]]
    assert mine["messages"][0]["consumerGroup"] == group
    assert other["total"] == 0


async def test_dlq_builder_pages_with_a_stable_total(queen, queue):
    await create_queue(queen, queue, lease_time=30, retry_limit=3)
    await queen.queue(queue).push([{"data": {"n": n}} for n in range(3)])
    for _ in range(3):
        [message] = await pop_now(queen, queue, batch=1)
        assert (await queen.ack(message, "dlq", {"error": "poison"}))["success"] is True

    first = await queen.queue(queue).dlq().limit(2).get()
    rest = await queen.queue(queue).dlq().limit(2).offset(2).get()

    assert first["total"] == 3 and rest["total"] == 3
    assert len(first["messages"]) == 2 and len(rest["messages"]) == 1
    seen = [m["data"]["n"] for m in first["messages"] + rest["messages"]]
    assert sorted(seen) == [0, 1, 2]
