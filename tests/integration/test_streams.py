"""The streaming routes over raw HTTP: registration, state reads and their filters, and a cycle
that commits its state changes, sink pushes and ack together or not at all."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.helpers import pop, pop_raw, push


async def register(http, name: str, config_hash: str = "h1", **extra) -> dict:
    response = await http.post("/streams/v1/queries", json={"name": name, "source_queue": "src",
                                                             "config_hash": config_hash, **extra})
    assert response.status_code in (200, 409), response.text
    return {"status": response.status_code, **response.json()}


async def cycle(http, **body) -> dict:
    response = await http.post("/streams/v1/cycle", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def state(http, query_id: str, partition_id: str, **filters) -> dict:
    response = await http.post("/streams/v1/state/get", json={"query_id": query_id, "partition_id": partition_id,
                                                               "keys": [], **filters})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"] is True
    return {row["key"]: row["value"] for row in body["rows"]}


@pytest.fixture
def name() -> str:
    return f"stream-{uuid.uuid4().hex[:8]}"


async def test_registration_is_idempotent_and_a_new_chain_is_a_409_until_reset(http, name):
    first = await register(http, name)
    assert first["status"] == 200 and first["fresh"] is True and first["reset"] is False
    again = await register(http, name)
    assert again["query_id"] == first["query_id"] and again["fresh"] is False
    conflict = await register(http, name, "h2")
    assert conflict["status"] == 409 and conflict["success"] is False and "config_hash" in conflict["error"]
    reset = await register(http, name, "h2", reset=True)
    assert reset["status"] == 200 and reset["reset"] is True and reset["query_id"] == first["query_id"]


async def test_a_cycle_commits_state_sink_and_ack_together(http, name, queue):
    query_id = (await register(http, name))["query_id"]
    sink = f"{queue}-sink"
    await push(http, queue, 1, 2, partition="p")
    popped = await pop(http, queue, batch=10, consumerGroup="g", subscriptionMode="all")
    last, partition_id = popped["messages"][-1], popped["partitionId"]
    answer = await cycle(http, query_id=query_id, partition_id=partition_id, consumer_group="g",
                         state_ops=[{"type": "upsert", "key": "w\u001f1", "value": {"windowEnd": 1000, "acc": 3}},
                                    {"type": "upsert", "key": "w\u001f2", "value": {"windowEnd": 5000}},
                                    {"type": "upsert", "key": "other", "value": 7},
                                    {"type": "upsert", "key": "gone", "value": 1},
                                    {"type": "delete", "key": "gone"}],
                         push_items=[{"queue": sink, "partition": "p", "payload": {"sum": 3}}],
                         ack={"transactionId": last["transactionId"], "leaseId": last["leaseId"],
                              "status": "completed", "count": 2})
    assert answer["success"] is True and answer["state_ops_applied"] == 5
    assert answer["ack_result"] == {"success": True, "lease_released": True, "dlq": False}
    assert answer["queueName"] == queue and len(answer["push_results"]) == 1
    assert await state(http, query_id, partition_id) == {"w\u001f1": {"windowEnd": 1000, "acc": 3},
                                                         "w\u001f2": {"windowEnd": 5000}, "other": 7}
    assert await state(http, query_id, partition_id, keys=["other", "nope"]) == {"other": 7}
    assert set(await state(http, query_id, partition_id, key_prefix="w\u001f")) == {"w\u001f1", "w\u001f2"}
    assert set(await state(http, query_id, partition_id, key_prefix="w\u001f", ripe_at_or_before=2000)) == {
        "w\u001f1"}
    assert (await pop(http, sink))["messages"][0]["data"] == {"sum": 3}
    assert (await pop_raw(http, queue, consumerGroup="g")).status_code == 204  # consumed


async def test_a_refused_ack_rolls_the_whole_cycle_back(http, name, queue):
    query_id = (await register(http, name))["query_id"]
    sink = f"{queue}-sink"
    await push(http, queue, 1, partition="p")
    popped = await pop(http, queue, batch=10, consumerGroup="g", subscriptionMode="all")
    message, partition_id = popped["messages"][0], popped["partitionId"]
    answer = await cycle(http, query_id=query_id, partition_id=partition_id, consumer_group="g",
                         state_ops=[{"type": "upsert", "key": "k", "value": 1}],
                         push_items=[{"queue": sink, "payload": 1}],
                         ack={"transactionId": message["transactionId"], "leaseId": str(uuid.uuid4())})
    assert answer["success"] is False and "lease" in answer["error"]
    assert await state(http, query_id, partition_id) == {}
    assert (await pop_raw(http, sink)).status_code == 204
    retried = await cycle(http, query_id=query_id, partition_id=partition_id, consumer_group="g",
                          ack={"transactionId": message["transactionId"], "leaseId": message["leaseId"]})
    assert retried["success"] is True and retried["ack_result"]["lease_released"] is True


async def test_a_flush_cycle_without_ack_and_an_unknown_query(http, name, queue):
    query_id = (await register(http, name))["query_id"]
    await push(http, queue, 1, partition="p")
    partition_id = (await pop(http, queue, consumerGroup="peek", subscriptionMode="all"))["partitionId"]
    flushed = await cycle(http, query_id=query_id, partition_id=partition_id,
                          state_ops=[{"type": "upsert", "key": "k", "value": {"x": 1}}])
    assert flushed["success"] is True and flushed["ack_result"] is None
    unknown = await cycle(http, query_id=str(uuid.uuid4()), partition_id=partition_id,
                          state_ops=[{"type": "upsert", "key": "k", "value": 1}])
    assert unknown["success"] is False and unknown["error"] == "query or partition not found"
    assert await state(http, str(uuid.uuid4()), partition_id) == {}


@pytest.mark.parametrize(("path", "body"), [
    ("/streams/v1/queries", {"name": "x", "source_queue": "q"}),
    ("/streams/v1/queries", {"name": "", "source_queue": "q", "config_hash": "h"}),
    ("/streams/v1/queries", {"name": "x", "source_queue": "a/b", "config_hash": "h"}),
    ("/streams/v1/state/get", {"query_id": "nope", "partition_id": str(uuid.uuid4())}),
    ("/streams/v1/state/get", {"query_id": str(uuid.uuid4())}),
    ("/streams/v1/state/get", {"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()), "keys": [""]}),
    ("/streams/v1/cycle", {"query_id": str(uuid.uuid4()), "partition_id": "x"}),
    ("/streams/v1/cycle", {"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
                           "state_ops": [{"type": "merge", "key": "k"}]}),
    ("/streams/v1/cycle", {"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
                           "ack": {"leaseId": str(uuid.uuid4())}}),
    ("/streams/v1/cycle", {"query_id": str(uuid.uuid4()), "partition_id": str(uuid.uuid4()),
                           "push_items": [{"queue": "q"}]}),
])
async def test_bad_bodies_are_400(http, path, body):
    response = await http.post(path, json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]


async def test_deleting_the_source_queue_takes_its_partitions_state(http, db, name, queue):
    query_id = (await register(http, name))["query_id"]
    await push(http, queue, 1, partition="p")
    popped = await pop(http, queue, batch=10, consumerGroup="g", subscriptionMode="all")
    answer = await cycle(http, query_id=query_id, partition_id=popped["partitionId"], consumer_group="g",
                         state_ops=[{"type": "upsert", "key": "k", "value": 1}])
    assert answer["success"] is True
    count = "SELECT count(*) FROM rq_stream_state WHERE partition_id = $1"
    assert await db.fetchval(count, popped["partitionId"]) == 1
    assert (await http.delete(f"/api/v1/resources/queues/{queue}")).json()["deleted"] is True
    assert await db.fetchval(count, popped["partitionId"]) == 0
