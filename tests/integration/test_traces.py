"""Traces over raw HTTP: record, timeline of a message, by name, names, validation."""

from __future__ import annotations

import uuid

import pytest

from tests.integration.helpers import ISO_MILLIS, unique

# Queen's trace, snake_case as Queen answers it
TRACE_FIELDS = {"id", "transaction_id", "partition_id", "event_type", "data", "consumer_group", "worker_id",
                "created_at", "queue_name", "partition_name", "trace_names"}


def trace_body(partition_id, txid, data, **extra):
    return {"transactionId": txid, "partitionId": partition_id, "data": data, **extra}


async def record(http, body):
    response = await http.post("/api/v1/traces", json=body)
    assert response.status_code == 201, response.text
    answer = response.json()
    assert set(answer) == {"success", "traceId", "createdAt"}
    assert answer["success"] is True and uuid.UUID(answer["traceId"]) and ISO_MILLIS.match(answer["createdAt"])
    return answer


async def test_a_message_timeline_in_order(http):
    pid, txid, name = str(uuid.uuid4()), unique("tx"), unique("flow")
    recorded = [
        await record(http, trace_body(pid, txid, {"step": 1}, traceNames=[name], consumerGroup="__QUEUE_MODE__")),
        await record(http, trace_body(pid, txid, {"step": 2}, eventType="error", consumerGroup="billing",
                                      traceNames=None)),
        await record(http, trace_body(pid, txid, "three"))]
    body = (await http.get(f"/api/v1/traces/{pid}/{txid}")).json()
    assert list(body) == ["traces"]  # Queen's {"traces": [...]}, oldest first
    steps = body["traces"]
    assert all(set(t) == TRACE_FIELDS for t in steps)
    assert [t["id"] for t in steps] == [r["traceId"] for r in recorded]
    assert [t["created_at"] for t in steps] == [r["createdAt"] for r in recorded]
    assert [t["data"] for t in steps] == [{"step": 1}, {"step": 2}, "three"]
    assert [t["event_type"] for t in steps] == ["info", "error", "info"]
    assert [t["consumer_group"] for t in steps] == ["__QUEUE_MODE__", "billing", "__QUEUE_MODE__"]
    assert steps[0]["trace_names"] == [name] and steps[1]["trace_names"] == []
    assert {(t["transaction_id"], t["partition_id"], t["worker_id"]) for t in steps} == {(txid, pid, None)}
    assert all(ISO_MILLIS.match(t["created_at"]) for t in steps)
    assert (await http.get(f"/api/v1/traces/{pid}/other")).json()["traces"] == []


async def test_by_name_pages_newest_first_and_names_are_listed(http):
    name, other = unique("order"), unique("other")
    pid = str(uuid.uuid4())
    for i in range(5):
        await record(http, trace_body(pid, f"tx-{i}", {"i": i}, traceNames=[name, other] if i == 0 else [name]))
    page = (await http.get(f"/api/v1/traces/by-name/{name}", params={"limit": 2, "offset": 1})).json()
    assert page["total"] == 5 and page["pagination"] == {"limit": 2, "offset": 1}
    assert [t["data"]["i"] for t in page["traces"]] == [3, 2]
    assert all(set(t) == TRACE_FIELDS and t["transaction_id"] == f"tx-{t['data']['i']}" for t in page["traces"])
    names = (await http.get("/api/v1/traces/names", params={"search": name})).json()
    assert names["total"] == 1 and names["pagination"] == {"limit": 100, "offset": 0}
    [entry] = names["trace_names"]
    assert set(entry) == {"trace_name", "trace_count", "message_count", "last_seen"}
    assert entry["trace_name"] == name and entry["trace_count"] == 5 and entry["message_count"] == 5
    assert ISO_MILLIS.match(entry["last_seen"])
    nobody = unique("none")
    assert (await http.get(f"/api/v1/traces/by-name/{nobody}")).json() == {
        "traces": [], "total": 0, "pagination": {"limit": 100, "offset": 0}}


async def test_a_name_with_a_slash_is_found(http):
    name = f"{unique('a')}/b"
    await record(http, trace_body(str(uuid.uuid4()), "tx", {}, traceNames=[name]))
    assert (await http.get(f"/api/v1/traces/by-name/{name}")).json()["total"] == 1


@pytest.mark.parametrize("body", [
    {},
    {"transactionId": "t", "partitionId": str(uuid.uuid4())},
    {"transactionId": "t", "partitionId": "not-a-uuid", "data": {}},
    {"transactionId": "", "partitionId": str(uuid.uuid4()), "data": {}},
    {"transactionId": "t", "partitionId": str(uuid.uuid4()), "data": {}, "traceNames": ["x" * 256]},
    {"transactionId": "t", "partitionId": str(uuid.uuid4()), "data": {}, "traceNames": [f"n{i}" for i in range(17)]},
    {"transactionId": "t", "partitionId": str(uuid.uuid4()), "data": {}, "traceNames": [""]},
    {"transactionId": "t", "partitionId": str(uuid.uuid4()), "data": {}, "traceNames": "one"},
    {"transactionId": "t", "partitionId": str(uuid.uuid4()), "data": {}, "eventType": 5},
    {"transactionId": "t", "partitionId": str(uuid.uuid4()), "data": "\u0000"},
    {"transactionId": "t", "partitionId": str(uuid.uuid4()), "data": {"big": "x" * 70_000}},
])
async def test_bad_traces_are_4xx(http, body):
    response = await http.post("/api/v1/traces", json=body)
    assert 400 <= response.status_code < 500 and "error" in response.json(), response.text


async def test_bad_reads_are_400(http):
    for path, params in (("/api/v1/traces/nope/tx", {}), ("/api/v1/traces/names", {"limit": 0}),
                         ("/api/v1/traces/by-name/x", {"offset": -1}), ("/api/v1/traces/by-name/x", {"from": "z"})):
        response = await http.get(path, params=params)
        assert response.status_code == 400, (path, response.text)
    malformed = await http.post("/api/v1/traces", content=b"{not json", headers={"content-type": "application/json"})
    assert malformed.status_code == 400
