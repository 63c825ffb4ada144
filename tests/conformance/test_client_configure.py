"""Queue configuration and deletion through the client's QueueBuilder."""

from __future__ import annotations

import httpx
import pytest

from tests.conformance.helpers import create_queue, pop_now, pop_until
from tests.conftest import stored_for


async def test_create_echoes_the_options_sent(queen, queue):
    result = await create_queue(queen, queue, lease_time=7, retry_limit=2, delayed_processing=0,
                                dedup_window_seconds=120)

    assert result["configured"] is True
    assert result["queue"] == queue
    assert result["queueId"]
    options = result["options"]
    # what the caller set, converted to camelCase by the client
    assert options["leaseTime"] == 7
    assert options["retryLimit"] == 2
    assert options["dedupWindowSeconds"] == 120
    # QUEUE_DEFAULTS the client adds to every create
    assert options["priority"] == 0
    assert options["windowBuffer"] == 0
    assert options["maxSize"] == 0
    assert options["retentionSeconds"] == 0
    assert options["completedRetentionSeconds"] == 0
    assert options["encryptionEnabled"] is False


async def test_create_without_config_sends_the_client_defaults(queen, queue):
    result = await queen.queue(queue).create()

    assert result["configured"] is True
    assert result["queue"] == queue
    assert result["options"]["leaseTime"] == 300
    assert result["options"]["retryLimit"] == 3


async def test_create_with_namespace_and_task_echoes_them(queen, queue):
    result = await queen.queue(queue).namespace("billing").task("invoices").config({"lease_time": 5}).create()

    assert result["namespace"] == "billing"
    assert result["task"] == "invoices"
    assert result["options"]["leaseTime"] == 5


async def test_reconfigure_updates_options(queen, queue):
    await create_queue(queen, queue, lease_time=9, retry_limit=1)
    again = await create_queue(queen, queue, retry_limit=5)

    assert again["configured"] is True
    assert again["options"]["retryLimit"] == 5
    # the client sends lease_time 300 again (QUEUE_DEFAULTS on every call)
    assert again["options"]["leaseTime"] == 300


async def test_delayed_processing_holds_messages_back(queen, queue):
    await create_queue(queen, queue, delayed_processing=1)
    await queen.queue(queue).push({"data": {"n": 1}})

    assert await pop_now(queen, queue) == []
    messages = await pop_until(queen, queue)
    assert [m["data"] for m in messages] == [{"n": 1}]


async def test_delete_queue_removes_it_and_its_messages(queen, queue):
    await create_queue(queen, queue)
    await queen.queue(queue).push([{"data": {"n": i}} for i in range(3)])

    result = await queen.queue(queue).delete()

    assert result["deleted"] is True
    assert await pop_now(queen, queue) == []


async def test_delete_missing_queue_reports_not_deleted(queen, queue):
    result = await queen.queue(queue).delete()

    assert result["deleted"] is False


async def test_push_after_delete_starts_a_fresh_queue(queen, queue):
    await create_queue(queen, queue)
    await queen.queue(queue).push({"data": {"old": True}})
    await queen.queue(queue).delete()

    await queen.queue(queue).push({"data": {"new": True}})
    messages = await pop_now(queen, queue)

    assert [m["data"] for m in messages] == [{"new": True}]


async def test_push_into_a_full_queue_raises_and_writes_nothing(queen, queue):
    await create_queue(queen, queue, max_size=2)
    await queen.queue(queue).push([{"data": 1}, {"data": 2}])

    with pytest.raises(httpx.HTTPStatusError) as refused:
        await queen.queue(queue).push({"data": 3})

    assert refused.value.response.status_code == 409
    assert refused.value.response.json()["code"] == "queue_full"
    assert [m["data"] for m in await pop_now(queen, queue)] == [1, 2]


async def test_ttl_drops_what_waited_too_long(queen, queue, db):
    await queen.queue(queue).config({"ttl": 1}).create()
    await queen.queue(queue).push({"data": "stale"})
    await stored_for(db, queue, 1)
    await queen.queue(queue).push({"data": "fresh"})
    assert [m["data"] for m in await pop_now(queen, queue)] == ["fresh"]
