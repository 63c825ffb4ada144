"""DLQ replay and purge over raw HTTP."""

from __future__ import annotations

from tests.integration.test_dlq import dead_letter


async def entries(http, queue, **params):
    return (await http.get("/api/v1/dlq", params={"queue": queue, **params})).json()


async def test_replay_puts_the_message_back_and_removes_the_entry(http, queue):
    [message] = await dead_letter(http, queue, "p1", 1)
    [entry] = (await entries(http, queue))["messages"]
    response = await http.post(f"/api/v1/dlq/{entry['id']}/replay")
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["success"] and answer["id"] == entry["id"] and answer["queue"] == queue
    assert answer["partition"] == "p1" and answer["transactionId"] == message["transactionId"]
    assert (await entries(http, queue))["total"] == 0
    popped = (await http.get(f"/api/v1/pop/queue/{queue}")).json()["messages"]
    assert [(m["data"], m["transactionId"], m["id"]) for m in popped] == [
        ({"n": 0}, message["transactionId"], answer["messageId"])]
    # replaying twice: the entry is gone
    assert (await http.post(f"/api/v1/dlq/{entry['id']}/replay")).status_code == 404


async def test_replay_of_unknown_or_malformed_ids(http):
    assert (await http.post("/api/v1/dlq/00000000-0000-0000-0000-000000000000/replay")).status_code == 404
    bad = await http.post("/api/v1/dlq/not-an-id/replay")
    assert bad.status_code == 400 and "error" in bad.json()


async def test_purge_by_queue_group_and_partition(http, queue):
    await dead_letter(http, queue, "p1", 3)
    await dead_letter(http, queue, "p2", 2, group="g")
    response = await http.delete("/api/v1/dlq", params={"queue": queue, "consumerGroup": "g"})
    assert response.status_code == 200 and response.json()["deleted"] == 2
    assert (await entries(http, queue))["total"] == 3
    assert (await http.delete("/api/v1/dlq", params={"queue": queue, "partition": "p1"})).json()["deleted"] == 3
    assert (await entries(http, queue))["total"] == 0
    assert (await http.delete("/api/v1/dlq", params={"queue": queue})).json()["deleted"] == 0


async def test_purge_needs_a_valid_queue(http):
    for params in ({}, {"queue": "a/b"}, {"queue": "q", "consumerGroup": "x" * 300}):
        response = await http.delete("/api/v1/dlq", params=params)
        assert response.status_code == 400 and "error" in response.json()
