"""Consumer-group admin routes over raw HTTP: list, lagging, detail, delete, seek, subscription."""

from __future__ import annotations

import asyncio

import pytest

from tests.conftest import eventually
from tests.integration.helpers import ISO_MILLIS, ack, ack_batch, configure, pop_messages, push, unique

ENTRY_FIELDS = {"name", "queueName", "topics", "members", "cursors", "partitions", "partitionsWithLag",
                "totalLag", "maxTimeLag", "oldestPendingAt", "state", "subscriptionMode",
                "subscriptionTimestamp", "subscriptionCreatedAt", "conflation"}
# Queen's fields of a partition in a group's detail, then the lease's expiry and reginamq's offsets
QUEEN_PARTITION_FIELDS = {"partition", "workerId", "lastConsumedAt", "totalConsumed", "offsetLag", "timeLagSeconds",
                          "leaseActive"}
PARTITION_FIELDS = QUEEN_PARTITION_FIELDS | {"leaseExpiresAt", "partitionId", "committed", "position", "lastOffset",
                                             "logStart", "oldestPendingAt", "leasedFrom", "leasedTo"}
QUEUE_FIELDS = {"conflation", "partitions", "state", "subscriptionMode", "subscriptionTimestamp",
                "subscriptionCreatedAt", "partitionCount", "cursors", "members", "totalLag", "partitionsWithLag",
                "maxTimeLag", "oldestPendingAt", "limit", "offset"}


async def entries(http, group: str | None = None, queue: str | None = None) -> list[dict]:
    response = await http.get("/api/v1/consumer-groups")
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body, list)
    return [e for e in body if (group is None or e["name"] == group) and (queue is None or e["queueName"] == queue)]


async def detail(http, group: str, **params) -> dict:
    response = await http.get(f"/api/v1/consumer-groups/{group}", params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def seek(http, group: str, queue: str, body: dict) -> dict:
    response = await http.post(f"/api/v1/consumer-groups/{group}/queues/{queue}/seek", json=body)
    assert response.status_code == 200, response.text
    return response.json()


async def test_list_reports_lag_and_leases_per_group_and_queue(http, queue):
    group = unique("g")
    await push(http, queue, *range(3), partition="a")
    await push(http, queue, *range(2), partition="b")
    leased = await pop_messages(http, queue, "a", consumerGroup=group, batch=2, subscriptionMode="all")
    await pop_messages(http, queue, "a", batch=10)  # queue mode reads too: never listed

    [entry] = await entries(http, group)
    assert set(entry) == ENTRY_FIELDS
    assert entry["queueName"] == queue and entry["topics"] == [queue]
    assert entry["partitions"] == 2 and entry["cursors"] == 1 and entry["members"] == 1
    assert entry["totalLag"] == 5 and entry["partitionsWithLag"] == 2
    assert entry["state"] == "Stable" and entry["subscriptionMode"] == "all"
    assert entry["subscriptionTimestamp"] is None and ISO_MILLIS.match(entry["subscriptionCreatedAt"])
    assert isinstance(entry["maxTimeLag"], int) and ISO_MILLIS.match(entry["oldestPendingAt"])
    assert not await entries(http, "__QUEUE_MODE__")

    await ack_batch(http, leased, consumer_group=group)
    [entry] = await entries(http, group)
    assert entry["totalLag"] == 3 and entry["members"] == 0 and entry["partitionsWithLag"] == 2


async def test_a_group_with_waiting_messages_and_no_cursor_is_dead_and_lagging(http, queue):
    group = unique("g")
    await configure(http, queue)
    assert await pop_messages(http, queue, consumerGroup=group) == []  # subscribes, reads nothing
    [entry] = await entries(http, group)
    assert entry["totalLag"] == 0 and entry["state"] == "Stable" and entry["maxTimeLag"] == 0
    assert entry["partitions"] == 0 and entry["cursors"] == 0
    await push(http, queue, "x", "y", partition="p")

    async def a_second_behind():
        [entry] = await entries(http, group)
        return entry if entry["maxTimeLag"] >= 1 else None

    entry = await eventually(a_second_behind)
    assert entry and entry["state"] == "Dead" and entry["totalLag"] == 2
    lagging = (await http.get("/api/v1/consumer-groups/lagging", params={"minLagSeconds": 1})).json()
    assert [e["totalLag"] for e in lagging if e["name"] == group] == [2]
    patient = (await http.get("/api/v1/consumer-groups/lagging", params={"minLagSeconds": 3600})).json()
    assert not [e for e in patient if e["name"] == group]
    response = await http.get("/api/v1/consumer-groups/lagging", params={"minLagSeconds": "soon"})
    assert response.status_code == 400 and "error" in response.json()


async def test_detail_is_keyed_by_queue_with_queens_partition_fields(http, queue):
    group = unique("g")
    await push(http, queue, *range(4), partition="a")
    await push(http, queue, *range(2), partition="b")
    [first] = await pop_messages(http, queue, "a", consumerGroup=group, batch=1, subscriptionMode="all")
    await ack(http, first)
    leased = await pop_messages(http, queue, "a", consumerGroup=group, batch=2)

    body = await detail(http, group)
    assert list(body) == [queue]
    entry = body[queue]
    assert set(entry) == QUEUE_FIELDS
    assert entry["conflation"] is False and entry["subscriptionMode"] == "all" and entry["state"] == "Stable"
    assert (entry["partitionCount"], entry["cursors"], entry["members"]) == (2, 1, 1)
    assert (entry["totalLag"], entry["partitionsWithLag"]) == (5, 2)
    assert (entry["limit"], entry["offset"]) == (1000, 0)
    a, b = entry["partitions"]
    assert set(a) == PARTITION_FIELDS and set(b) == PARTITION_FIELDS
    assert (a["partition"], a["offsetLag"], a["totalConsumed"], a["lastConsumedAt"]) == ("a", 3, 1, None)
    assert a["leaseActive"] is True and a["workerId"] == leased[0]["leaseId"]
    assert ISO_MILLIS.match(a["leaseExpiresAt"]) and (a["leasedFrom"], a["leasedTo"]) == (1, 2)
    assert (a["committed"], a["position"], a["lastOffset"], a["partitionId"]) == (0, 0, 3, first["partitionId"])
    assert (b["partition"], b["offsetLag"], b["totalConsumed"], b["committed"], b["position"]) == ("b", 2, 0, None, -1)
    assert b["leaseActive"] is False and b["workerId"] is None and b["leaseExpiresAt"] is None

    # timeLagSeconds: the age in whole seconds of the oldest message the group has not consumed
    async def aged():
        partitions = (await detail(http, group))[queue]["partitions"]
        return all(p["timeLagSeconds"] >= 1 for p in partitions) and partitions
    aged_partitions = await eventually(aged, 10)
    assert aged_partitions, "time lag did not grow"
    await ack_batch(http, leased, consumer_group=group)
    await ack_batch(http, await pop_messages(http, queue, "a", consumerGroup=group, batch=10), consumer_group=group)
    [a, _] = (await detail(http, group))[queue]["partitions"]
    assert (a["offsetLag"], a["timeLagSeconds"], a["totalConsumed"], a["leaseActive"]) == (0, 0, 4, False)


async def test_detail_pages_each_queues_partitions_by_name(http, queue):
    group, other = unique("g"), unique("q")
    names = ["p-3", "p-1", "p-0", "p-2"]
    for name in names:
        await push(http, queue, name, partition=name)
    await push(http, other, "x", partition="only")
    for name in (queue, other):
        await pop_messages(http, name, consumerGroup=group, subscriptionMode="all")

    body = await detail(http, group)
    assert list(body) == sorted([queue, other])
    assert [p["partition"] for p in body[queue]["partitions"]] == sorted(names)
    page = await detail(http, group, limit=2, offset=1)
    assert [p["partition"] for p in page[queue]["partitions"]] == ["p-1", "p-2"]
    assert page[queue]["partitionCount"] == 4 and (page[queue]["limit"], page[queue]["offset"]) == (2, 1)
    assert page[other]["partitions"] == [] and page[other]["partitionCount"] == 1
    only = await detail(http, group, queue=other)
    assert list(only) == [other] and [p["partition"] for p in only[other]["partitions"]] == ["only"]
    for bad in ({"limit": 0}, {"limit": 1001}, {"offset": -1}, {"queue": "a/b"}):
        response = await http.get(f"/api/v1/consumer-groups/{group}", params=bad)
        assert response.status_code == 400 and "error" in response.json(), bad

    queue_mode = await detail(http, "__QUEUE_MODE__", queue=queue)
    assert queue_mode[queue]["totalLag"] == 4 and queue_mode[queue]["partitionCount"] == 4


async def test_detail_of_a_group_that_reads_nothing_is_empty(http, queue):
    assert await detail(http, unique("nobody")) == {}
    group = unique("g")
    await pop_messages(http, queue, consumerGroup=group)
    assert await detail(http, group, queue=unique("q")) == {}


async def test_delete_for_one_queue_with_and_without_metadata(http, queue):
    group, other = unique("g"), unique("q")
    for name in (queue, other):
        await push(http, name, 1, 2, partition="p")
        await ack_batch(http, await pop_messages(http, name, consumerGroup=group, subscriptionMode="all"),
                        consumer_group=group)

    keep = await http.delete(f"/api/v1/consumer-groups/{group}/queues/{queue}", params={"deleteMetadata": "false"})
    assert keep.status_code == 200
    assert keep.json() == {"deleted": True, "consumerGroup": group, "queueName": queue, "cursorsDeleted": 1,
                           "subscriptionsDeleted": 0, "metadataDeleted": False}
    [entry] = await entries(http, group, queue)  # still subscribed, no cursor: reads from the start again
    assert entry["cursors"] == 0 and entry["totalLag"] == 2
    assert [m["data"] for m in await pop_messages(http, queue, consumerGroup=group)] == [1, 2]

    gone = await http.delete(f"/api/v1/consumer-groups/{group}/queues/{queue}")
    assert gone.json()["deleted"] is True and gone.json()["subscriptionsDeleted"] == 1
    assert await entries(http, group, queue) == []
    assert [e["queueName"] for e in await entries(http, group)] == [other]

    again = await http.delete(f"/api/v1/consumer-groups/{group}/queues/{queue}")
    assert again.status_code == 200 and again.json()["deleted"] is False
    no_queue = await http.delete(f"/api/v1/consumer-groups/{group}/queues/{unique('q')}")
    assert no_queue.status_code == 200 and no_queue.json()["deleted"] is False


async def test_delete_a_group_everywhere(http, queue):
    group, other = unique("g"), unique("q")
    for name in (queue, other):
        await push(http, name, 1, partition="p")
        await pop_messages(http, name, consumerGroup=group)
    response = await http.delete(f"/api/v1/consumer-groups/{group}")
    assert response.json() == {"deleted": True, "consumerGroup": group, "cursorsDeleted": 2,
                               "subscriptionsDeleted": 2, "metadataDeleted": True}
    assert await entries(http, group) == []
    assert await detail(http, group) == {}
    assert (await http.delete(f"/api/v1/consumer-groups/{group}")).json()["deleted"] is False
    bad = await http.delete(f"/api/v1/consumer-groups/{group}", params={"deleteMetadata": "maybe"})
    assert bad.status_code == 400 and "error" in bad.json()


async def test_seek_to_end_skips_the_backlog_and_clears_leases(http, queue):
    group = unique("g")
    await push(http, queue, *range(3), partition="a")
    await push(http, queue, *range(2), partition="b")
    leased = await pop_messages(http, queue, "a", consumerGroup=group, batch=1, subscriptionMode="all")

    answer = await seek(http, group, queue, {"toEnd": True})
    assert answer == {"success": True, "consumerGroup": group, "queueName": queue, "seekToEnd": True,
                      "targetTimestamp": None, "partitionsUpdated": 2, "cursorsCreated": 1}
    [entry] = await entries(http, group, queue)
    assert entry["totalLag"] == 0 and entry["members"] == 0 and entry["cursors"] == 2
    assert await pop_messages(http, queue, consumerGroup=group, batch=10) == []
    stale = await http.post("/api/v1/ack", json={"transactionId": leased[0]["transactionId"],
                                                 "partitionId": leased[0]["partitionId"],
                                                 "leaseId": leased[0]["leaseId"], "consumerGroup": group,
                                                 "status": "completed"})
    assert stale.status_code == 200 and stale.json()[0]["success"] is False

    await push(http, queue, "fresh", partition="b")
    assert [m["data"] for m in await pop_messages(http, queue, consumerGroup=group, batch=10)] == ["fresh"]


async def test_seek_to_a_timestamp_rewinds_and_creates_missing_cursors(http, queue):
    group = unique("g")
    await push(http, queue, "old-a", partition="a")
    await push(http, queue, "old-b", partition="b")
    await asyncio.sleep(0.05)
    await push(http, queue, "new-a", partition="a")
    await push(http, queue, "new-b", partition="b")
    consumed = await pop_messages(http, queue, "a", consumerGroup=group, batch=10, subscriptionMode="all")
    await ack_batch(http, consumed, consumer_group=group)
    instant = next(m["createdAt"] for m in consumed if m["data"] == "new-a")
    instant_b = (await pop_messages(http, queue, "b", batch=10))[1]["createdAt"]  # queue mode peeks b
    assert ISO_MILLIS.match(instant)

    answer = await seek(http, group, queue, {"timestamp": min(instant, instant_b)})
    assert answer["partitionsUpdated"] == 2 and answer["cursorsCreated"] == 1
    assert answer["targetTimestamp"] == min(instant, instant_b)
    again = await pop_messages(http, queue, consumerGroup=group, batch=10, partitions=2)
    assert sorted(m["data"] for m in again) == ["new-a", "new-b"]

    await seek(http, group, queue, {"timestamp": "2000-01-01T00:00:00Z"})
    [entry] = await entries(http, group, queue)
    assert entry["totalLag"] == 4


async def test_seek_queue_mode_by_name(http, queue):
    await push(http, queue, 1, 2, 3, partition="p")
    await seek(http, "__QUEUE_MODE__", queue, {"toEnd": True})
    assert await pop_messages(http, queue) == []


@pytest.mark.parametrize("body", [{}, {"toEnd": False}, {"toEnd": "yes"}, {"timestamp": "yesterday"},
                                  {"timestamp": 1700000000}, {"toEnd": True, "timestamp": "2024-01-01T00:00:00Z"},
                                  {"toEnd": True, "position": 3}])
async def test_seek_refuses_bad_bodies(http, queue, body):
    await pop_messages(http, queue, consumerGroup="g")
    response = await http.post(f"/api/v1/consumer-groups/g/queues/{queue}/seek", json=body)
    assert response.status_code == 400 and "error" in response.json()


async def test_seek_on_an_unknown_queue_or_group_is_404(http, queue):
    response = await http.post(f"/api/v1/consumer-groups/g/queues/{queue}/seek", json={"toEnd": True})
    assert response.status_code == 404 and "error" in response.json()
    await push(http, queue, 1)
    response = await http.post(f"/api/v1/consumer-groups/{unique('g')}/queues/{queue}/seek", json={"toEnd": True})
    assert response.status_code == 404 and "error" in response.json()


async def test_subscription_change_seeds_cursors_created_later(http, queue):
    group = unique("g")
    await push(http, queue, "a-old", partition="a")
    assert len(await pop_messages(http, queue, "a", consumerGroup=group, subscriptionMode="all")) == 1
    await push(http, queue, "b-old", partition="b")  # group has no cursor on b yet

    response = await http.post(f"/api/v1/consumer-groups/{group}/subscription",
                               json={"queue": queue, "subscriptionMode": "new", "subscriptionFrom": "now"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"] is True and body["queues"] == [queue] and body["subscriptionMode"] == "new"
    assert ISO_MILLIS.match(body["subscriptionTimestamp"])
    [entry] = await entries(http, group, queue)
    assert entry["subscriptionMode"] == "new" and entry["subscriptionTimestamp"] == body["subscriptionTimestamp"]

    assert await pop_messages(http, queue, "b", consumerGroup=group) == []  # b-old is before the subscription
    await push(http, queue, "b-new", partition="b")
    assert [m["data"] for m in await pop_messages(http, queue, "b", consumerGroup=group)] == ["b-new"]

    everywhere = await http.post(f"/api/v1/consumer-groups/{group}/subscription", json={"subscriptionMode": "all"})
    assert everywhere.status_code == 200 and everywhere.json()["queues"] == [queue]
    [entry] = await entries(http, group, queue)
    assert entry["subscriptionMode"] == "all" and entry["subscriptionTimestamp"] is None


@pytest.mark.parametrize(("group", "body", "status"), [
    ("g", {"subscriptionMode": "sometimes"}, 400),
    ("g", {}, 400),
    ("g", {"subscriptionMode": "new", "subscriptionFrom": "tomorrow-ish"}, 400),
    ("g", {"queue": "a/b", "subscriptionMode": "all"}, 400),
    ("__QUEUE_MODE__", {"subscriptionMode": "all"}, 400),
    ("g", {"queue": "no-such-queue-anywhere", "subscriptionMode": "all"}, 404),
    ("never-subscribed-group", {"subscriptionMode": "all"}, 404),
])
async def test_subscription_change_refuses_bad_input(http, group, body, status):
    response = await http.post(f"/api/v1/consumer-groups/{group}/subscription", json=body)
    assert response.status_code == status and "error" in response.json()
