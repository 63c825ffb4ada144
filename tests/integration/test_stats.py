"""Status, analytics and metrics over raw HTTP, from the stats tables."""

from __future__ import annotations

import re

import pytest

from tests.conftest import eventually
from tests.integration.helpers import ack, ack_batch, pop, push


async def refreshed(http):
    response = await http.post("/api/v1/stats/refresh", json={})
    assert response.status_code == 200 and response.json()["success"] is True


async def queue_status(http, queue):
    response = await http.get(f"/api/v1/status/queues/{queue}")
    assert response.status_code == 200, response.text
    return response.json()


async def test_counters_and_gauges_follow_the_traffic(http, queue):
    await push(http, queue, *range(5))
    popped = (await pop(http, queue, batch=3))["messages"]
    await ack_batch(http, popped[:2])
    await ack(http, popped[2], "dlq", error="x")
    await pop(http, queue, batch=1, consumerGroup="reporting", subscriptionMode="all")

    async def settled():
        await refreshed(http)
        body = await queue_status(http, queue)
        return body if body["totals"]["acked"] == 3 else None

    body = await eventually(settled)
    assert body, "stats never caught up"
    assert body["totals"]["pushed"] == 5 and body["totals"]["popped"] >= 3
    assert body["totals"]["deadLettered"] in (0, 1)  # counted 2 s behind (in-flight transactions)
    assert body["depth"] == 2 and body["dlqDepth"] == 1 and body["partitions"] == 1
    assert body["consumerGroups"] == [{"consumerGroup": "reporting", "backlog": 5, "partitionsBehind": 1}]
    assert body["lag"] == 5
    assert body["series"]["intervalSeconds"] == 60


async def test_dead_letters_are_counted_once_settled(http, queue):
    await push(http, queue, "a")
    [message] = (await pop(http, queue))["messages"]
    await ack(http, message, "dlq", error="x")

    async def counted():
        await refreshed(http)
        return (await queue_status(http, queue))["totals"]["deadLettered"] == 1

    assert await eventually(counted, seconds=8, interval=0.5)


async def test_status_queues_and_analytics(http, queue):
    await push(http, queue, *range(3))
    await refreshed(http)
    status = (await http.get("/api/v1/status")).json()
    assert status["status"] == "healthy" and status["totals"]["pushed"] >= 3 and status["queues"] >= 1
    assert "pushedPerSecond" in status["throughput"]
    [database] = status["databases"]  # a deployment of the broker's one database (docs/shards.md)
    assert database["ordinal"] == 0 and database["catalog"] and database["healthy"]
    assert database["partitions"] == status["partitions"] and database["sizeBytes"] > 1_000_000
    assert database["connections"] >= 1 and database["transactionsCommitted"] > 0
    listed = (await http.get("/api/v1/status/queues", params={"limit": 1000})).json()
    mine = [q for q in listed["queues"] if q["queue"] == queue]
    assert mine and mine[0]["totals"]["pushed"] == 3 and listed["total"] >= 1
    analytics = (await http.get("/api/v1/status/analytics", params={"queue": queue, "interval": 10})).json()
    assert analytics["intervalSeconds"] == 10
    [series] = analytics["queues"]
    assert series["queue"] == queue and sum(p["pushed"] for p in series["points"]) == 3
    assert sum(p["pushed"] for p in analytics["throughput"]) == 3


async def test_metrics_json_and_prometheus(http, queue):
    await push(http, queue, *range(4))
    await refreshed(http)
    body = (await http.get("/metrics")).json()
    [mine] = [q for q in body["queues"] if q["queue"] == queue]
    assert mine["totals"]["pushed"] == 4 and body["process"]["pool"]["max"] >= 1
    response = await http.get("/metrics/prometheus")
    assert response.status_code == 200
    text = response.text
    assert re.search(rf'^reginamq_messages_pushed_total\{{queue="{queue}"\}} 4\.0$', text, re.M)
    assert re.search(rf'^reginamq_queue_depth\{{queue="{queue}"\}} 4\.0$', text, re.M)
    assert "# TYPE reginamq_request_duration_seconds histogram" in text
    assert re.search(r"^reginamq_db_pool_max\{pid=\"\d+\"\} \d", text, re.M)
    assert re.search(r"^reginamq_database_up 1\.0$", text, re.M)
    assert re.search(r"^reginamq_spool_waiting_bytes 0\.0$", text, re.M)
    assert re.search(r"^reginamq_spool_buffered_messages\{pid=\"\d+\"\} 0\.0$", text, re.M)
    assert body["process"]["spool"] == {"waitingBytes": 0, "bufferedMessages": 0}


async def test_unknown_queue_is_404(http, queue):
    response = await http.get(f"/api/v1/status/queues/{queue}")
    assert response.status_code == 404 and "error" in response.json()


@pytest.mark.parametrize("path,params", [
    ("/api/v1/status/analytics", {"interval": 1}),
    ("/api/v1/status/analytics", {"interval": "x"}),
    ("/api/v1/status/analytics", {"from": "2024-01-02T00:00:00Z", "to": "2024-01-01T00:00:00Z"}),
    ("/api/v1/status/analytics", {"from": "2000-01-01T00:00:00Z", "interval": 10}),
    ("/api/v1/status/analytics", {"queue": "a/b"}),
    ("/api/v1/status/queues", {"limit": 0}),
])
async def test_bad_parameters_are_400(http, path, params):
    response = await http.get(path, params=params)
    assert response.status_code == 400 and "error" in response.json()
