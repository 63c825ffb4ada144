"""GET /api/v1/pop...: order, selection, batch and partition limits, autoAck, answer shape."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from tests.integration.helpers import (
    ISO_MILLIS,
    MESSAGE_FIELDS,
    POP_FIELDS,
    QUEUE_MODE,
    ack_batch,
    item,
    pop,
    pop_messages,
    pop_raw,
    push,
    push_items,
    unique,
)


async def test_fifo_per_partition_over_many_pushes(http, queue):
    for i in range(25):
        await push(http, queue, {"seq": i}, partition="p")
    messages = await pop_messages(http, queue, "p", batch=100)
    assert [m["data"]["seq"] for m in messages] == list(range(25))


async def test_fifo_across_batches_with_acks(http, queue):
    for i in range(0, 12, 3):
        await push(http, queue, *[{"seq": j} for j in range(i, i + 3)])
    seen = []
    while True:
        messages = await pop_messages(http, queue, batch=5)
        if not messages:
            break
        assert len(messages) <= 5
        seen.extend(m["data"]["seq"] for m in messages)
        results = await ack_batch(http, messages)
        assert all(r["success"] for r in results)
    assert seen == list(range(12))


async def test_empty_pop_is_204_with_empty_body(http, queue):
    response = await pop_raw(http, queue)
    assert response.status_code == 204
    assert response.content == b""
    await push(http, queue, 1, partition="a")
    response = await pop_raw(http, queue, "b")
    assert response.status_code == 204
    assert response.content == b""


async def test_pop_by_partition_only_reads_that_partition(http, queue):
    await push(http, queue, "a1", "a2", partition="a")
    await push(http, queue, "b1", partition="b")
    body = await pop(http, queue, "b")
    assert body["partition"] == "b"
    assert [m["data"] for m in body["messages"]] == ["b1"]
    body = await pop(http, queue, "a")
    assert [m["data"] for m in body["messages"]] == ["a1", "a2"]


async def test_wildcard_pop_reads_every_partition(http, queue):
    await push(http, queue, "a", partition="pa")
    await push(http, queue, "b", partition="pb")
    await push(http, queue, "c", partition="pc")
    seen = set()
    for _ in range(3):
        body = await pop(http, queue)
        assert body is not None
        assert body["partitionsClaimed"] == 1
        seen.update((m["partition"], m["data"]) for m in body["messages"])
    assert seen == {("pa", "a"), ("pb", "b"), ("pc", "c")}
    assert await pop(http, queue) is None


async def test_pop_by_namespace_and_by_task(http):
    namespace, task = unique("ns"), unique("tk")
    q1, q2 = f"{namespace}.{task}.one", f"{namespace}.{task}.two"
    await push(http, q1, "one")
    await push(http, q2, "two")
    got = {}
    for _ in range(2):
        body = await pop(http, namespace=namespace, consumerGroup="ns-reader", subscriptionMode="all")
        assert body is not None
        got[body["queue"]] = [m["data"] for m in body["messages"]]
    assert got == {q1: ["one"], q2: ["two"]}
    assert await pop(http, namespace=namespace, consumerGroup="ns-reader") is None
    got = {}
    for _ in range(2):
        body = await pop(http, task=task, consumerGroup="task-reader", subscriptionMode="all")
        assert body is not None
        got[body["queue"]] = [m["data"] for m in body["messages"]]
    assert got == {q1: ["one"], q2: ["two"]}
    body = await pop(http, namespace=namespace, task=task, consumerGroup="both", subscriptionMode="all")
    assert body is not None and body["queue"] in (q1, q2)
    assert await pop(http, namespace=namespace, task=unique("no"), consumerGroup="both2") is None


async def test_batch_limits_the_number_of_messages(http, queue):
    await push(http, queue, *range(10))
    first = await pop_messages(http, queue, batch=3)
    assert [m["data"] for m in first] == [0, 1, 2]
    # the partition is leased: the next messages come after the ack
    await ack_batch(http, first)
    second = await pop_messages(http, queue, batch=4)
    assert [m["data"] for m in second] == [3, 4, 5, 6]


async def test_default_batch_is_200(http, queue):
    await push(http, queue, *range(250))
    messages = await pop_messages(http, queue)
    assert len(messages) == 200
    assert [m["data"] for m in messages] == list(range(200))


async def test_partitions_n_claims_several_partitions_sharing_one_lease(http, queue):
    names = ["p1", "p2", "p3", "p4"]
    partition_ids = {}
    for name in names:
        await push(http, queue, f"{name}-a", f"{name}-b", partition=name)
    body = await pop(http, queue, partitions=3)
    assert body["partitionsClaimed"] == 3
    messages = body["messages"]
    assert len(messages) == 6
    assert {m["leaseId"] for m in messages} == {body["leaseId"]}
    uuid.UUID(body["leaseId"])
    by_partition: dict[str, list] = {}
    for m in messages:
        by_partition.setdefault(m["partition"], []).append(m["data"])
        partition_ids.setdefault(m["partition"], set()).add(m["partitionId"])
    assert len(by_partition) == 3
    for name, data in by_partition.items():
        assert data == [f"{name}-a", f"{name}-b"]
        assert len(partition_ids[name]) == 1
    assert len({next(iter(v)) for v in partition_ids.values()}) == 3
    # the top-level fields describe the first claimed partition
    assert body["partition"] == messages[0]["partition"]
    assert body["partitionId"] == messages[0]["partitionId"]
    # the fourth partition is still available
    rest = await pop(http, queue, partitions=3)
    assert rest["partitionsClaimed"] == 1
    assert {m["partition"] for m in rest["messages"]} == set(names) - set(by_partition)


async def test_partitions_share_the_batch_budget(http, queue):
    for name in ["p1", "p2", "p3"]:
        await push(http, queue, 1, 2, 3, partition=name)
    body = await pop(http, queue, partitions=3, batch=4)
    assert len(body["messages"]) == 4
    assert body["partitionsClaimed"] == len({m["partitionId"] for m in body["messages"]})


async def test_partitions_read_before_take_the_budget_whole_in_turn(http, queue):
    """Partitions whose cursors exist (read before): each takes its messages whole until the
    batch runs out, and the one cut short goes on where it stopped at the next pop."""
    names = ["p1", "p2", "p3"]
    for name in names:
        await push(http, queue, f"{name}-0", partition=name)
    await ack_batch(http, await pop_messages(http, queue, partitions=3, batch=10))
    for name in names:
        await push(http, queue, f"{name}-1", f"{name}-2", f"{name}-3", partition=name)

    first = await pop(http, queue, partitions=3, batch=5)
    counts = Counter(message["partition"] for message in first["messages"])
    assert sorted(counts.values()) == [2, 3]
    assert first["partitionsClaimed"] == 2
    assert {m["deliveryAttempt"] for m in first["messages"]} == {1}
    assert {m["leaseId"] for m in first["messages"]} == {first["leaseId"]}
    await ack_batch(http, first["messages"])

    second = await pop_messages(http, queue, partitions=3, batch=10)
    delivered: dict[str, list] = {}
    for message in first["messages"] + second:
        delivered.setdefault(message["partition"], []).append(message["data"])
    assert delivered == {name: [f"{name}-1", f"{name}-2", f"{name}-3"] for name in names}
    assert await pop(http, queue, partitions=3) is None


async def test_auto_ack_has_empty_lease_and_no_redelivery(http, queue):
    await push(http, queue, "a", "b")
    body = await pop(http, queue, autoAck=True)
    assert body["leaseId"] == ""
    assert [m["data"] for m in body["messages"]] == ["a", "b"]
    assert all(m["leaseId"] == "" for m in body["messages"])
    assert await pop(http, queue) is None
    assert await pop(http, queue, autoAck=True) is None
    await push(http, queue, "c")
    assert [m["data"] for m in await pop_messages(http, queue, autoAck=True)] == ["c"]


async def test_pop_answer_shape(http, queue):
    [pushed] = await push(http, queue, {"hello": "world"}, partition="shape", txids=["tx-shape"])
    body = await pop(http, queue, "shape")
    assert set(body) == POP_FIELDS
    assert body["success"] is True
    assert body["queue"] == queue
    assert body["partition"] == "shape"
    uuid.UUID(body["partitionId"])
    uuid.UUID(body["leaseId"])
    assert body["consumerGroup"] == QUEUE_MODE
    assert body["partitionsClaimed"] == 1
    [message] = body["messages"]
    assert set(message) == MESSAGE_FIELDS
    assert message["id"] == pushed["message_id"]
    assert message["transactionId"] == "tx-shape"
    assert message["traceId"] is None
    assert message["data"] == {"hello": "world"}
    assert message["producerSub"] is None
    assert ISO_MILLIS.match(message["createdAt"]), message["createdAt"]
    assert message["partitionId"] == body["partitionId"]
    assert message["partition"] == "shape"
    assert message["leaseId"] == body["leaseId"]
    assert message["consumerGroup"] == QUEUE_MODE
    assert message["deliveryAttempt"] == 1


async def test_named_group_is_echoed(http, queue):
    await push(http, queue, 1)
    body = await pop(http, queue, consumerGroup="billing", subscriptionMode="all")
    assert body["consumerGroup"] == "billing"
    assert body["messages"][0]["consumerGroup"] == "billing"


PAYLOADS = [
    {"a": 1, "b": [1, 2, {"c": None}], "d": {"e": {"f": "g"}}},
    [1, "two", 3.5, None, True, False, [], {}],
    "just a string",
    "",
    0,
    -17,
    3.14159,
    12345678901234567890,
    1e-7,
    None,
    True,
    False,
    {},
    [],
    "ünïcødé ✓ 漢字 🎉 \u00e9 \\ \" \n\t",
    {"emoji 🎉": ["日本語", {"κλειδί": "τιμή"}]},
    {"deep": [[[[[[{"x": [[[1]]]}]]]]]]},
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=[f"p{i}" for i in range(len(PAYLOADS))])
async def test_data_round_trips_exactly(http, queue, payload):
    await push(http, queue, payload)
    [message] = await pop_messages(http, queue)
    assert message["data"] == payload
    assert type(message["data"]) is type(payload)


async def test_data_round_trips_in_one_mixed_push(http, queue):
    await push_items(http, [item(queue, p) for p in PAYLOADS])
    messages = await pop_messages(http, queue)
    assert [m["data"] for m in messages] == PAYLOADS


async def test_trace_id_echoed(http, queue):
    await push_items(http, [item(queue, 1, traceId="trace-abc")])
    [message] = await pop_messages(http, queue)
    assert message["traceId"] == "trace-abc"


async def test_pop_by_unicode_partition_name(http, queue):
    partition = "Zürich 東京 🎉"
    await push(http, queue, "u", partition=partition)
    await push(http, queue, "other", partition="plain")
    body = await pop(http, queue, partition)
    assert body["partition"] == partition
    assert [m["data"] for m in body["messages"]] == ["u"]
