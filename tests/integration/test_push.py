"""POST /api/v1/push: the answer's shape, queue/partition creation, defaults and deduplication."""

from __future__ import annotations

import uuid

from tests.integration.helpers import (
    PUSH_FIELDS,
    configure,
    item,
    pop,
    pop_messages,
    push,
    push_items,
    queue_count,
    unique,
)


async def test_push_answers_201_array_aligned_with_items(http, queue):
    items = [item(queue, {"n": i}, txid=f"tx-{i}") for i in range(3)]
    response = await http.post("/api/v1/push", json={"items": items})
    assert response.status_code == 201
    body = response.json()
    assert isinstance(body, list) and len(body) == 3
    for index, result in enumerate(body):
        assert set(result) >= PUSH_FIELDS
        assert result["index"] == index
        assert result["transaction_id"] == f"tx-{index}"
        assert result["queueName"] == queue
        assert result["status"] == "queued"
        assert uuid.UUID(result["message_id"]).version == 7
    assert len({r["message_id"] for r in body}) == 3


async def test_push_empty_items_answers_201_empty_array(http):
    response = await http.post("/api/v1/push", json={"items": []})
    assert response.status_code == 201
    assert response.json() == []


async def test_first_push_creates_the_queue(http, queue, db):
    assert await queue_count(db, queue) == 0
    await push(http, queue, {"a": 1})
    assert await queue_count(db, queue) == 1


async def test_push_created_queue_gets_lease_time_60(http, queue):
    await push(http, queue, 1)
    answer = await configure(http, queue, {})
    assert answer["options"]["leaseTime"] == 60


async def test_one_request_many_queues_and_partitions(http):
    q1, q2 = unique("q"), unique("q")
    items = [item(q1, "a", "p1"), item(q2, "b", "p2"), item(q1, "c", "p3"), item(q2, "d")]
    body = await push_items(http, items)
    assert [r["queueName"] for r in body] == [q1, q2, q1, q2]
    assert all(r["status"] == "queued" for r in body)
    for queue, partition, data in [(q1, "p1", "a"), (q2, "p2", "b"), (q1, "p3", "c"), (q2, "Default", "d")]:
        messages = await pop_messages(http, queue, partition)
        assert [m["data"] for m in messages] == [data]
        assert messages[0]["partition"] == partition


async def test_partition_defaults_to_Default(http, queue):
    await push(http, queue, "x")
    body = await pop(http, queue)
    assert body["partition"] == "Default"
    assert body["messages"][0]["partition"] == "Default"
    popped = await pop_messages(http, queue, "Default", consumerGroup="g", subscriptionMode="all")
    assert [m["data"] for m in popped] == ["x"]


async def test_transaction_id_defaults_to_message_id(http, queue):
    [result] = await push(http, queue, {"k": "v"})
    assert result["transaction_id"] == result["message_id"]
    [message] = await pop_messages(http, queue)
    assert message["id"] == result["message_id"]
    assert message["transactionId"] == result["message_id"]


async def test_dotted_name_derives_namespace_and_task(http):
    namespace, task = unique("ns"), unique("task")
    queue = f"{namespace}.{task}.c"
    await push(http, queue, {"dotted": True})
    by_namespace = await pop(http, namespace=namespace, consumerGroup="by-namespace", subscriptionMode="all")
    assert by_namespace is not None
    assert by_namespace["queue"] == queue
    assert [m["data"] for m in by_namespace["messages"]] == [{"dotted": True}]
    by_task = await pop(http, task=task, consumerGroup="by-task", subscriptionMode="all")
    assert by_task is not None
    assert by_task["queue"] == queue
    assert [m["data"] for m in by_task["messages"]] == [{"dotted": True}]
    # a non-matching namespace finds nothing
    assert await pop(http, namespace=unique("other"), consumerGroup="by-namespace") is None


async def test_duplicate_txid_same_partition_answers_original_id_and_writes_nothing(http, queue):
    [first] = await push(http, queue, {"v": 1}, partition="p", txids=["dup-1"])
    [second] = await push(http, queue, {"v": 2}, partition="p", txids=["dup-1"])
    assert first["status"] == "queued"
    assert second["status"] == "duplicate"
    assert second["message_id"] == first["message_id"]
    assert second["transaction_id"] == "dup-1"
    messages = await pop_messages(http, queue, "p")
    assert [m["data"] for m in messages] == [{"v": 1}]
    assert messages[0]["id"] == first["message_id"]


async def test_same_txid_in_other_partition_is_not_duplicate(http, queue):
    [a] = await push(http, queue, "a", partition="p1", txids=["same"])
    [b] = await push(http, queue, "b", partition="p2", txids=["same"])
    assert a["status"] == b["status"] == "queued"
    assert a["message_id"] != b["message_id"]
    assert [m["data"] for m in await pop_messages(http, queue, "p1")] == ["a"]
    assert [m["data"] for m in await pop_messages(http, queue, "p2")] == ["b"]


async def test_same_txid_in_other_queue_is_not_duplicate(http):
    q1, q2 = unique("q"), unique("q")
    [a] = await push(http, q1, "a", txids=["same"])
    [b] = await push(http, q2, "b", txids=["same"])
    assert a["status"] == b["status"] == "queued"


async def test_duplicate_within_one_request_first_wins(http, queue):
    body = await push_items(http, [item(queue, "first", txid="t"), item(queue, "second", txid="t"),
                                   item(queue, "other", txid="u")])
    assert [r["status"] for r in body] == ["queued", "duplicate", "queued"]
    assert body[1]["message_id"] == body[0]["message_id"]
    assert [r["index"] for r in body] == [0, 1, 2]
    assert [m["data"] for m in await pop_messages(http, queue)] == ["first", "other"]


async def test_one_push_mixing_live_expired_and_new_keys_over_partitions(http, db, queue):
    """One request, several partitions, each item's key judged on its own: a live key answers
    the original id, a key whose window has passed (not yet purged) is taken over by the new
    message, a new key is queued, and the same key in another partition is a key of its own."""
    [live] = await push(http, queue, "old-live", partition="a", txids=["live"])
    [lapsed] = await push(http, queue, "old-lapsed", partition="b", txids=["lapsed"])
    await db.execute("UPDATE rq_dedup SET expires_at = now() - interval '1 second' WHERE message_id = $1",
                     uuid.UUID(lapsed["message_id"]))
    body = await push_items(http, [item(queue, "new-a", partition="a", txid="fresh"),
                                   item(queue, "dup-a", partition="a", txid="live"),
                                   item(queue, "new-b", partition="b", txid="lapsed"),
                                   item(queue, "also-b", partition="b", txid="live")])
    assert [r["status"] for r in body] == ["queued", "duplicate", "queued", "queued"]
    assert body[1]["message_id"] == live["message_id"]
    assert body[2]["message_id"] != lapsed["message_id"]
    assert len({live["message_id"], lapsed["message_id"], body[0]["message_id"], body[2]["message_id"],
                body[3]["message_id"]}) == 5
    assert [m["data"] for m in await pop_messages(http, queue, "a")] == ["old-live", "new-a"]
    assert [m["data"] for m in await pop_messages(http, queue, "b")] == ["old-lapsed", "new-b", "also-b"]
    [again] = await push(http, queue, "again", partition="b", txids=["lapsed"])
    assert again["status"] == "duplicate" and again["message_id"] == body[2]["message_id"]


async def test_dedup_window_zero_accepts_duplicates(http, queue):
    await configure(http, queue, {"dedupWindowSeconds": 0})
    [a] = await push(http, queue, 1, txids=["again"])
    [b] = await push(http, queue, 2, txids=["again"])
    assert a["status"] == b["status"] == "queued"
    assert a["message_id"] != b["message_id"]
    messages = await pop_messages(http, queue)
    assert [m["data"] for m in messages] == [1, 2]
    assert [m["transactionId"] for m in messages] == ["again", "again"]


async def test_duplicate_after_consumption_still_duplicate(http, queue):
    [a] = await push(http, queue, 1, txids=["t1"])
    [message] = await pop_messages(http, queue)
    response = await http.post("/api/v1/ack", json={"transactionId": "t1", "partitionId": message["partitionId"],
                                                    "leaseId": message["leaseId"], "status": "completed"})
    assert response.json()[0]["success"] is True
    [b] = await push(http, queue, 2, txids=["t1"])
    assert b["status"] == "duplicate"
    assert b["message_id"] == a["message_id"]
    assert await pop(http, queue) is None


async def test_trace_id_is_echoed_on_push_and_pop(http, queue):
    trace = str(uuid.uuid4())
    await push_items(http, [item(queue, "t", traceId=trace), item(queue, "u")])
    messages = await pop_messages(http, queue)
    assert messages[0]["traceId"] == trace
    assert messages[1]["traceId"] is None
