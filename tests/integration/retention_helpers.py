"""Helpers of the retention and maintenance tests: queues configured, filled and consumed over
HTTP, and what the database stores afterwards."""

from __future__ import annotations


async def configure(http, queue, **options):
    response = await http.post("/api/v1/configure", json={"queue": queue, "options": options})
    assert response.status_code == 200, response.text


async def push(http, queue, partition, values):
    response = await http.post("/api/v1/push", json={"items": [
        {"queue": queue, "partition": partition, "payload": v} for v in values]})
    assert response.status_code == 201


async def consume_all(http, queue, group=None):
    seen = []
    while True:
        params = {"batch": 100, **({"consumerGroup": group, "subscriptionMode": "all"} if group else {})}
        response = await http.get(f"/api/v1/pop/queue/{queue}", params=params)
        if response.status_code == 204:
            return seen
        messages = response.json()["messages"]
        seen += [m["data"] for m in messages]
        acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"]}
                for m in messages]
        answer = await http.post("/api/v1/ack/batch", json={"acknowledgments": acks, "consumerGroup": group})
        assert all(r["success"] for r in answer.json())


async def segments(db, queue) -> int:
    return await db.fetchval("SELECT count(*) FROM rq_segments s JOIN rq_partitions p ON p.id = s.partition_id "
                             "JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1", queue)


async def equals(awaitable, expected) -> bool:
    return (await awaitable) == expected


async def due_at(db, queue, seconds: float):
    """The database instant at which every segment of the queue is ``seconds`` old."""
    return await db.fetchval(
        "SELECT max(s.created_at) + make_interval(secs => $2) FROM rq_segments s "
        "JOIN rq_partitions p ON p.id = s.partition_id JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1",
        queue, float(seconds))
