"""GET /api/v1/resources/*: overview, queues, queue detail, depth, namespaces, tasks, partitions.

Numbers are checked after real pushes, pops and acks. Queue-level `pending` is the worst cursor's
backlog: what the least advanced cursor of a partition has not committed, or the whole stored
log of a partition no one has read yet.
"""

from __future__ import annotations

import pytest

from tests.integration.helpers import ISO_MILLIS, ack_batch, configure, pop_messages, push, unique

QUEUE_FIELDS = {"name", "id", "namespace", "task", "options", "partitions", "messages", "pending",
                "consumerGroups", "dlq", "expired", "lastWriteAt", "createdAt", "updatedAt"}
PARTITION_FIELDS = {"id", "name", "queue", "lastOffset", "logStart", "messages", "pending", "cursors",
                    "oldestPendingAt", "lastWriteAt", "createdAt"}


async def get_ok(http, path, **params) -> dict | list:
    response = await http.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def consume(http, queue, partition, count, group=None):
    """Pop `count` messages of one partition and ack them all."""
    params = {"batch": count, **({"consumerGroup": group, "subscriptionMode": "all"} if group else {})}
    messages = await pop_messages(http, queue, partition, **params)
    assert len(messages) == count
    await ack_batch(http, messages, consumer_group=group)
    return messages


async def test_overview_counts_what_was_pushed(http, queue):
    before = await get_ok(http, "/api/v1/resources/overview")
    assert set(before["messages"]) == {"total", "pending", "inFlight", "deadLetter"}
    await push(http, queue, 1, 2, 3, partition="a")
    await push(http, queue, 4, 5, partition="b")
    await pop_messages(http, queue, "a", batch=1)  # one message leased, not acked
    after = await get_ok(http, "/api/v1/resources/overview")
    assert after["queues"] == before["queues"] + 1
    assert after["partitions"] == before["partitions"] + 2
    assert after["messages"]["total"] >= before["messages"]["total"] + 5
    assert after["messages"]["pending"] >= before["messages"]["pending"] + 5
    assert after["messages"]["inFlight"] >= 1
    assert ISO_MILLIS.match(after["timestamp"]) and ISO_MILLIS.match(after["lastWriteAt"])
    for key in ("queues", "partitions", "namespaces", "tasks", "consumerGroups", "subscriptions", "dlq"):
        assert isinstance(after[key], int)


async def test_queue_list_filters_pages_and_carries_totals(http):
    namespace = unique("ns")
    names = sorted(f"{namespace}-q{i}" for i in range(3))
    for i, name in enumerate(names):
        await configure(http, name, {"leaseTime": 30 + i}, namespace=namespace, task="t")
        await push(http, name, *range(i + 1), partition="p")
        await push(http, name, "x", partition="other")

    body = await get_ok(http, "/api/v1/resources/queues", namespace=namespace)
    assert body["total"] == 3 and body["limit"] == 100 and body["offset"] == 0
    assert [q["name"] for q in body["queues"]] == names
    for i, entry in enumerate(body["queues"]):
        assert set(entry) == QUEUE_FIELDS
        assert entry["namespace"] == namespace and entry["task"] == "t"
        assert entry["options"]["leaseTime"] == 30 + i
        assert entry["partitions"] == 2
        assert entry["messages"] == i + 2 and entry["pending"] == i + 2
        assert entry["consumerGroups"] == 0 and entry["dlq"] == 0 and entry["expired"] == 0

    page = await get_ok(http, "/api/v1/resources/queues", namespace=namespace, limit=2, offset=2)
    assert page["total"] == 3 and [q["name"] for q in page["queues"]] == names[2:]
    search = await get_ok(http, "/api/v1/resources/queues", search=names[1])
    assert [q["name"] for q in search["queues"]] == [names[1]]
    nothing = await get_ok(http, "/api/v1/resources/queues", namespace=namespace, task="other-task")
    assert nothing == {"queues": [], "total": 0, "limit": 100, "offset": 0}


async def test_queue_detail_has_per_partition_depth_and_groups(http, queue):
    await push(http, queue, 0, 1, 2, partition="p1")
    await push(http, queue, 0, 1, partition="p2")
    await consume(http, queue, "p1", 2)  # queue mode: p1 committed 1 of 0..2
    await consume(http, queue, "p2", 2, group="g")  # group g finished p2, has not read p1

    body = await get_ok(http, f"/api/v1/resources/queues/{queue}")
    assert body["name"] == queue and body["partitionCount"] == 2
    assert body["messages"] == 5
    assert body["pending"] == 1  # p1: 1 left for queue mode; p2: its only cursor (g) is done
    assert body["consumerGroups"] == 1
    assert [(p["name"], p["messages"], p["pending"], p["cursors"]) for p in body["partitions"]] == [
        ("p1", 3, 1, 1), ("p2", 2, 0, 1)]
    p1 = body["partitions"][0]
    assert set(p1) == PARTITION_FIELDS and p1["lastOffset"] == 2 and p1["logStart"] == 0
    assert ISO_MILLIS.match(p1["oldestPendingAt"]) and body["partitions"][1]["oldestPendingAt"] is None

    [group] = body["groups"]
    assert group["name"] == "g" and group["queueName"] == queue
    assert group["totalLag"] == 3 and group["partitionsWithLag"] == 1 and group["cursors"] == 1
    assert body["queueMode"]["totalLag"] == 3  # p1: 1 left; p2: never read by queue mode
    assert body["queueMode"]["name"] == "__QUEUE_MODE__"

    paged = await get_ok(http, f"/api/v1/resources/queues/{queue}", limit=1, offset=1)
    assert [p["name"] for p in paged["partitions"]] == ["p2"] and paged["partitionCount"] == 2


async def test_queue_detail_of_an_unknown_queue_is_404(http, queue):
    response = await http.get(f"/api/v1/resources/queues/{queue}")
    assert response.status_code == 404 and "error" in response.json()


async def test_depth_for_the_queue_and_for_one_group(http, queue):
    await push(http, queue, *range(4), partition="big")
    await push(http, queue, *range(2), partition="small")
    await push(http, queue, 0, partition="done")
    await consume(http, queue, "done", 1)
    await consume(http, queue, "big", 3, group="g")

    body = await get_ok(http, f"/api/v1/resources/queues/{queue}/depth")
    # worst cursor: big has only g's cursor (1 left), small no cursor (all 2), done queue mode (0)
    assert body == {"queue": queue, "group": None, "pending": 3, "partitionsPending": 2, "conflation": False,
                    "effectivePending": 3, "partitions": [{"partition": "small", "pending": 2},
                                                          {"partition": "big", "pending": 1},
                                                          {"partition": "done", "pending": 0}],
                    "partitionCount": 3, "limit": 1000, "offset": 0}

    mine = await get_ok(http, f"/api/v1/resources/queues/{queue}/depth", group="g")
    assert mine["group"] == "g" and mine["pending"] == 4 and mine["partitionsPending"] == 3
    assert mine["partitions"] == [{"partition": "small", "pending": 2}, {"partition": "big", "pending": 1},
                                  {"partition": "done", "pending": 1}]
    first = await get_ok(http, f"/api/v1/resources/queues/{queue}/depth", group="g", limit=1)
    assert first["partitions"] == [{"partition": "small", "pending": 2}] and first["pending"] == 4

    unknown_group = await http.get(f"/api/v1/resources/queues/{queue}/depth", params={"group": "nobody"})
    assert unknown_group.status_code == 404 and "error" in unknown_group.json()
    unknown_queue = await http.get(f"/api/v1/resources/queues/{unique('q')}/depth")
    assert unknown_queue.status_code == 404 and "error" in unknown_queue.json()


async def test_depth_of_a_group_subscribed_to_new_messages_only(http, queue):
    await push(http, queue, "old", partition="p")
    assert await pop_messages(http, queue, consumerGroup="fresh", subscriptionMode="new") == []
    body = await get_ok(http, f"/api/v1/resources/queues/{queue}/depth", group="fresh")
    assert body["pending"] == 0
    await push(http, queue, "new-1", "new-2", partition="p")
    await push(http, queue, "new-3", partition="q")  # a partition the group has never read
    body = await get_ok(http, f"/api/v1/resources/queues/{queue}/depth", group="fresh")
    assert body["pending"] == 3 and body["partitionsPending"] == 2


async def test_namespaces_and_tasks(http):
    namespace, task = unique("ns"), unique("task")
    first, second = f"{namespace}-a", f"{namespace}-b"
    await configure(http, first, namespace=namespace, task=task)
    await configure(http, second, namespace=namespace)
    await push(http, first, 1, 2, partition="p")
    await push(http, second, 3, partition="p")

    namespaces = await get_ok(http, "/api/v1/resources/namespaces")
    [entry] = [n for n in namespaces["namespaces"] if n["namespace"] == namespace]
    assert entry == {"namespace": namespace, "queues": 2, "partitions": 2, "messages": 3, "pending": 3}
    assert namespaces["total"] == len(namespaces["namespaces"])
    tasks = await get_ok(http, "/api/v1/resources/tasks")
    [entry] = [t for t in tasks["tasks"] if t["task"] == task]
    assert entry == {"task": task, "queues": 1, "partitions": 1, "messages": 2, "pending": 2}


async def test_partitions_are_paged_and_searched_by_prefix(http, queue):
    for name in ("p0", "p1", "p2", "x1", "x2"):
        await push(http, queue, name, partition=name)
    body = await get_ok(http, "/api/v1/resources/partitions", queue=queue, limit=2)
    assert body["total"] == 5 and body["limit"] == 2 and body["offset"] == 0
    assert [p["name"] for p in body["partitions"]] == ["p0", "p1"]
    assert all(set(p) == PARTITION_FIELDS and p["queue"] == queue for p in body["partitions"])
    assert body["partitions"][0]["messages"] == 1 and body["partitions"][0]["pending"] == 1
    rest = await get_ok(http, "/api/v1/resources/partitions", queue=queue, limit=2, offset=4)
    assert [p["name"] for p in rest["partitions"]] == ["x2"]
    found = await get_ok(http, "/api/v1/resources/partitions", queue=queue, search="x")
    assert found["total"] == 2 and [p["name"] for p in found["partitions"]] == ["x1", "x2"]
    everywhere = await get_ok(http, "/api/v1/resources/partitions", limit=1)
    assert everywhere["total"] >= 5 and len(everywhere["partitions"]) == 1
    missing = await http.get("/api/v1/resources/partitions", params={"queue": unique("q")})
    assert missing.status_code == 404 and "error" in missing.json()


@pytest.mark.parametrize(("path", "params"), [
    ("/api/v1/resources/queues", {"limit": 0}),
    ("/api/v1/resources/queues", {"limit": 1001}),
    ("/api/v1/resources/queues", {"offset": -1}),
    ("/api/v1/resources/queues", {"limit": "ten"}),
    ("/api/v1/resources/queues", {"namespace": "bad\x01name"}),
    ("/api/v1/resources/partitions", {"queue": "a/b"}),
    ("/api/v1/resources/partitions", {"offset": "x"}),
    ("/api/v1/resources/queues/some-queue", {"limit": -5}),
    ("/api/v1/resources/queues/some-queue/depth", {"limit": 0}),
    ("/api/v1/resources/queues/some-queue/depth", {"group": "x" * 300}),
])
async def test_bad_parameters_are_400(http, path, params):
    response = await http.get(path, params=params)
    assert response.status_code == 400 and "error" in response.json()
