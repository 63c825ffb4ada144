"""The operator surface through the official client: admin messages, traces, status, DLQ."""

from __future__ import annotations

import asyncio

from tests.conformance.helpers import create_queue, pop_now

CONSUME_DEADLINE = 20


async def test_browse_detail_retry_and_delete_through_admin(queen, queue):
    await create_queue(queen, queue, lease_time=30, retry_limit=3)
    pushed = await queen.queue(queue).push([{"data": {"n": 1}}, {"data": {"n": 2}}])
    listed = await queen.admin.list_messages(queue=queue, limit=10)
    assert listed["total"] == 2 and {m["data"]["n"] for m in listed["messages"]} == {1, 2}
    first = next(m for m in listed["messages"] if m["data"] == {"n": 1})
    detail = await queen.admin.get_message(first["partitionId"], pushed[0]["transaction_id"])
    assert detail["data"] == {"n": 1} and detail["status"] == "pending"

    [message, _] = await pop_now(queen, queue)
    assert (await queen.ack(message, "dlq", {"error": "poison"}))["success"] is True
    dead = await queen.queue(queue).dlq().get()
    assert dead["total"] == 1 and dead["messages"][0]["errorMessage"] == "poison"
    retried = await queen.admin.retry_message(message["partitionId"], message["transactionId"])
    assert retried["success"] is True
    assert (await queen.queue(queue).dlq().get())["total"] == 0

    deleted = await queen.admin.delete_message(first["partitionId"], pushed[1]["transaction_id"])
    assert deleted["success"] is True
    remaining = await queen.admin.list_messages(queue=queue)
    assert [m["data"] for m in remaining["messages"] if m["status"] != "completed"] == [{"n": 1}]


async def test_traces_recorded_by_a_consumer_are_found(queen, queue):
    await create_queue(queen, queue, lease_time=30)
    [pushed] = await queen.queue(queue).push({"data": {"order": 7}})
    seen = []

    async def handler(message):
        result = await message["trace"]({"traceName": f"{queue}-flow", "data": {"step": "handled"}})
        assert result["success"] is True
        seen.append((message, result))

    await asyncio.wait_for(queen.queue(queue).batch(1).limit(1).consume(handler), CONSUME_DEADLINE)
    [(message, result)] = seen
    timeline = await queen.admin.get_traces_for_message(message["partitionId"], pushed["transaction_id"])
    assert [t["data"] for t in timeline["traces"]] == [{"step": "handled"}]
    # the 201 carries the new trace's id as Queen's traceId, and msg.trace() hands it back
    assert timeline["traces"][0]["id"] == result["traceId"]
    # Queen's read shapes, snake_case as Queen answers them
    [trace] = timeline["traces"]
    assert (trace["event_type"], trace["consumer_group"], trace["trace_names"]) == (
        "info", "__QUEUE_MODE__", [f"{queue}-flow"])
    by_name = await queen.admin.get_traces_by_name(f"{queue}-flow")
    assert by_name["total"] == 1 and by_name["pagination"] == {"limit": 100, "offset": 0}
    [found] = by_name["traces"]
    assert (found["transaction_id"], found["queue_name"], found["partition_name"]) == (
        pushed["transaction_id"], queue, "Default")
    names = await queen.admin.get_trace_names(search=f"{queue}-flow")
    assert [(n["trace_name"], n["trace_count"], n["message_count"]) for n in names["trace_names"]] == [
        (f"{queue}-flow", 1, 1)]


async def test_status_analytics_and_metrics(queen, queue):
    await queen.queue(queue).push([{"data": i} for i in range(3)])
    assert (await queen.admin.refresh_consumer_stats())["success"] is True
    status = await queen.admin.get_status()
    assert status["status"] == "healthy"
    stats = await queen.admin.get_queue_stats(limit=1000)
    assert any(q["queue"] == queue and q["totals"]["pushed"] == 3 for q in stats["queues"])
    detail = await queen.admin.get_queue_detail(queue)
    assert detail["depth"] == 3
    analytics = await queen.admin.get_analytics(queue=queue, interval=10)
    assert sum(p["pushed"] for p in analytics["queues"][0]["points"]) == 3
    metrics = await queen.admin.metrics()
    assert any(q["queue"] == queue for q in metrics["queues"])


async def test_dlq_replay_and_purge_reach_the_client_s_builder(queen, queue, broker_url):
    import httpx

    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).push([{"data": "a"}, {"data": "b"}])
    for message in await pop_now(queen, queue):
        await queen.ack(message, "dlq", {"error": "bad"})
    entries = (await queen.queue(queue).dlq().get())["messages"]
    assert len(entries) == 2
    async with httpx.AsyncClient(base_url=broker_url) as http:
        assert (await http.post(f"/api/v1/dlq/{entries[0]['id']}/replay")).status_code == 200
        assert (await http.delete("/api/v1/dlq", params={"queue": queue})).json()["deleted"] == 1
    assert (await queen.queue(queue).dlq().get())["total"] == 0
    assert [m["data"] for m in await pop_now(queen, queue)] == [entries[0]["data"]]
