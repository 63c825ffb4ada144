"""Hostile input over raw HTTP: every limit of docs/protocol.md answers a 4xx with
{"error": ...}, and nothing changes (no queue created, no message stored)."""

from __future__ import annotations

import json

import pytest

from tests.integration.helpers import push, queue_count, unique

JSON = {"content-type": "application/json"}


def assert_error(response, status: int) -> str:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert isinstance(body, dict) and isinstance(body["error"], str) and body["error"]
    return body["error"]


def push_body(queue: str, payload_json: bytes) -> bytes:
    return b'{"items":[{"queue":"' + queue.encode() + b'","payload":' + payload_json + b"}]}"


async def refused_push(http, db, queue: str, raw: bytes, status: int = 400) -> str:
    message = assert_error(await http.post("/api/v1/push", content=raw, headers=JSON), status)
    assert await queue_count(db, queue) == 0
    return message


# -- nesting depth (64 levels) ---------------------------------------------------------------

async def test_payload_nested_64_levels_is_accepted(http, db):
    queue = unique("q")
    # the body adds 3 levels (object, items array, item object) around the payload
    payload = b"[" * 61 + b"]" * 61
    response = await http.post("/api/v1/push", content=push_body(queue, payload), headers=JSON)
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("payload", [
    b'"' + b"[{" * 100 + b'"',  # brackets inside a string are not nesting
    b'{"a":[[1]],"pad":"' + b"x" * 20_000 + b'"}',  # a large body
    b"[" + b",".join([b'{"k":[1,2]}'] * 40) + b"]",  # many brackets side by side, none deep
])
async def test_shallow_bodies_with_many_brackets_are_accepted(http, db, payload):
    queue = unique("q")
    response = await http.post("/api/v1/push", content=push_body(queue, payload), headers=JSON)
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("pad", [0, 40_000])
async def test_the_depth_limit_falls_on_64_levels_whatever_the_body_size(http, db, pad):
    queue = unique("q")
    def nested(depth: int) -> bytes:  # the body adds 3 levels around the payload
        return b'{"pad":"' + b"x" * pad + b'","n":' + b"[" * (depth - 4) + b"1" + b"]" * (depth - 4) + b"}"
    assert "nested deeper than 64" in await refused_push(http, db, queue, push_body(queue, nested(65)))
    response = await http.post("/api/v1/push", content=push_body(queue, nested(64)), headers=JSON)
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("depth", [62, 100, 5_000, 100_000])
async def test_payload_nested_too_deep(http, db, depth):
    queue = unique("q")
    message = await refused_push(http, db, queue, push_body(queue, b'{"a":' * depth + b"1" + b"}" * depth))
    assert "nested deeper than 64" in message


async def test_deep_nesting_in_an_unknown_field(http, db):
    queue = unique("q")
    raw = b'{"items":[{"queue":"' + queue.encode() + b'","payload":1,"extra":' + b"[" * 200 + b"]" * 200 + b"}]}"
    assert "nested deeper" in await refused_push(http, db, queue, raw)


async def test_deep_options_in_configure(http, db):
    queue = unique("q")
    raw = b'{"queue":"' + queue.encode() + b'","options":{"leaseTime":' + b"[" * 100 + b"]" * 100 + b"}}"
    assert_error(await http.post("/api/v1/configure", content=raw, headers=JSON), 400)
    assert await queue_count(db, queue) == 0


# -- invalid UTF-8 ----------------------------------------------------------------------------

@pytest.mark.parametrize("payload", [b'"\xff"', b'{"k\xc3":1}', b'"\xed\xa0\x80"', b'"ok\xc3"'])
async def test_invalid_utf8_in_payload(http, db, payload):
    queue = unique("q")
    assert "UTF-8" in await refused_push(http, db, queue, push_body(queue, payload))


async def test_invalid_utf8_in_a_name(http, db):
    queue = unique("q")
    raw = b'{"items":[{"queue":"' + queue.encode() + b'","partition":"p\xfe","payload":1}]}'
    await refused_push(http, db, queue, raw)


async def test_invalid_utf8_in_trace_data(http):
    raw = (b'{"transactionId":"t","partitionId":"00000000-0000-0000-0000-000000000000",'
           b'"data":"\xff"}')
    assert "UTF-8" in assert_error(await http.post("/api/v1/traces", content=raw, headers=JSON), 400)


async def test_invalid_utf8_in_the_query_string(http, queue):
    response = await http.get(f"/api/v1/pop/queue/{queue}?consumerGroup=%ff%fe")
    assert_error(response, 400)


# -- duplicate keys ---------------------------------------------------------------------------

async def test_duplicate_key_in_an_item(http, db):
    queue, other = unique("q"), unique("q")
    raw = b'{"items":[{"queue":"' + queue.encode() + b'","queue":"' + other.encode() + b'","payload":1}]}'
    assert "duplicate key 'queue'" in await refused_push(http, db, queue, raw)
    assert await queue_count(db, other) == 0


async def test_duplicate_top_level_key(http, db):
    queue = unique("q")
    item = b'[{"queue":"' + queue.encode() + b'","payload":1}]'
    raw = b'{"items":' + item + b',"items":' + item + b"}"
    assert "duplicate key 'items'" in await refused_push(http, db, queue, raw)


@pytest.mark.parametrize("payload", [b'{"a":1,"a":2}', b'{"x":[{"b":1,"c":2,"b":3}]}',
                                     b'{"a":1, "a" : 1}', b'{"\\u0061":1,"a":2}', b'{"a":1e5,"a":2}'])
async def test_duplicate_key_in_payload(http, db, payload):
    queue = unique("q")
    assert "duplicate key" in await refused_push(http, db, queue, push_body(queue, payload))


async def test_same_key_in_sibling_objects_is_fine(http, db):
    queue = unique("q")
    response = await http.post("/api/v1/push", content=push_body(queue, b'[{"a":1},{"a":2}]'), headers=JSON)
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("path,raw", [
    ("/api/v1/configure", b'{"queue":"QUEUE","options":{"leaseTime":5,"leaseTime":6}}'),
    ("/api/v1/configure", b'{"queue":"QUEUE","queue":"QUEUE"}'),
])
async def test_duplicate_key_elsewhere(http, db, path, raw):
    queue = unique("q")
    response = await http.post(path, content=raw.replace(b"QUEUE", queue.encode()), headers=JSON)
    assert "duplicate key" in assert_error(response, 400)
    assert await queue_count(db, queue) == 0


async def test_duplicate_key_in_ack(http):
    raw = (b'{"transactionId":"a","transactionId":"b",'
           b'"partitionId":"00000000-0000-0000-0000-000000000000"}')
    assert "duplicate key" in assert_error(await http.post("/api/v1/ack", content=raw, headers=JSON), 400)


# -- NaN / Infinity / numbers out of range -----------------------------------------------------

@pytest.mark.parametrize("payload", [b"NaN", b"Infinity", b"-Infinity", b"[1,NaN]", b'{"a":Infinity}',
                                     b"1e400", b"-1e400", b"[1e999999]", b"9" * 400])
async def test_non_finite_numbers_in_payload(http, db, payload):
    queue = unique("q")
    await refused_push(http, db, queue, push_body(queue, payload))


async def test_large_integers_in_payload_are_kept_verbatim(http, db):
    queue = unique("q")
    big = b"123456789012345678901234567890"
    response = await http.post("/api/v1/push", content=push_body(queue, b'{"n":' + big + b"}"), headers=JSON)
    assert response.status_code == 201, response.text
    popped = await http.get(f"/api/v1/pop/queue/{queue}", params={"autoAck": "true"})
    assert b'"data":{"n":' + big + b"}" in popped.content


@pytest.mark.parametrize("options", [
    {"leaseTime": 1e30}, {"leaseTime": 2**31}, {"retryLimit": 10**20}, {"priority": -(2**40)},
    {"maxSize": 2**63}, {"leaseTime": 1.5}, {"deadLetterQueue": 1},
])
async def test_option_values_out_of_range(http, db, options):
    queue = unique("q")
    response = await http.post("/api/v1/configure", json={"queue": queue, "options": options})
    assert_error(response, 400)
    assert await queue_count(db, queue) == 0


async def test_option_infinity_literal(http, db):
    queue = unique("q")
    raw = b'{"queue":"' + queue.encode() + b'","options":{"leaseTime":Infinity}}'
    assert_error(await http.post("/api/v1/configure", content=raw, headers=JSON), 400)
    assert await queue_count(db, queue) == 0


@pytest.mark.parametrize("params", [
    {"batch": "1e30"}, {"batch": "100000000000000000000000"}, {"batch": "0"}, {"batch": "-1"},
    {"batch": "10001"}, {"partitions": "1001"}, {"timeout": "3600001"}, {"timeout": "NaN"},
    {"leaseSeconds": str(2**31)}, {"leaseSeconds": "-1"}, {"batch": "Infinity"}, {"batch": "1.5"},
])
async def test_query_numbers_out_of_range(http, db, params):
    queue = unique("q")
    await push(http, queue, 1)
    response = await http.get(f"/api/v1/pop/queue/{queue}", params=params)
    assert_error(response, 400)
    again = await http.get(f"/api/v1/pop/queue/{queue}", params={"autoAck": "true"})
    assert again.status_code == 200  # the refused pop leased nothing


@pytest.mark.parametrize("seconds", [1e30, 2**31, 0, -5, "60", None, True, 1.5])
async def test_extend_seconds_out_of_range(http, seconds):
    response = await http.post("/api/v1/lease/00000000-0000-0000-0000-000000000000/extend",
                               json={"seconds": seconds})
    assert_error(response, 400)


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-05:00", "0001-01-01",
                                   "99999-01-01", "not a date"])
async def test_timestamps_out_of_range(http, queue, stamp):
    assert_error(await http.get("/api/v1/status/analytics", params={"from": stamp}), 400)
    assert_error(await http.get("/api/v1/status/analytics", params={"to": stamp}), 400)
    assert_error(await http.get(f"/api/v1/pop/queue/{queue}", params={"subscriptionFrom": stamp}), 400)
    response = await http.post(f"/api/v1/consumer-groups/g/queues/{queue}/seek", json={"timestamp": stamp})
    assert_error(response, 400)


# -- wrong types where a handler reads a plain object -------------------------------------------

@pytest.mark.parametrize("body", [{"subscriptionMode": {}}, {"subscriptionMode": []},
                                  {"subscriptionMode": 5}, {"subscriptionMode": "sometimes"}])
async def test_subscription_mode_of_the_wrong_type(http, body):
    response = await http.post(f"/api/v1/consumer-groups/{unique('g')}/subscription", json=body)
    assert_error(response, 400)


# -- content types, sizes, names (limits that existed before; checked here end to end) ----------

@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "text/html", "application/xml",
                                          "multipart/form-data; boundary=x"])
async def test_wrong_content_type(http, db, content_type):
    queue = unique("q")
    response = await http.post("/api/v1/push", content=json.dumps({"items": [{"queue": queue, "payload": 1}]}),
                               headers={"content-type": content_type})
    assert_error(response, 415)
    assert await queue_count(db, queue) == 0


async def test_body_too_large(http, db):
    queue = unique("q")
    raw = push_body(queue, b'"' + b"x" * (8 * 1024 * 1024) + b'"')
    await refused_push(http, db, queue, raw, status=413)


async def test_payload_too_large(http, db):
    queue = unique("q")
    await refused_push(http, db, queue, push_body(queue, b'"' + b"x" * (4 * 1024 * 1024 + 1) + b'"'), 413)


async def test_too_many_items(http, db):
    queue = unique("q")
    items = ",".join(f'{{"queue":"{queue}","payload":{i}}}' for i in range(10_001))
    await refused_push(http, db, queue, f'{{"items":[{items}]}}'.encode(), status=413)


@pytest.mark.parametrize("name", ["", "q" * 256, "a\x00b", "a\nb", "a/b"])
async def test_bad_queue_names(http, db, name):
    raw = json.dumps({"items": [{"queue": name, "payload": 1}]}).encode()
    assert_error(await http.post("/api/v1/push", content=raw, headers=JSON), 400)
    if name and "\x00" not in name:  # PostgreSQL text cannot even hold the NUL to look it up
        assert await queue_count(db, name) == 0


# -- routing: a static path does not hide a pattern for another method --------------------------

async def test_group_named_like_a_static_route_can_be_deleted(http):
    response = await http.delete("/api/v1/consumer-groups/lagging")
    assert response.status_code == 200, response.text
    assert response.json()["consumerGroup"] == "lagging"
    assert (await http.get("/api/v1/consumer-groups/lagging")).status_code == 200
    assert_error(await http.put("/api/v1/consumer-groups/lagging"), 405)
