"""Bad input: each is a 4xx with a JSON {"error": ...} and changes nothing."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.integration.helpers import pop, pop_messages, push, queue_count, unique


def assert_error(response, status: int) -> dict:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body, dict)
    assert isinstance(body["error"], str) and body["error"]
    return body


async def test_malformed_json_push(http, db):
    queue = unique("q")
    response = await http.post("/api/v1/push", content=b'{"items": [{"queue": "' + queue.encode() + b'",',
                               headers={"content-type": "application/json"})
    assert_error(response, 400)
    assert await queue_count(db, queue) == 0


@pytest.mark.parametrize("path", ["/api/v1/ack", "/api/v1/ack/batch", "/api/v1/transaction",
                                  "/api/v1/configure"])
async def test_malformed_json_elsewhere(http, path):
    response = await http.post(path, content=b"{nope", headers={"content-type": "application/json"})
    assert_error(response, 400)


async def test_empty_body_push(http):
    response = await http.post("/api/v1/push", content=b"", headers={"content-type": "application/json"})
    assert_error(response, 400)


@pytest.mark.parametrize("items", [{"queue": "x", "payload": 1}, "items", 5, None])
async def test_items_not_a_list(http, items):
    response = await http.post("/api/v1/push", json={"items": items})
    assert_error(response, 400)


async def test_body_not_an_object(http):
    assert_error(await http.post("/api/v1/push", json=[{"queue": "x", "payload": 1}]), 400)
    assert_error(await http.post("/api/v1/push", json={}), 400)


def _bad_items(valid_queue: str) -> dict:
    return {
        "missing-queue": {"payload": 1},
        "missing-payload": {"queue": valid_queue + "-solo"},
        "queue-int": {"queue": 17, "payload": 1},
        "queue-null": {"queue": None, "payload": 1},
        "queue-list": {"queue": ["a"], "payload": 1},
        "queue-empty": {"queue": "", "payload": 1},
        "queue-too-long": {"queue": "q" * 256, "payload": 1},
        "queue-control-nul": {"queue": "bad\x00name", "payload": 1},
        "queue-control-newline": {"queue": "bad\nname", "payload": 1},
        "queue-control-del": {"queue": "bad\x7fname", "payload": 1},
        "partition-empty": {"queue": valid_queue + "-solo", "partition": "", "payload": 1},
        "partition-too-long": {"queue": valid_queue + "-solo", "partition": "p" * 256, "payload": 1},
        "partition-control": {"queue": valid_queue + "-solo", "partition": "p\tq", "payload": 1},
        "partition-int": {"queue": valid_queue + "-solo", "partition": 3, "payload": 1},
        "txid-empty": {"queue": valid_queue + "-solo", "transactionId": "", "payload": 1},
        "txid-int": {"queue": valid_queue + "-solo", "transactionId": 12, "payload": 1},
        "txid-control": {"queue": valid_queue + "-solo", "transactionId": "a\x01b", "payload": 1},
        "txid-too-long": {"queue": valid_queue + "-solo", "transactionId": "t" * 256, "payload": 1},
    }


BAD_ITEM_KINDS = list(_bad_items("q"))


@pytest.mark.parametrize("kind", BAD_ITEM_KINDS)
async def test_bad_item_rejects_the_whole_push(http, db, kind):
    good = unique("q")
    bad = _bad_items(good)[kind]
    response = await http.post("/api/v1/push", json={"items": [{"queue": good, "payload": "fine"}, bad]})
    assert_error(response, 400)
    # nothing was written: not even the valid item's queue exists
    assert await queue_count(db, good) == 0
    assert await queue_count(db, good + "-solo") == 0


async def test_name_of_255_characters_is_accepted(http, db):
    queue = ("q" + uuid.uuid4().hex) .ljust(255, "x")
    [result] = (await http.post("/api/v1/push", json={"items": [{"queue": queue, "payload": 1}]})).json()
    assert result["status"] == "queued"
    assert await queue_count(db, queue) == 1
    await http.delete(f"/api/v1/resources/queues/{queue}")


async def test_unknown_route_is_404_no_such_route(http):
    for method, path in [("GET", "/api/v1/nothing-here"), ("POST", "/api/v1/pushh"),
                         ("GET", "/api/v2/pop/queue/x"), ("GET", "/api/v1/pop/queue/x/nothing"),
                         ("DELETE", "/api/v1/resources/queues/x/extra")]:
        response = await http.request(method, path)
        assert response.status_code == 404, path
        assert response.json() == {"error": "Not Found", "code": "no_such_route"}


@pytest.mark.parametrize("method,path", [
    ("GET", "/api/v1/push"),
    ("PUT", "/api/v1/push"),
    ("POST", "/api/v1/pop/queue/x"),
    ("DELETE", "/api/v1/ack"),
    ("GET", "/api/v1/ack/batch"),
    ("GET", "/api/v1/configure"),
    ("GET", "/api/v1/lease/00000000-0000-0000-0000-000000000000/extend"),
    ("GET", "/api/v1/transaction"),
    ("POST", "/health"),
])
async def test_wrong_method_is_405(http, method, path):
    assert_error(await http.request(method, path), 405)


async def test_body_over_the_limit_is_413(http, db):
    queue = unique("q")
    big = "x" * (9 * 1024 * 1024)
    body = json.dumps({"items": [{"queue": queue, "payload": big}]}).encode()
    response = await http.post("/api/v1/push", content=body, headers={"content-type": "application/json"})
    assert_error(response, 413)
    assert await queue_count(db, queue) == 0


async def test_chunked_body_over_the_limit_is_413(http, db):
    queue = unique("q")
    body = json.dumps({"items": [{"queue": queue, "payload": "x" * (9 * 1024 * 1024)}]}).encode()

    async def chunks():
        for start in range(0, len(body), 256 * 1024):
            yield body[start:start + 256 * 1024]

    response = await http.post("/api/v1/push", content=chunks(), headers={"content-type": "application/json"})
    assert_error(response, 413)
    assert await queue_count(db, queue) == 0


async def test_large_body_under_the_limit_is_accepted(http, queue):
    payload = "y" * (3 * 1024 * 1024)
    response = await http.post("/api/v1/push", json={"items": [{"queue": queue, "payload": payload}]})
    assert response.status_code == 201
    [message] = await pop_messages(http, queue)
    assert message["data"] == payload


@pytest.mark.parametrize("content_type", ["application/xml", "text/html", "application/x-www-form-urlencoded"])
async def test_wrong_content_type_is_415(http, db, content_type):
    queue = unique("q")
    body = json.dumps({"items": [{"queue": queue, "payload": 1}]}).encode()
    response = await http.post("/api/v1/push", content=body, headers={"content-type": content_type})
    assert_error(response, 415)
    assert await queue_count(db, queue) == 0


async def test_json_content_type_with_charset_is_accepted(http, queue):
    body = json.dumps({"items": [{"queue": queue, "payload": 1}]}).encode()
    response = await http.post("/api/v1/push", content=body,
                               headers={"content-type": "application/json; charset=utf-8"})
    assert response.status_code == 201


@pytest.mark.parametrize("params", [
    {"batch": "0"}, {"batch": "abc"}, {"batch": "-3"}, {"batch": "1.5"},
    {"timeout": "-1"}, {"timeout": "soon"},
    {"partitions": "0"}, {"partitions": "x"},
    {"leaseSeconds": "-1"},
    {"autoAck": "maybe"}, {"wait": "perhaps"},
    {"subscriptionMode": "latest"}, {"subscriptionMode": "ALL"},
    {"subscriptionFrom": "yesterday"}, {"subscriptionFrom": "2024-13-45T99:00:00Z"},
], ids=lambda p: "&".join(f"{k}={v}" for k, v in p.items()))
async def test_bad_pop_parameters_are_400(http, queue, params):
    await push(http, queue, "m")
    response = await http.get(f"/api/v1/pop/queue/{queue}", params=params)
    assert_error(response, 400)
    # nothing was consumed or leased
    assert [m["data"] for m in await pop_messages(http, queue)] == ["m"]


async def test_bad_group_params_create_no_group(http, queue, db):
    await push(http, queue, "m")
    response = await http.get(f"/api/v1/pop/queue/{queue}",
                              params={"consumerGroup": "g", "subscriptionMode": "bogus"})
    assert_error(response, 400)
    count = await db.fetchval(
        "SELECT count(*) FROM rq_consumer_groups g JOIN rq_queues q ON q.id = g.queue_id WHERE q.name = $1",
        queue)
    assert count == 0
    assert [m["data"] for m in await pop_messages(http, queue, consumerGroup="g", subscriptionMode="all")] == ["m"]


async def test_bad_pop_parameters_on_discovery_and_partition_routes(http):
    assert_error(await http.get("/api/v1/pop", params={"namespace": "n", "batch": "0"}), 400)
    assert_error(await http.get("/api/v1/pop/queue/q/partition/p", params={"partitions": "0"}), 400)


async def test_pop_without_namespace_or_task(http):
    for params in ({}, {"namespace": ""}, {"task": ""}, {"batch": "5"}):
        response = await http.get("/api/v1/pop", params=params)
        assert response.status_code == 400
        assert response.json() == {"success": False, "error": "namespace or task is required", "messages": []}


async def test_pop_with_bad_queue_name_in_path(http):
    assert_error(await http.get("/api/v1/pop/queue/" + "q" * 256), 400)
    assert_error(await http.get("/api/v1/pop/queue/bad%00name"), 400)


# a decimal number is a partition id too (the framed pop answer's), but not past 64 bits
@pytest.mark.parametrize("partition_id", ["not-a-uuid", "", "18446744073709551616", "-1234", 42])
async def test_ack_with_non_uuid_partition_id_is_400(http, queue, partition_id):
    await push(http, queue, "m")
    [message] = await pop_messages(http, queue)
    response = await http.post("/api/v1/ack", json={"transactionId": message["transactionId"],
                                                    "partitionId": partition_id, "status": "completed"})
    assert_error(response, 400)
    # the message is still unacknowledged
    assert (await http.post("/api/v1/ack", json={
        "transactionId": message["transactionId"], "partitionId": message["partitionId"],
        "leaseId": message["leaseId"]})).json()[0]["noop"] is False


async def test_ack_with_non_uuid_lease_id_is_400(http, queue):
    await push(http, queue, "m")
    [message] = await pop_messages(http, queue)
    response = await http.post("/api/v1/ack", json={"transactionId": message["transactionId"],
                                                    "partitionId": message["partitionId"], "leaseId": "abc"})
    assert_error(response, 400)
    assert await pop(http, queue) is None  # still leased


@pytest.mark.parametrize("body", [
    {"partitionId": "00000000-0000-0000-0000-000000000000"},
    {"transactionId": "t"},
    {"transactionId": "", "partitionId": "00000000-0000-0000-0000-000000000000"},
    {"transactionId": 5, "partitionId": "00000000-0000-0000-0000-000000000000"},
])
async def test_ack_missing_or_bad_fields_is_400(http, body):
    assert_error(await http.post("/api/v1/ack", json=body), 400)


async def test_ack_batch_one_bad_item_rejects_all(http, queue):
    await push(http, queue, "a", "b")
    messages = await pop_messages(http, queue)
    response = await http.post("/api/v1/ack/batch", json={"acknowledgments": [
        {"transactionId": messages[0]["transactionId"], "partitionId": messages[0]["partitionId"]},
        {"transactionId": messages[1]["transactionId"], "partitionId": "nope"},
    ]})
    assert_error(response, 400)
    results = (await http.post("/api/v1/ack/batch", json={"acknowledgments": [
        {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"]}
        for m in messages]})).json()
    assert [r["noop"] for r in results] == [False, False]


async def test_ack_batch_acknowledgments_not_a_list_is_400(http):
    assert_error(await http.post("/api/v1/ack/batch", json={"acknowledgments": {"a": 1}}), 400)


async def test_extend_bad_lease_id_and_seconds_are_400(http):
    assert_error(await http.post("/api/v1/lease/not-a-uuid/extend"), 400)
    lease = str(uuid.uuid4())
    for seconds in (0, -5, "10", 1.5, True):
        assert_error(await http.post(f"/api/v1/lease/{lease}/extend", json={"seconds": seconds}), 400)


async def test_transaction_malformed_bodies_are_400(http, db):
    target = unique("q")
    push_op = {"type": "push", "items": [{"queue": target, "payload": 1}]}
    for body in ({"operations": "nope"},
                 {"operations": [push_op, {"type": "ack"}]},
                 {"operations": [push_op, {"type": "push", "items": []}]},
                 {"operations": [push_op], "requiredLeases": ["not-a-uuid"]},
                 {"operations": [push_op, {"type": "push", "items": [{"queue": "", "payload": 1}]}]}):
        assert_error(await http.post("/api/v1/transaction", json=body), 400)
    assert await queue_count(db, target) == 0
