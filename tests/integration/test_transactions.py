"""POST /api/v1/transaction: acks and pushes commit together or not at all."""

from __future__ import annotations

import uuid

from tests.conftest import lease_runs_out
from tests.integration.helpers import ack, pop, pop_messages, push, queue_count, unique


def ack_op(message: dict, status: str = "completed", **extra) -> dict:
    group = message["consumerGroup"]
    return {"type": "ack", "transactionId": message["transactionId"], "partitionId": message["partitionId"],
            "consumerGroup": None if group == "__QUEUE_MODE__" else group, "status": status,
            "leaseId": message["leaseId"], **extra}


def push_op(queue: str, payload, partition: str = "Default", txid: str | None = None, **extra) -> dict:
    one = {"queue": queue, "partition": partition, "payload": payload, **extra}
    if txid is not None:
        one["transactionId"] = txid
    return {"type": "push", "items": [one]}


async def transaction(http, operations, required=None) -> dict:
    body = {"operations": operations}
    if required is not None:
        body["requiredLeases"] = required
    response = await http.post("/api/v1/transaction", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def test_ack_and_push_commit_together(http, queue):
    target = unique("q")
    await push(http, queue, "input")
    [message] = await pop_messages(http, queue)
    trace = str(uuid.uuid4())
    answer = await transaction(http, [ack_op(message), push_op(target, {"out": 1}, "p", "out-1", traceId=trace)],
                               [message["leaseId"]])
    assert answer["success"] is True
    uuid.UUID(answer["transactionId"])
    results = answer["results"]
    assert [r["index"] for r in results] == [0, 1]
    assert [r["type"] for r in results] == ["ack", "push"]
    assert all(r["success"] for r in results)
    # the acked message is gone, the pushed one is there
    assert await pop(http, queue) is None
    assert (await ack(http, message, lease=False))["noop"] is True
    [out] = await pop_messages(http, target, "p")
    assert out["data"] == {"out": 1}
    assert out["transactionId"] == "out-1"
    assert out["traceId"] == trace


async def test_results_are_flat_one_per_ack_and_one_per_pushed_item(http, queue):
    """As Queen's: a push operation of two items answers two results, each naming its message."""
    target = unique("q")
    await push(http, queue, "input")
    [message] = await pop_messages(http, queue)
    two = {"type": "push", "items": [{"queue": target, "partition": "a", "payload": 1, "transactionId": "t-a"},
                                     {"queue": target, "partition": "b", "payload": 2, "transactionId": "t-b"}]}
    answer = await transaction(http, [two, ack_op(message)])
    assert answer["success"] is True
    results = answer["results"]
    assert [(r["index"], r["type"]) for r in results] == [(0, "push"), (1, "push"), (2, "ack")]
    assert [r["transactionId"] for r in results] == ["t-a", "t-b", message["transactionId"]]
    assert results[2]["leaseReleased"] is True and results[2]["error"] is None
    for result, partition in zip(results[:2], ["a", "b"], strict=True):
        [out] = await pop_messages(http, target, partition)
        assert (result["messageId"], result["partitionId"], result["queueName"]) == \
            (out["id"], out["partitionId"], target)


async def test_unknown_required_lease_applies_nothing(http, queue, db):
    target = unique("q")
    await push(http, queue, "input")
    [message] = await pop_messages(http, queue)
    answer = await transaction(http, [ack_op(message), push_op(target, "out")], [str(uuid.uuid4())])
    assert answer["success"] is False
    assert answer["error"]
    assert answer["results"] == []
    # the push did not happen
    assert await queue_count(db, target) == 0
    assert await pop(http, target) is None
    # the ack did not happen: the message is still leased and unacknowledged
    assert await pop(http, queue) is None
    result = await ack(http, message)
    assert result["success"] is True and result["noop"] is False


async def test_expired_required_lease_applies_nothing(http, queue, db):
    target = unique("q")
    await push(http, queue, "input")
    [message] = await pop_messages(http, queue, leaseSeconds=1)
    await lease_runs_out(db, message["leaseId"])
    answer = await transaction(http, [ack_op(message), push_op(target, "out")], [message["leaseId"]])
    assert answer["success"] is False
    assert answer["results"] == []
    assert await queue_count(db, target) == 0
    again = await pop_messages(http, queue)
    assert [m["id"] for m in again] == [message["id"]]
    assert again[0]["deliveryAttempt"] == 2


async def test_refused_ack_rolls_back_the_push(http, queue, db):
    target = unique("q")
    await push(http, queue, "input")
    [message] = await pop_messages(http, queue)
    answer = await transaction(http, [ack_op({**message, "transactionId": "no-such-message"}),
                                      push_op(target, "out")])
    assert answer["success"] is False
    assert answer["reason"] == "ack_rejected"
    assert answer["error"]
    assert await queue_count(db, target) == 0


async def test_ack_with_wrong_lease_inside_is_rejected(http, queue, db):
    target = unique("q")
    await push(http, queue, "input")
    [message] = await pop_messages(http, queue)
    answer = await transaction(http, [ack_op(message, leaseId=str(uuid.uuid4())), push_op(target, "out")])
    assert answer["success"] is False
    assert answer["reason"] == "ack_rejected"
    assert await queue_count(db, target) == 0
    assert (await ack(http, message))["noop"] is False


async def test_duplicate_push_rolls_back_the_ack(http, queue):
    target = unique("q")
    await push(http, target, "already", partition="p", txids=["dup"])
    await push(http, queue, "input")
    [message] = await pop_messages(http, queue)
    answer = await transaction(http, [ack_op(message), push_op(target, "again", "p", "dup")],
                               [message["leaseId"]])
    assert answer["success"] is False
    assert answer["reason"] == "duplicate"
    assert answer["results"] == []
    # the ack was rolled back: still leased, still unacknowledged
    assert await pop(http, queue) is None
    assert (await ack(http, message))["noop"] is False
    # and the target holds only the original
    assert [m["data"] for m in await pop_messages(http, target, "p")] == ["already"]


async def test_rolled_back_push_items_are_all_absent(http, queue):
    target = unique("q")
    await push(http, target, "orig", txids=["dup"])
    answer = await transaction(http, [
        {"type": "push", "items": [{"queue": target, "payload": "new-1", "transactionId": "fresh-1"},
                                   {"queue": target, "payload": "new-2", "transactionId": "dup"}]}])
    assert answer["success"] is False
    assert answer["reason"] == "duplicate"
    assert [m["data"] for m in await pop_messages(http, target)] == ["orig"]


async def test_push_only_transaction(http):
    q1, q2 = unique("q"), unique("q")
    answer = await transaction(http, [push_op(q1, "a"), push_op(q2, "b")])
    assert answer["success"] is True
    assert [m["data"] for m in await pop_messages(http, q1)] == ["a"]
    assert [m["data"] for m in await pop_messages(http, q2)] == ["b"]


async def test_bad_operation_type_is_400(http, db):
    target = unique("q")
    response = await http.post("/api/v1/transaction", json={"operations": [
        push_op(target, "x"), {"type": "explode"}]})
    assert response.status_code == 400
    assert "error" in response.json()
    assert await queue_count(db, target) == 0


async def test_empty_operations_is_400(http):
    response = await http.post("/api/v1/transaction", json={"operations": []})
    assert response.status_code == 400
    assert "error" in response.json()
