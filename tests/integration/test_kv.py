"""The key/value store over raw HTTP: POST /api/v1/kv and the transaction's ``kv`` rider.

Versions are compared for equality only (they come from a sequence), every write states its
expiry, an expired key is absent before it is purged, a lost precondition is a verdict unless
the op is ``required`` (then nothing of the call commits), and bad input is a 400 that changes
nothing."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.conftest import eventually
from tests.integration.helpers import pop, post_operations


@pytest.fixture
def ns() -> str:
    return f"ns-{uuid.uuid4().hex[:10]}"


async def kv(http, *ops) -> list[dict]:
    return await post_operations(http, "/api/v1/kv", list(ops))


async def one(http, op: dict) -> dict:
    return (await kv(http, op))[0]


def put(ns, key, value, **extra) -> dict:
    return {"op": "put", "ns": ns, "key": key, "value": value, **(extra or {"forever": True})}


async def test_put_then_get_answers_the_value_and_a_new_version_each_write(http, ns):
    first = await one(http, put(ns, "a", {"n": 1}))
    assert first["applied"] is True and first["value"] == {"n": 1} and first["version"] > 0
    second = await one(http, put(ns, "a", None, ttlSeconds=60))
    assert second["applied"] is True and second["value"] is None and second["version"] != first["version"]
    got = await one(http, {"op": "get", "ns": ns, "key": "a"})
    assert got["found"] is True and got["value"] is None and got["version"] == second["version"]
    assert got["expiresAt"] and got["updatedAt"]
    missing = await one(http, {"op": "get", "ns": ns, "key": "nope"})
    assert missing == {"index": 0, "op": "get", "found": False, "key": "nope"}


async def test_values_come_back_as_they_were_stored_big_integers_included(http, ns):
    value = {"big": 123456789012345678901234567890, "list": [1.5, None, "\u00e9"], "nested": {"a": {"b": []}}}
    await one(http, put(ns, "v", value))
    assert (await one(http, {"op": "get", "ns": ns, "key": "v"}))["value"] == value
    far = await one(http, {"op": "incr", "ns": ns, "key": "far", "delta": 2**62, "forever": True})
    for _ in range(3):
        far = await one(http, {"op": "incr", "ns": ns, "key": "far", "delta": 2**62, "forever": True})
    assert far["value"] == 2**64


async def test_exactly_one_of_many_concurrent_put_if_absent_wins(http, ns):
    ops = [{"op": "putIfAbsent", "ns": ns, "key": "gate", "value": {"who": who}, "ttlSeconds": 60}
           for who in range(12)]
    results = await asyncio.gather(*(one(http, op) for op in ops))
    winners = [r for r in results if r["applied"]]
    assert len(winners) == 1
    losers = [r for r in results if not r["applied"]]
    # every loser is told who won, without a second call
    assert {(r["reason"], r["version"], str(r["value"])) for r in losers} == {
        ("exists", winners[0]["version"], str(winners[0]["value"]))}


async def test_expect_fences_writes_and_an_expect_on_an_absent_key_creates_nothing(http, ns):
    created = await one(http, put(ns, "k", 1))
    stale = await one(http, put(ns, "k", 2, forever=True, expect=created["version"] + 1))
    assert stale["applied"] is False and stale["reason"] == "version" and stale["value"] == 1
    fresh = await one(http, put(ns, "k", 3, forever=True, expect=created["version"]))
    assert fresh["applied"] is True and fresh["value"] == 3
    absent = await one(http, put(ns, "never", 1, forever=True, expect=5))
    assert absent["applied"] is False and absent["reason"] == "absent" and absent["version"] == 0
    assert (await one(http, {"op": "get", "ns": ns, "key": "never"}))["found"] is False


async def test_delete_by_version_and_unconditionally(http, ns):
    row = await one(http, put(ns, "d", "x"))
    wrong = await one(http, {"op": "delete", "ns": ns, "key": "d", "expect": row["version"] + 1})
    assert wrong["applied"] is False and wrong["reason"] == "version"
    must_not_exist = await one(http, {"op": "delete", "ns": ns, "key": "d", "expect": 0})
    assert must_not_exist["applied"] is False and must_not_exist["reason"] == "exists"
    gone = await one(http, {"op": "delete", "ns": ns, "key": "d", "expect": row["version"]})
    assert gone["applied"] is True and gone["value"] == "x" and gone["version"] == row["version"]
    again = await one(http, {"op": "delete", "ns": ns, "key": "d"})
    assert again["applied"] is False and again["reason"] == "absent"
    assert (await one(http, {"op": "delete", "ns": ns, "key": "d", "expect": 0}))["applied"] is True


async def test_incr_counts_refuses_past_its_bounds_and_keeps_the_first_expiry(http, ns):
    first = await one(http, {"op": "incr", "ns": ns, "key": "c", "delta": 2, "max": 3, "ttlSeconds": 60})
    assert first["applied"] is True and first["value"] == 2
    expiry = (await one(http, {"op": "get", "ns": ns, "key": "c"}))["expiresAt"]
    refused = await one(http, {"op": "incr", "ns": ns, "key": "c", "delta": 2, "max": 3, "ttlSeconds": 3600})
    assert refused["applied"] is False and refused["reason"] == "limit" and refused["value"] == 2
    down = await one(http, {"op": "incr", "ns": ns, "key": "c", "delta": -1.5, "min": 0, "ttlSeconds": 3600})
    assert down["applied"] is True and down["value"] == 0.5
    assert (await one(http, {"op": "get", "ns": ns, "key": "c"}))["expiresAt"] == expiry
    too_big_to_start = await one(http, {"op": "incr", "ns": ns, "key": "new", "delta": 5, "max": 3, "forever": True})
    assert too_big_to_start["applied"] is False and too_big_to_start["reason"] == "limit"
    assert (await one(http, {"op": "get", "ns": ns, "key": "new"}))["found"] is False
    await one(http, put(ns, "text", "hello"))
    typed = await one(http, {"op": "incr", "ns": ns, "key": "text", "delta": 1, "forever": True})
    assert typed["applied"] is False and typed["reason"] == "type"


async def test_an_expired_key_is_absent_before_it_is_purged_and_then_purged(http, ns, db):
    await one(http, put(ns, "short", {"v": 1}, ttlSeconds=1))
    await one(http, {"op": "incr", "ns": ns, "key": "window", "delta": 1, "ttlSeconds": 1})

    async def both_absent():  # once their second is over; the rows stay until the purge
        return [(await one(http, {"op": "get", "ns": ns, "key": key}))["found"] for key in ("short", "window")] == [
            False, False]

    assert await eventually(both_absent)
    claimed = await one(http, {"op": "putIfAbsent", "ns": ns, "key": "short", "value": 2, "ttlSeconds": 1})
    assert claimed["applied"] is True  # expect 0 wins against an expired row
    restarted = await one(http, {"op": "incr", "ns": ns, "key": "window", "delta": 1, "ttlSeconds": 60})
    assert restarted["value"] == 1  # an expired counter counts from zero with the new expiry

    async def purged():
        return await db.fetchval("SELECT count(*) = 0 FROM rq_kv WHERE namespace = $1 AND key = 'short'", ns)

    assert await eventually(purged, seconds=15)
    assert await db.fetchval("SELECT count(*) FROM rq_kv WHERE namespace = $1 AND key = 'window'", ns) == 1


async def test_get_many_answers_rows_and_missing_keys(http, ns):
    await kv(http, put(ns, "b", 2), put(ns, "a", 1))
    many = await one(http, {"op": "getMany", "ns": ns, "keys": ["a", "zz", "b"]})
    assert [row["key"] for row in many["rows"]] == ["a", "b"]
    assert many["missing"] == ["zz"] and many["truncated"] is False


async def test_get_prefix_pages_in_byte_order_with_an_exclusive_cursor(http, ns):
    keys = ["user:b", "user:a", "user:\u00e9", "user:Z", "usex", "user:a:1"]
    await kv(http, *(put(ns, key, key) for key in keys))
    seen, after = [], None
    while True:
        page = await one(http, {"op": "getPrefix", "ns": ns, "prefix": "user:", "limit": 2,
                                **({"after": after} if after else {})})
        seen += [row["key"] for row in page["rows"]]
        if not page["truncated"]:
            assert page["nextAfter"] is None
            break
        after = page["nextAfter"]
    assert seen == sorted(k for k in keys if k.startswith("user:"))  # code-point order = bytes
    assert seen == ["user:Z", "user:a", "user:a:1", "user:b", "user:\u00e9"]
    bare = await one(http, {"op": "getPrefix", "ns": ns, "prefix": "user:", "keysOnly": True})
    assert all("value" not in row for row in bare["rows"]) and len(bare["rows"]) == 5


async def test_reads_of_many_keys_stop_at_the_byte_budget(http, ns):
    big = "x" * 60_000
    await kv(http, *(put(ns, f"big{n:03}", big) for n in range(80)))  # 4.8 MB > the 4 MiB budget
    page = await one(http, {"op": "getPrefix", "ns": ns, "prefix": "big", "limit": 1000})
    assert page["truncated"] is True and 60 <= len(page["rows"]) < 80
    assert page["nextAfter"] == page["rows"][-1]["key"]
    many = await one(http, {"op": "getMany", "ns": ns, "keys": [f"big{n:03}" for n in range(80)]})
    assert many["truncated"] is True and many["missing"] == [] and len(many["rows"]) < 80


async def test_reads_in_a_call_see_its_writes(http, ns):
    results = await kv(http, {"op": "getMany", "ns": ns, "keys": ["w"]}, put(ns, "w", 1),
                       {"op": "get", "ns": ns, "key": "w"})
    assert results[0]["missing"] == [] and results[2]["found"] is True


async def test_a_required_op_that_loses_rolls_back_the_whole_call(http, ns):
    holder = await one(http, put(ns, "held", "first"))
    response = await http.post("/api/v1/kv", json={"operations": [
        put(ns, "side", "effect"),
        {"op": "putIfAbsent", "ns": ns, "key": "held", "value": "second", "forever": True, "required": True}]})
    assert response.status_code == 200
    body = response.json()
    assert body["ok"] is False and body["reason"] == "kv_precondition" and body["failedIndex"] == 1
    assert body["kvReason"] == "exists" and body["version"] == holder["version"] and body["value"] == "first"
    assert (await one(http, {"op": "get", "ns": ns, "key": "side"}))["found"] is False


async def test_a_required_check_gates_writes_on_a_key_they_do_not_write(http, ns):
    fence = await one(http, put(ns, "fence", 1))
    held = await kv(http, {"op": "check", "ns": ns, "key": "fence", "expect": fence["version"], "required": True},
                    put(ns, "work", "done"))
    assert held[0]["applied"] is True and held[1]["applied"] is True
    moved = await one(http, put(ns, "fence", 2))
    response = await http.post("/api/v1/kv", json={"operations": [
        {"op": "check", "ns": ns, "key": "fence", "expect": fence["version"], "required": True},
        put(ns, "work", "again")]})
    body = response.json()
    assert body["ok"] is False and body["kvReason"] == "version" and body["version"] == moved["version"]
    assert (await one(http, {"op": "get", "ns": ns, "key": "work"}))["value"] == "done"


async def test_the_transaction_commits_kv_writes_with_its_pushes_and_acks(http, ns, queue):
    await http.post("/api/v1/push", json={"items": [{"queue": queue, "payload": {"n": 1}}]})
    message = (await pop(http, queue))["messages"][0]
    body = {"operations": [{"type": "ack", "transactionId": message["transactionId"],
                            "partitionId": message["partitionId"], "leaseId": message["leaseId"]},
                           {"type": "push", "items": [{"queue": f"{queue}-out", "payload": 1},
                                                      {"queue": f"{queue}-out", "payload": 2}]}],
            "kv": [{"op": "putIfAbsent", "ns": ns, "key": message["transactionId"], "value": True,
                    "ttlSeconds": 600, "required": True},
                   {"op": "incr", "ns": ns, "key": "handled", "delta": 1, "forever": True}]}
    answer = (await http.post("/api/v1/transaction", json=body)).json()
    assert answer["success"] is True
    assert [(r["index"], r["type"]) for r in answer["results"]] == [(0, "ack"), (1, "push"), (2, "push"),
                                                                    (3, "kv"), (4, "kv")]
    assert [r["opIndex"] for r in answer["results"][3:]] == [0, 1]
    assert answer["results"][4]["value"] == 1

    # the redelivery meets its own marker: nothing of the bundle commits, and it is a verdict
    again = (await http.post("/api/v1/transaction", json={**body, "operations": body["operations"][1:]})).json()
    assert again["success"] is False and again["reason"] == "kv_precondition"
    assert again["failedIndex"] == 2 and again["kvReason"] == "exists" and again["results"] == []
    assert (await one(http, {"op": "get", "ns": ns, "key": "handled"}))["value"] == 1
    assert len((await pop(http, f"{queue}-out", batch=10))["messages"]) == 2


async def test_a_refused_ack_rolls_back_the_kv_rider(http, ns, queue):
    answer = (await http.post("/api/v1/transaction", json={
        "operations": [{"type": "ack", "transactionId": "no-such", "partitionId": str(uuid.uuid4()),
                        "leaseId": str(uuid.uuid4())}],
        "kv": [put(ns, "marker", 1)]})).json()
    assert answer["success"] is False and answer["reason"] == "ack_rejected"
    assert (await one(http, {"op": "get", "ns": ns, "key": "marker"}))["found"] is False


async def test_a_transaction_of_kv_ops_alone_commits(http, ns):
    answer = (await http.post("/api/v1/transaction", json={"operations": [], "kv": [put(ns, "only", 1)]})).json()
    assert answer["success"] is True and answer["results"][0]["applied"] is True


@pytest.mark.parametrize(("op", "code"), [
    ({"op": "put", "ns": "Upper", "key": "k", "value": 1, "forever": True}, "kv_bad_namespace"),
    ({"op": "put", "ns": "n", "key": "", "value": 1, "forever": True}, "kv_bad_key"),
    ({"op": "put", "ns": "n", "key": "k" * 513, "value": 1, "forever": True}, "kv_key_too_large"),
    ({"op": "put", "ns": "n", "key": "k", "value": 1}, "kv_expiry_not_specified"),
    ({"op": "put", "ns": "n", "key": "k", "value": 1, "forever": True, "ttlSeconds": 5}, "kv_expiry_not_specified"),
    ({"op": "put", "ns": "n", "key": "k", "value": 1, "ttlSeconds": 0}, "kv_bad_ttl"),
    ({"op": "put", "ns": "n", "key": "k", "value": 1, "ttlSeconds": 1.5}, "kv_bad_ttl"),
    ({"op": "put", "ns": "n", "key": "k", "forever": True}, "kv_bad_request"),
    ({"op": "put", "ns": "n", "key": "k", "value": "x" * 70_000, "forever": True}, "kv_value_too_large"),
    ({"op": "put", "ns": "n", "key": "k", "value": "a\u0000b", "forever": True}, "kv_bad_value"),
    ({"op": "put", "ns": "n", "key": "k", "value": 1, "forever": True, "expect": None}, "kv_bad_expect"),
    ({"op": "put", "ns": "n", "key": "k", "value": 1, "forever": True, "expect": -1}, "kv_bad_expect"),
    ({"op": "putIfAbsent", "ns": "n", "key": "k", "value": 1, "forever": True, "expect": 3}, "kv_bad_expect"),
    ({"op": "check", "ns": "n", "key": "k"}, "kv_bad_expect"),
    ({"op": "incr", "ns": "n", "key": "k", "delta": "1", "forever": True}, "kv_bad_request"),
    ({"op": "incr", "ns": "n", "key": "k", "delta": 1, "forever": True, "expect": 1}, "kv_bad_request"),
    ({"op": "incr", "ns": "n", "key": "k", "delta": True, "forever": True}, "kv_bad_request"),
    ({"op": "getPrefix", "ns": "n", "prefix": ""}, "kv_prefix_required"),
    ({"op": "getMany", "ns": "n", "keys": "k"}, "kv_bad_request"),
    ({"op": "get", "ns": "n", "key": "k", "tenantId": "t"}, "kv_tenant_not_an_input"),
    ({"op": "merge", "ns": "n", "key": "k"}, "kv_unknown_op"),
    ({"op": "put", "ns": "n", "key": "k", "value": 1, "forever": True, "required": "yes"}, "kv_bad_request"),
    (7, "kv_bad_request"),
])
async def test_bad_ops_are_a_400_naming_the_rule_and_change_nothing(http, ns, op, code):
    response = await http.post("/api/v1/kv", json={"operations": [put(ns, "before", 1), op]})
    assert response.status_code == 400, response.text
    assert response.json()["error"] == code and "index 1" in response.json()["detail"]
    assert (await one(http, {"op": "get", "ns": ns, "key": "before"}))["found"] is False


async def test_call_wide_limits_are_400s(http, ns):
    twice = await http.post("/api/v1/kv", json={"operations": [put(ns, "k", 1), put(ns, "k", 2)]})
    assert twice.status_code == 400 and twice.json()["error"] == "kv_duplicate_key_in_call"
    many = await http.post("/api/v1/kv", json={"operations": [put(ns, f"k{n}", n) for n in range(257)]})
    assert many.status_code == 400 and many.json()["error"] == "kv_too_many_ops"
    keys = await http.post("/api/v1/kv", json={"operations": [
        {"op": "getMany", "ns": ns, "keys": [f"k{n}" for n in range(4097)]}]})
    assert keys.status_code == 400 and keys.json()["error"] == "kv_too_many_keys"
    in_tx = await http.post("/api/v1/transaction", json={"operations": [], "kv": [
        {"op": "getPrefix", "ns": ns, "prefix": "k"}]})
    assert in_tx.status_code == 400 and in_tx.json()["error"] == "kv_get_prefix_not_allowed_in_transaction"
    timers = await http.post("/api/v1/transaction", json={"operations": [], "kv": [put(ns, "t", 1)],
                                                          "timers": [{"op": "schedule"}]})
    assert timers.status_code == 400
    assert (await one(http, {"op": "get", "ns": ns, "key": "t"}))["found"] is False
    not_a_list = await http.post("/api/v1/kv", json={"operations": {"op": "get"}})
    assert not_a_list.status_code == 400


async def test_the_path_routes_read_write_and_delete_one_key_with_slashes(http, ns):
    missing = await http.get(f"/api/v1/kv/{ns}/order/9f1/items")
    assert missing.status_code == 200 and missing.json()["found"] is False and "etag" not in missing.headers
    put_answer = await http.put(f"/api/v1/kv/{ns}/order/9f1/items", json={"value": [1, 2], "ttlSeconds": 60})
    assert put_answer.status_code == 200 and put_answer.json()["applied"] is True
    version = put_answer.json()["version"]
    got = await http.get(f"/api/v1/kv/{ns}/order/9f1/items")
    assert got.json()["value"] == [1, 2] and got.headers["etag"] == f'"{version}"'
    # the same row as the batch route's
    assert (await one(http, {"op": "get", "ns": ns, "key": "order/9f1/items"}))["version"] == version
    fenced = await http.put(f"/api/v1/kv/{ns}/order/9f1/items", json={"value": 3, "forever": True,
                                                                      "expect": version + 1})
    assert fenced.json()["applied"] is False and fenced.json()["reason"] == "version"
    lost = await http.request("DELETE", f"/api/v1/kv/{ns}/order/9f1/items",
                              json={"expect": version + 1, "required": True})
    assert lost.status_code == 200 and lost.json()["reason"] == "kv_precondition"
    deleted = await http.delete(f"/api/v1/kv/{ns}/order/9f1/items")
    assert deleted.json()["applied"] is True and deleted.json()["value"] == [1, 2]


@pytest.mark.parametrize(("method", "url", "body", "code"), [
    ("GET", "/api/v1/kv/{ns}/k?prefix=a", None, "kv_no_query_string"),
    ("PUT", "/api/v1/kv/{ns}/k", {"value": 1, "forever": True, "key": "other"}, "kv_field_in_path"),
    ("PUT", "/api/v1/kv/{ns}/k", {"value": 1}, "kv_expiry_not_specified"),
    ("PUT", "/api/v1/kv/Bad/k", {"value": 1, "forever": True}, "kv_bad_namespace"),
    ("DELETE", "/api/v1/kv/{ns}/k", {"ns": "x"}, "kv_field_in_path"),
])
async def test_the_path_routes_refuse_what_the_url_already_says(http, ns, method, url, body, code):
    response = await http.request(method, url.format(ns=ns), json=body)
    assert response.status_code == 400 and response.json()["error"] == code, response.text
    assert (await one(http, {"op": "get", "ns": ns, "key": "k"}))["found"] is False
