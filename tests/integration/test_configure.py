"""POST /api/v1/configure and DELETE /api/v1/resources/queues/:queue."""

from __future__ import annotations

import pytest

from tests.integration.helpers import configure, pop, push, queue_count

DEFAULTS = {
    "leaseTime": 300, "retryLimit": 3, "deadLetterQueue": True, "dlqAfterMaxRetries": True,
    "delayedProcessing": 0, "windowBuffer": 0, "minPopWaitTime": 0, "retentionEnabled": False,
    "retentionSeconds": 0, "completedRetentionSeconds": 0, "maxWaitTimeSeconds": 0,
    "encryptionEnabled": False, "dedupWindowSeconds": 3600, "priority": 0, "ttl": 0, "maxSize": 0,
    "retryDelay": 1000,
}


async def test_configure_answer_has_every_option(http, queue, db):
    answer = await configure(http, queue, {"retryLimit": 5})
    assert answer["configured"] is True
    assert answer["queue"] == queue
    assert str(answer["queueId"]) == str(await db.fetchval("SELECT id FROM rq_queues WHERE name = $1", queue))
    assert "namespace" in answer and "task" in answer
    assert answer["options"] == {**DEFAULTS, "retryLimit": 5}


async def test_configure_creates_a_new_queue(http, queue, db):
    assert await queue_count(db, queue) == 0
    answer = await configure(http, queue)
    assert answer["options"] == DEFAULTS
    assert await queue_count(db, queue) == 1


async def test_configure_namespace_and_task(http, queue):
    answer = await configure(http, queue, {}, namespace="billing", task="invoices")
    assert answer["namespace"] == "billing"
    assert answer["task"] == "invoices"
    await push(http, queue, "m")
    body = await pop(http, namespace="billing", task="invoices", consumerGroup=f"g-{queue}", subscriptionMode="all")
    assert body is not None and body["queue"] == queue


async def test_configure_null_namespace_keeps_it(http, queue):
    await configure(http, queue, {}, namespace="ns1", task="t1")
    answer = await configure(http, queue, {}, namespace=None, task=None)
    assert answer["namespace"] == "ns1"
    assert answer["task"] == "t1"


async def test_merge_keeps_absent_keys(http, queue):
    await configure(http, queue, {"retryLimit": 7, "leaseTime": 42})
    answer = await configure(http, queue, {"ttl": 99})
    assert answer["options"] == {**DEFAULTS, "retryLimit": 7, "leaseTime": 42, "ttl": 99}
    answer = await configure(http, queue, {"retryLimit": 1}, mode="merge")
    assert answer["options"] == {**DEFAULTS, "retryLimit": 1, "leaseTime": 42, "ttl": 99}


async def test_null_restores_default(http, queue):
    await configure(http, queue, {"retryLimit": 7, "leaseTime": 42})
    answer = await configure(http, queue, {"retryLimit": None})
    assert answer["options"] == {**DEFAULTS, "leaseTime": 42}


async def test_replace_resets_absent_keys(http, queue):
    await configure(http, queue, {"retryLimit": 7, "leaseTime": 42, "deadLetterQueue": False})
    answer = await configure(http, queue, {"ttl": 10}, mode="replace")
    assert answer["options"] == {**DEFAULTS, "ttl": 10}
    # and it is stored: a later empty merge echoes the same
    assert (await configure(http, queue, {}))["options"] == {**DEFAULTS, "ttl": 10}


async def test_configured_lease_time_is_used_by_pop(http, queue, db):
    await configure(http, queue, {"leaseTime": 1234})
    await push(http, queue, "m")
    await pop(http, queue)
    remaining = await db.fetchval(
        "SELECT extract(epoch FROM c.lease_expires_at - now()) FROM rq_consumers c "
        "JOIN rq_partitions p ON p.id = c.partition_id JOIN rq_queues q ON q.id = p.queue_id "
        "WHERE q.name = $1", queue)
    assert 1200 < remaining <= 1234


async def test_unknown_option_is_400_naming_it(http, queue, db):
    response = await http.post("/api/v1/configure", json={"queue": queue, "options": {"leaseTyme": 5}})
    assert response.status_code == 400
    assert "leaseTyme" in response.json()["error"]
    assert await queue_count(db, queue) == 0


@pytest.mark.parametrize("options", [
    {"leaseTime": "60"},
    {"retryLimit": True},
    {"retryLimit": 1.5},
    {"deadLetterQueue": "yes"},
    {"deadLetterQueue": 1},
    {"dedupWindowSeconds": [1]},
    {"leaseTime": -1},
    {"delayedProcessing": -5},
    {"retentionSeconds": -1},
    {"dedupWindowSeconds": -1},
    {"leaseTime": 0},
    {"retryLimit": -1},
], ids=lambda o: f"{next(iter(o))}={next(iter(o.values()))!r}")
async def test_bad_option_values_are_400(http, queue, db, options):
    response = await http.post("/api/v1/configure", json={"queue": queue, "options": options})
    assert response.status_code == 400
    assert isinstance(response.json()["error"], str)
    assert await queue_count(db, queue) == 0


async def test_bad_option_leaves_existing_configuration(http, queue):
    await configure(http, queue, {"retryLimit": 9})
    response = await http.post("/api/v1/configure", json={"queue": queue, "options": {"retryLimit": 2,
                                                                                      "leaseTime": -1}})
    assert response.status_code == 400
    assert (await configure(http, queue, {}))["options"]["retryLimit"] == 9


@pytest.mark.parametrize("body", [
    {"options": {}},
    {"queue": "", "options": {}},
    {"queue": 5, "options": {}},
    {"queue": "q-bad-mode", "mode": "overwrite"},
    {"queue": "q-bad-options", "options": [1, 2]},
])
async def test_bad_configure_bodies_are_400(http, body, db):
    response = await http.post("/api/v1/configure", json=body)
    assert response.status_code == 400
    assert "error" in response.json()
    if isinstance(body.get("queue"), str) and body["queue"]:
        assert await queue_count(db, body["queue"]) == 0


async def test_delete_queue(http, queue, db):
    await push(http, queue, "a", "b", partition="p1")
    await push(http, queue, "c", partition="p2")
    await pop(http, queue, consumerGroup="g")
    response = await http.delete(f"/api/v1/resources/queues/{queue}")
    assert response.status_code == 200
    assert response.json()["deleted"] is True
    assert await queue_count(db, queue) == 0
    response = await http.delete(f"/api/v1/resources/queues/{queue}")
    assert response.status_code == 200
    assert response.json()["deleted"] is False
    # its messages are gone
    assert await pop(http, queue) is None
    assert await pop(http, queue, consumerGroup="g") is None
    assert await pop(http, queue, "p1") is None


async def test_delete_then_recreate_starts_empty(http, queue):
    await push(http, queue, "old")
    await http.delete(f"/api/v1/resources/queues/{queue}")
    await push(http, queue, "new")
    body = await pop(http, queue)
    assert [m["data"] for m in body["messages"]] == ["new"]


async def test_delete_unknown_queue_is_deleted_false(http, queue):
    response = await http.delete(f"/api/v1/resources/queues/{queue}")
    assert response.status_code == 200
    assert response.json()["deleted"] is False
