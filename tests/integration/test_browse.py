"""Messages routes over raw HTTP: browse with status and paging, detail, delete, retry."""

from __future__ import annotations

import pytest

from tests.integration.helpers import ISO_MILLIS, ack, ack_batch, item, pop, push, push_items


async def listing(http, **params):
    response = await http.get("/api/v1/messages", params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def test_a_page_carries_each_message_with_its_status(http, queue):
    pushed = await push(http, queue, {"n": 0}, {"n": 1}, {"n": 2}, partition="p1")
    body = await listing(http, queue=queue)
    assert body["total"] == 3 and body["limit"] == 100 and body["offset"] == 0
    newest = body["messages"][0]
    assert newest["data"] == {"n": 2} and newest["id"] == pushed[2]["message_id"]
    assert newest["transactionId"] == pushed[2]["transaction_id"] and newest["queue"] == queue
    assert newest["partition"] == "p1" and newest["status"] == "pending" and newest["traceId"] is None
    assert ISO_MILLIS.match(newest["createdAt"]) and len(newest["partitionId"]) == 36
    assert [m["data"]["n"] for m in body["messages"]] == [2, 1, 0]


async def test_statuses_follow_the_queue_mode_cursor_and_a_named_group(http, queue):
    await push(http, queue, *[{"n": i} for i in range(4)])
    first = await pop(http, queue, batch=1)
    await ack(http, first["messages"][0])                    # n=0 completed
    dead = await pop(http, queue, batch=1)
    await ack(http, dead["messages"][0], "dlq", error="x")  # n=1 dead
    await pop(http, queue, batch=1)                          # n=2 leased, n=3 pending
    by_n = {m["data"]["n"]: m["status"] for m in (await listing(http, queue=queue))["messages"]}
    assert by_n == {0: "completed", 1: "dead", 2: "leased", 3: "pending"}
    assert [m["data"]["n"] for m in (await listing(http, queue=queue, status="dead"))["messages"]] == [1]
    pending = await listing(http, queue=queue, status="pending")
    assert pending["total"] == 1
    # relative to a group that has read nothing: everything pending
    group_view = await listing(http, queue=queue, consumerGroup="never-read")
    assert {m["status"] for m in group_view["messages"]} == {"pending"}


async def test_paging_partition_and_time_filters(http, queue):
    await push_items(http, [item(queue, {"n": i}, "a" if i % 2 else "b") for i in range(7)])
    page = await listing(http, queue=queue, limit=3, offset=6)
    assert page["total"] == 7 and len(page["messages"]) == 1
    past = await listing(http, queue=queue, limit=3, offset=50)
    assert past["total"] == 7 and past["messages"] == []
    only_a = await listing(http, queue=queue, partition="a")
    assert only_a["total"] == 3 and {m["partition"] for m in only_a["messages"]} == {"a"}
    assert (await listing(http, queue=queue, **{"from": "2999-01-01T00:00:00Z"}))["total"] == 0
    assert (await listing(http, queue=queue, to="2000-01-01T00:00:00Z"))["total"] == 0


async def test_detail_and_404(http, queue):
    [pushed] = await push(http, queue, {"hello": "world"})
    [listed] = (await listing(http, queue=queue))["messages"]
    response = await http.get(f"/api/v1/messages/{listed['partitionId']}/{pushed['transaction_id']}")
    assert response.status_code == 200
    detail = response.json()
    assert detail["data"] == {"hello": "world"} and detail["status"] == "pending"
    assert detail["deadLetteredFor"] == []
    missing = await http.get(f"/api/v1/messages/{listed['partitionId']}/nope")
    assert missing.status_code == 404 and "error" in missing.json()
    unknown_partition = await http.get("/api/v1/messages/00000000-0000-0000-0000-000000000000/x")
    assert unknown_partition.status_code == 404


async def test_delete_removes_the_message_and_its_data(http, queue, db):
    pushed = await push(http, queue, {"secret": 1}, {"keep": 2})
    [_, first] = (await listing(http, queue=queue))["messages"]
    path = f"/api/v1/messages/{first['partitionId']}/{pushed[0]['transaction_id']}"
    response = await http.delete(path)
    assert response.status_code == 200 and response.json()["deleted"] == 1
    assert (await http.get(path)).status_code == 404
    assert (await http.delete(path)).status_code == 404
    assert [m["data"] for m in (await listing(http, queue=queue))["messages"]] == [{"keep": 2}]
    stored = await db.fetchval(
        "SELECT payloads[1] FROM rq_segments WHERE partition_id = $1", first["partitionId"])
    assert b"secret" not in stored and b'"deleted":true' in stored
    assert await db.fetchval("SELECT count(*) FROM rq_deleted WHERE partition_id = $1", first["partitionId"]) == 1


async def test_a_deleted_message_is_never_delivered(http, queue):
    pushed = await push(http, queue, {"n": 0}, {"n": 1}, {"n": 2})
    [m] = [m for m in (await listing(http, queue=queue))["messages"] if m["data"] == {"n": 1}]
    await http.delete(f"/api/v1/messages/{m['partitionId']}/{pushed[1]['transaction_id']}")
    delivered = []
    for _ in range(5):  # a leased span never straddles a deleted offset: it may take two pops
        popped = await pop(http, queue, batch=10)
        if popped is None:
            break
        delivered += [x["data"] for x in popped["messages"]]
        results = await ack_batch(http, popped["messages"])
        assert all(r["success"] for r in results) and any(r["leaseReleased"] for r in results)
    assert delivered == [{"n": 0}, {"n": 2}]


async def test_retry_puts_a_dead_letter_back(http, queue, db):
    [pushed] = await push(http, queue, {"n": "poison"})
    message = (await pop(http, queue))["messages"][0]
    await ack(http, message, "dlq", error="bad")
    assert (await listing(http, queue=queue, status="dead"))["total"] == 1
    path = f"/api/v1/messages/{message['partitionId']}/{pushed['transaction_id']}/retry"
    response = await http.post(path, json={})
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["success"] and answer["removedDeadLetters"] == 1 and answer["messageId"] != pushed["message_id"]
    again = (await pop(http, queue))["messages"]
    assert [(m["data"], m["transactionId"], m["id"]) for m in again] == [
        ({"n": "poison"}, pushed["transaction_id"], answer["messageId"])]
    assert (await http.get("/api/v1/dlq", params={"queue": queue})).json()["total"] == 0
    missing = await http.post(f"/api/v1/messages/{message['partitionId']}/nope/retry", json={})
    assert missing.status_code == 404


@pytest.mark.parametrize("path,params", [
    ("/api/v1/messages", {}),
    ("/api/v1/messages", {"queue": "a/b"}),
    ("/api/v1/messages", {"queue": "q", "status": "weird"}),
    ("/api/v1/messages", {"queue": "q", "limit": 0}),
    ("/api/v1/messages", {"queue": "q", "limit": 100000}),
    ("/api/v1/messages", {"queue": "q", "offset": -1}),
    ("/api/v1/messages", {"queue": "q", "from": "yesterday"}),
    ("/api/v1/messages", {"queue": "q", "from": "2024-01-02T00:00:00Z", "to": "2024-01-01T00:00:00Z"}),
    ("/api/v1/messages/not-a-uuid/tx", {}),
])
async def test_bad_input_is_400(http, path, params):
    response = await http.get(path, params=params)
    assert response.status_code == 400 and "error" in response.json()


async def test_bad_addresses_on_delete_and_retry_are_400(http):
    assert (await http.delete("/api/v1/messages/nope/tx")).status_code == 400
    assert (await http.post("/api/v1/messages/nope/tx/retry")).status_code == 400
    assert (await http.post("/api/v1/messages/00000000-0000-0000-0000-000000000000/tx/retry")).status_code == 404
