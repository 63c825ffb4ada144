"""The resources and consumer-group routes through the official client's `queen.admin`.

The client's http layer raises on any 4xx, so every call here that returns has been answered
200; the assertions are on what the answers contain.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.conformance.helpers import create_queue, drain, pop_now
from tests.conftest import eventually


async def test_overview_namespaces_and_tasks(queen, queue):
    namespace, task = f"ns-{uuid.uuid4().hex[:8]}", f"task-{uuid.uuid4().hex[:8]}"
    before = await queen.admin.get_overview()
    await queen.queue(queue).namespace(namespace).task(task).config({"leaseTime": 30}).create()
    await queen.queue(queue).partition("p").push([{"data": i} for i in range(4)])

    after = await queen.admin.get_overview()
    assert after["queues"] == before["queues"] + 1
    assert after["partitions"] == before["partitions"] + 1
    assert after["messages"]["total"] >= before["messages"]["total"] + 4

    namespaces = (await queen.admin.get_namespaces())["namespaces"]
    assert {"namespace": namespace, "queues": 1, "partitions": 1, "messages": 4, "pending": 4} in namespaces
    tasks = (await queen.admin.get_tasks())["tasks"]
    assert {"task": task, "queues": 1, "partitions": 1, "messages": 4, "pending": 4} in tasks


async def test_list_queues_get_queue_and_partitions(queen, queue):
    namespace = f"ns-{uuid.uuid4().hex[:8]}"
    await queen.queue(queue).namespace(namespace).config({"leaseTime": 45, "retryLimit": 2}).create()
    await queen.queue(queue).partition("a").push([{"data": i} for i in range(3)])
    await queen.queue(queue).partition("b").push([{"data": i} for i in range(2)])
    drained = await pop_now(queen, queue, partition="a", batch=3)
    await queen.ack(drained, True)

    listed = await queen.admin.list_queues(namespace=namespace)
    assert listed["total"] == 1
    [entry] = listed["queues"]
    assert entry["name"] == queue and entry["namespace"] == namespace
    assert entry["options"]["leaseTime"] == 45 and entry["options"]["retryLimit"] == 2
    assert (entry["partitions"], entry["messages"], entry["pending"]) == (2, 5, 2)

    detail = await queen.admin.get_queue(queue)
    assert detail["name"] == queue and detail["partitionCount"] == 2 and detail["pending"] == 2
    assert [(p["name"], p["pending"]) for p in detail["partitions"]] == [("a", 0), ("b", 2)]
    assert detail["queueMode"]["totalLag"] == 2 and detail["groups"] == []

    partitions = await queen.admin.get_partitions(queue=queue, limit=1)
    assert partitions["total"] == 2 and [p["name"] for p in partitions["partitions"]] == ["a"]
    searched = await queen.admin.get_partitions(queue=queue, search="b")
    assert [(p["name"], p["messages"]) for p in searched["partitions"]] == [("b", 2)]


async def test_get_queue_of_an_unknown_queue_raises_404(queen, queue):
    with pytest.raises(httpx.HTTPStatusError) as raised:
        await queen.admin.get_queue(queue)
    assert raised.value.response.status_code == 404


async def test_queue_depth_for_the_queue_and_a_group(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).partition("x").push([{"data": i} for i in range(3)])
    await queen.queue(queue).partition("y").push([{"data": 0}])
    consumed = await pop_now(queen, queue, group=group, partition="x", batch=2)
    await queen.ack(consumed, True, {"group": group})

    depth = await queen.admin.get_queue_depth(queue)
    assert depth["queue"] == queue and depth["group"] is None
    assert depth["pending"] == 2 and depth["partitionsPending"] == 2
    assert depth["conflation"] is False and depth["effectivePending"] == 2
    assert sorted((p["partition"], p["pending"]) for p in depth["partitions"]) == [("x", 1), ("y", 1)]

    mine = await queen.admin.get_queue_depth(queue, group)
    assert mine["group"] == group and mine["pending"] == 2 and mine["effectivePending"] == 2


async def test_consumer_groups_list_detail_and_lagging(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).partition("p").push([{"data": i} for i in range(5)])
    consumed = await pop_now(queen, queue, group=group, batch=2)
    await queen.ack(consumed, True, {"group": group})

    groups = await queen.admin.list_consumer_groups()
    [entry] = [g for g in groups if g["name"] == group]
    assert entry["queueName"] == queue and entry["totalLag"] == 3 and entry["partitionsWithLag"] == 1
    assert entry["state"] in ("Stable", "Lagging") and entry["subscriptionMode"] == "all"
    assert all(g["name"] != "__QUEUE_MODE__" for g in groups)

    detail = await queen.admin.get_consumer_group(group)
    assert list(detail) == [queue] and detail[queue]["totalLag"] == 3
    [partition] = detail[queue]["partitions"]
    assert (partition["partition"], partition["committed"], partition["offsetLag"]) == ("p", 1, 3)

    async def lag_of_the_group():
        lagging = await queen.admin.get_lagging_consumers(min_lag_seconds=1)
        return [g["totalLag"] for g in lagging if g["name"] == group]

    assert await eventually(lag_of_the_group) == [3]  # once its oldest pending message is a second old
    assert not [g for g in await queen.admin.get_lagging_consumers() if g["name"] == group]  # default 60 s


async def test_consumer_group_detail_is_queens_object_keyed_by_queue(queen, queue, group):
    """Queen's GET /consumer-groups/:group: {queue: {conflation, partitions: [...]}}, partitions by name."""
    other = f"{queue}-other"
    await create_queue(queen, queue, lease_time=30)
    for name in ("b", "a"):
        await queen.queue(queue).partition(name).push([{"data": f"{name}{i}"} for i in range(3)])
    await queen.queue(other).partition("only").push({"data": "x"})
    consumed = await pop_now(queen, queue, group=group, partition="a", batch=2)
    await queen.ack(consumed, True, {"group": group})
    [leased] = await pop_now(queen, queue, group=group, partition="a", batch=1)
    assert await pop_now(queen, other, group=group) and await pop_now(queen, queue, group=group, partition="b")

    detail = await queen.admin.get_consumer_group(group)
    assert list(detail) == sorted([queue, other])
    entry = detail[queue]
    assert entry["conflation"] is False and [p["partition"] for p in entry["partitions"]] == ["a", "b"]
    a, b = entry["partitions"]
    assert {key: a[key] for key in ("workerId", "lastConsumedAt", "totalConsumed", "offsetLag", "timeLagSeconds",
                                    "leaseActive")} == {
        "workerId": leased["leaseId"], "lastConsumedAt": None, "totalConsumed": 2, "offsetLag": 1,
        "timeLagSeconds": a["timeLagSeconds"], "leaseActive": True}
    assert isinstance(a["timeLagSeconds"], int) and a["timeLagSeconds"] >= 0 and a["leaseExpiresAt"]
    assert (b["offsetLag"], b["totalConsumed"], b["leaseActive"]) == (3, 0, True)  # b leased whole, nothing acked
    assert [p["partition"] for p in detail[other]["partitions"]] == ["only"]

    assert await queen.admin.get_consumer_group(f"{group}-never-popped") == {}


async def test_seek_consumer_group_to_end_and_back(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).push([{"data": i} for i in range(4)])
    assert await pop_now(queen, queue, group=group, batch=1)  # leased, never acked

    answer = await queen.admin.seek_consumer_group(group, queue, {"toEnd": True})
    assert answer["success"] is True and answer["seekToEnd"] is True and answer["partitionsUpdated"] == 1
    assert await pop_now(queen, queue, group=group) == []

    answer = await queen.admin.seek_consumer_group(group, queue, {"timestamp": "2000-01-01T00:00:00.000Z"})
    assert answer["seekToEnd"] is False and answer["targetTimestamp"] == "2000-01-01T00:00:00.000Z"
    again = await drain(queen, queue, group=group)
    assert [m["data"] for m in again] == [0, 1, 2, 3]

    with pytest.raises(httpx.HTTPStatusError) as raised:
        await queen.admin.seek_consumer_group(group, queue, {})
    assert raised.value.response.status_code == 400


async def test_delete_consumer_group_for_queue(queen, queue, queue2, group):
    for name in (queue, queue2):
        await create_queue(queen, name, lease_time=30)
        await queen.queue(name).push([{"data": 1}])
        await drain(queen, name, group=group)

    kept = await queen.admin.delete_consumer_group_for_queue(group, queue, delete_metadata=False)
    assert kept["deleted"] is True and kept["cursorsDeleted"] == 1 and kept["metadataDeleted"] is False
    assert [m["data"] for m in await drain(queen, queue, group=group)] == [1]  # reads from the start again

    gone = await queen.admin.delete_consumer_group_for_queue(group, queue)
    assert gone["deleted"] is True and gone["subscriptionsDeleted"] == 1
    remaining = [g["queueName"] for g in await queen.admin.list_consumer_groups() if g["name"] == group]
    assert remaining == [queue2]
    again = await queen.admin.delete_consumer_group_for_queue(group, queue)
    assert again["deleted"] is False


async def test_system_and_worker_metrics(queen, queue):
    """The analytics pages of Queen's console: a replica per broker process, throughput per bucket."""
    await queen.queue(queue).partition("p").push([{"data": i} for i in range(3)])
    assert len(await drain(queen, queue)) == 3

    async def both_seen():
        system = await queen.admin.get_system_metrics()
        worker = await queen.admin.get_worker_metrics()
        lagged = [entry for entry in worker["queues"] if entry["queueName"] == queue]
        return (system, worker, lagged) if system["replicaCount"] >= 2 and lagged else None

    seen = await eventually(both_seen)
    assert seen, "the broker's processes never reported the drained queue"
    system, worker, [lagged] = seen
    replica = system["replicas"][0]
    assert {"hostname", "port", "workerId", "timeSeries"} <= set(replica)
    assert replica["timeSeries"][-1]["metrics"]["memory"]["rss_bytes"]["last"] > 0
    assert lagged["popCount"] >= 1
    assert sum(point["pushMessages"] for point in worker["timeSeries"]) >= 3
    assert worker["summary"]["totalPopMessages"] >= 3

    narrowed = await queen.admin.get_system_metrics(workerId=replica["workerId"])
    assert [r["workerId"] for r in narrowed["replicas"]] == [replica["workerId"]]
    with pytest.raises(httpx.HTTPStatusError) as raised:
        await queen.admin.get_worker_metrics(workerId="worker-one")
    assert raised.value.response.status_code == 400
