"""A queue's status carries its options, so the console reads them without the partition
aggregates of the queue detail route (which take seconds at a million partitions)."""

from __future__ import annotations


async def test_queue_status_carries_its_stored_options(http, queue):
    configured = (await http.post("/api/v1/configure", json={"queue": queue, "options": {"retryLimit": 9}})).json()
    answer = await http.get(f"/api/v1/status/queues/{queue}")
    assert answer.status_code == 200
    assert answer.json()["options"] == configured["options"]
    assert answer.json()["options"]["retryLimit"] == 9


async def test_an_unknown_queue_status_is_404(http, queue):
    answer = await http.get(f"/api/v1/status/queues/{queue}")
    assert answer.status_code == 404 and "error" in answer.json()
