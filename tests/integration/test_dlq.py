"""GET /api/v1/dlq over raw HTTP: filters, paging, the entry's fields, bad parameters."""

from __future__ import annotations

import pytest

from tests.integration.helpers import ISO_MILLIS, item, push_items


async def dead_letter(http, queue, partition, n, group=None):
    await push_items(http, [item(queue, {"n": i}, partition) for i in range(n)])
    params = {"batch": 100, **({"consumerGroup": group, "subscriptionMode": "all"} if group else {})}
    popped = (await http.get(f"/api/v1/pop/queue/{queue}/partition/{partition}", params=params)).json()
    acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
             "status": "dlq", "error": f"bad {m['data']['n']}"} for m in popped["messages"]]
    answer = await http.post("/api/v1/ack/batch", json={"acknowledgments": acks, "consumerGroup": group})
    assert all(r["success"] and r["dlq"] for r in answer.json())
    return popped["messages"]


async def test_entries_carry_the_message_its_error_and_where_it_failed(http, queue):
    [message] = await dead_letter(http, queue, "p1", 1, group="billing")
    body = (await http.get("/api/v1/dlq", params={"queue": queue})).json()
    assert body["total"] == 1
    [entry] = body["messages"]
    assert entry["messageId"] == message["id"] and entry["transactionId"] == message["transactionId"]
    assert entry["partitionId"] == message["partitionId"] and entry["partition"] == "p1"
    assert entry["queue"] == queue and entry["consumerGroup"] == "billing"
    assert entry["errorMessage"] == "bad 0" and entry["data"] == {"n": 0}
    assert ISO_MILLIS.match(entry["createdAt"]) and ISO_MILLIS.match(entry["failedAt"])


async def test_filters_by_group_and_partition_and_pages(http, queue):
    await dead_letter(http, queue, "p1", 3)
    await dead_letter(http, queue, "p2", 2, group="g")
    everything = (await http.get("/api/v1/dlq", params={"queue": queue})).json()
    assert everything["total"] == 5
    by_group = (await http.get("/api/v1/dlq", params={"queue": queue, "consumerGroup": "g"})).json()
    assert by_group["total"] == 2 and {m["partition"] for m in by_group["messages"]} == {"p2"}
    by_partition = (await http.get("/api/v1/dlq", params={"queue": queue, "partition": "p1"})).json()
    assert by_partition["total"] == 3
    page = (await http.get("/api/v1/dlq", params={"queue": queue, "limit": 2, "offset": 4})).json()
    assert page["total"] == 5 and len(page["messages"]) == 1
    past = (await http.get("/api/v1/dlq", params={"queue": queue, "limit": 2, "offset": 10})).json()
    assert past["total"] == 5 and past["messages"] == []


async def test_an_unknown_queue_has_an_empty_dlq(http, queue):
    body = (await http.get("/api/v1/dlq", params={"queue": queue})).json()
    assert body["messages"] == [] and body["total"] == 0


@pytest.mark.parametrize("params", [{}, {"queue": "a/b"}, {"queue": "q", "limit": 0},
                                    {"queue": "q", "offset": -1}, {"queue": "q", "from": "yesterday"}])
async def test_bad_parameters_are_400(http, params):
    response = await http.get("/api/v1/dlq", params=params)
    assert response.status_code == 400 and "error" in response.json()


async def test_each_error_stays_with_its_message_whatever_it_holds(http, queue):
    """Names travel to PostgreSQL joined by a control character (engine/names.py); an error is
    free text, so one holding that very character, a newline, or nothing at all, beside others
    in one batch, must reach the dead-letter entry of its own message unchanged."""
    await push_items(http, [item(queue, {"n": i}, "p") for i in range(3)])
    popped = (await http.get(f"/api/v1/pop/queue/{queue}/partition/p", params={"batch": 10})).json()
    errors = ["split\x1fhere", None, "two\nlines"]
    acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
             "status": "dlq", **({} if error is None else {"error": error})}
            for m, error in zip(popped["messages"], errors, strict=True)]
    answer = await http.post("/api/v1/ack/batch", json={"acknowledgments": acks})
    assert [r["dlq"] for r in answer.json()] == [True, True, True]
    entries = (await http.get("/api/v1/dlq", params={"queue": queue})).json()["messages"]
    assert {e["data"]["n"]: e["errorMessage"] for e in entries} == dict(enumerate(errors))
