"""Timers over raw HTTP: scheduled messages that enter their queue when due, carrying the txn and
message id answered at schedule time; reschedule, cancel, peek and list; the transaction rider;
a refused fire backs off; bad input is a 400 that changes nothing."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid

import pytest
import zstandard

from tests.conftest import eventually
from tests.integration.helpers import pop, post_operations


def encoded(value) -> str:
    return base64.b64encode(json.dumps(value).encode()).decode()


def schedule(queue, key, value, delay_ms, **extra) -> dict:
    return {"op": "schedule", "queue": queue, "timerKey": key, "payload": encoded(value), "delayMs": delay_ms,
            "txn": extra.pop("txn", str(uuid.uuid4())), **extra}


async def timers(http, *ops) -> list[dict]:
    return await post_operations(http, "/api/v1/timers", list(ops))


async def peek(http, queue, key) -> dict:
    response = await http.get(f"/api/v1/timers/{queue}/{key}")
    assert response.status_code == 200, response.text
    return response.json()


async def popped_within(http, queue, seconds: float) -> list[dict]:
    async def some():
        answer = await pop(http, queue, batch=100, wait="false")
        return answer["messages"] if answer else None
    return await eventually(some, seconds=seconds) or []


async def test_a_timer_fires_once_due_with_the_txn_and_id_it_promised(http, queue):
    started = time.monotonic()
    [scheduled] = await timers(http, schedule(queue, "reminder", {"kind": "reminder"}, 400, partition="p1"))
    assert scheduled["ok"] is True and scheduled["status"] == "scheduled" and scheduled["deliverAt"]
    messages = await popped_within(http, queue, 10)
    assert time.monotonic() - started >= 0.35  # not before its time
    assert [(m["data"], m["transactionId"], m["id"], m["partition"]) for m in messages] == [
        ({"kind": "reminder"}, scheduled["txn"], scheduled["messageId"], "p1")]
    assert (await peek(http, queue, "reminder"))["found"] is False


async def test_a_delay_in_the_past_fires_at_once_and_a_long_one_waits(http, queue):
    await timers(http, schedule(queue, "late", {"late": True}, -5000), schedule(queue, "later", {"n": 1}, 600_000))
    messages = await popped_within(http, queue, 5)
    assert [m["data"] for m in messages] == [{"late": True}]
    pending = await peek(http, queue, "later")
    assert pending["found"] is True and pending["attempts"] == 0 and pending["lastError"] is None
    assert json.loads(base64.b64decode(pending["payload"])) == {"n": 1}


async def test_scheduling_a_key_again_reschedules_it_and_cancel_removes_it(http, queue):
    [first] = await timers(http, schedule(queue, "k", {"v": 1}, 600_000))
    [second] = await timers(http, schedule(queue, "k", {"v": 2}, 900_000))
    assert second["status"] == "rescheduled" and second["txn"] != first["txn"]
    assert second["messageId"] != first["messageId"] and second["deliverAt"] > first["deliverAt"]
    assert (await peek(http, queue, "k"))["txn"] == second["txn"]
    cancelled = (await http.delete(f"/api/v1/timers/{queue}/k")).json()
    assert cancelled["ok"] is True and cancelled["status"] == "cancelled" and cancelled["txn"] == second["txn"]
    absent = (await http.delete(f"/api/v1/timers/{queue}/k", params={"txn": "maybe-delivered"})).json()
    assert absent == {"index": 0, "op": "cancel", "queue": queue, "timerKey": "k", "ok": False,
                      "status": "absent", "txn": "maybe-delivered"}
    assert await pop(http, queue, wait="false") is None


async def test_keys_with_slashes_and_the_list_pages_in_key_order(http, queue):
    keys = ["order/9/expire", "b", "a", "c"]
    await timers(http, *(schedule(queue, key, key, 600_000) for key in keys))
    assert (await peek(http, queue, "order/9/expire"))["found"] is True
    seen, after = [], None
    while True:
        params = {"limit": 2, **({"after": after} if after else {})}
        page = (await http.get(f"/api/v1/timers/{queue}", params=params)).json()
        seen += [row["timerKey"] for row in page["rows"]]
        if not page["truncated"]:
            break
        after = page["nextAfter"]
    assert seen == sorted(keys)
    clamped = (await http.get(f"/api/v1/timers/{queue}", params={"limit": 100_000})).json()
    assert len(clamped["rows"]) == 4 and clamped["truncated"] is False


async def test_a_compressed_payload_is_delivered_inflated(http, queue):
    raw = json.dumps({"big": "x" * 1000}).encode()
    op = {**schedule(queue, "z", None, 0), "payload": base64.b64encode(zstandard.compress(raw)).decode(),
          "payloadZstd": True}
    await timers(http, op)
    [message] = await popped_within(http, queue, 5)
    assert message["data"] == {"big": "x" * 1000}


async def test_the_transaction_rider_schedules_with_the_bundle_or_not_at_all(http, queue):
    body = {"operations": [{"type": "push", "items": [{"queue": queue, "payload": {"step": "reserved"}}]}],
            "timers": [schedule(queue, "compensate", {"step": "compensate"}, 600_000)]}
    answer = (await http.post("/api/v1/transaction", json=body)).json()
    assert answer["success"] is True
    assert [(r["index"], r["type"]) for r in answer["results"]] == [(0, "push"), (1, "timer")]
    assert answer["results"][1]["status"] == "scheduled" and answer["results"][1]["opIndex"] == 0
    assert (await peek(http, queue, "compensate"))["found"] is True

    ns = f"ns-{uuid.uuid4().hex[:8]}"
    await http.post("/api/v1/kv", json={"operations": [{"op": "put", "ns": ns, "key": "gate", "value": 1,
                                                        "forever": True}]})
    lost = (await http.post("/api/v1/transaction", json={
        "operations": [], "kv": [{"op": "putIfAbsent", "ns": ns, "key": "gate", "value": 2, "forever": True,
                                  "required": True}],
        "timers": [{"op": "cancel", "queue": queue, "timerKey": "compensate"}]})).json()
    assert lost["success"] is False and lost["reason"] == "kv_precondition" and lost["failedIndex"] == 0
    assert (await peek(http, queue, "compensate"))["found"] is True  # the cancel rolled back


async def test_a_fire_a_full_queue_refuses_backs_off_and_is_kept(http, queue):
    response = await http.post("/api/v1/configure", json={"queue": queue, "options": {"maxSize": 1}})
    assert response.status_code == 200, response.text
    await http.post("/api/v1/push", json={"items": [{"queue": queue, "payload": "fills it"}]})
    await timers(http, schedule(queue, "blocked", {"n": 1}, 0))

    async def backed_off():
        row = await peek(http, queue, "blocked")
        return row if row["attempts"] >= 1 else None

    row = await eventually(backed_off, seconds=10)
    assert row and row["found"] is True and "full" in row["lastError"]
    first = await pop(http, queue, batch=10, wait="false")
    assert [m["data"] for m in first["messages"]] == ["fills it"]
    ack = await http.post("/api/v1/ack", json={"transactionId": first["messages"][0]["transactionId"],
                                               "partitionId": first["partitionId"], "leaseId": first["leaseId"]})
    assert ack.status_code == 200
    messages = await popped_within(http, queue, 15)  # room again: the next try delivers it
    assert [m["data"] for m in messages] == [{"n": 1}]


async def test_many_due_timers_are_each_delivered_once(http, queue):
    await timers(http, *(schedule(queue, f"t{n:03}", n, 0) for n in range(200)))
    seen: list[int] = []
    deadline = time.monotonic() + 20
    while len(seen) < 200 and time.monotonic() < deadline:
        answer = await pop(http, queue, batch=1000, wait="false")
        if answer:
            seen += [m["data"] for m in answer["messages"]]
            for m in answer["messages"]:
                await http.post("/api/v1/ack", json={"transactionId": m["transactionId"],
                                                     "partitionId": m["partitionId"], "leaseId": m["leaseId"]})
        else:
            await asyncio.sleep(0.1)
    assert sorted(seen) == list(range(200))


@pytest.mark.parametrize(("op", "code"), [
    ({"op": "fire", "queue": "q", "timerKey": "k"}, "timer_unknown_op"),
    ({"op": "schedule", "queue": "q", "timerKey": "k", "payload": encoded(1), "delayMs": 1}, "timer_bad_request"),
    ({"op": "schedule", "queue": "", "timerKey": "k", "payload": encoded(1), "delayMs": 1, "txn": "t"},
     "timer_bad_request"),
    ({"op": "schedule", "queue": "q", "timerKey": "", "payload": encoded(1), "delayMs": 1, "txn": "t"},
     "timer_bad_request"),
    ({"op": "schedule", "queue": "q", "timerKey": "k", "payload": "%%%", "delayMs": 1, "txn": "t"},
     "timer_bad_payload"),
    ({"op": "schedule", "queue": "q", "timerKey": "k", "payload": base64.b64encode(b"not json").decode(),
      "delayMs": 1, "txn": "t"}, "timer_bad_payload"),
    ({"op": "schedule", "queue": "q", "timerKey": "k", "payload": encoded(1), "txn": "t"}, "timer_bad_delay"),
    ({"op": "schedule", "queue": "q", "timerKey": "k", "payload": encoded(1), "delayMs": "5", "txn": "t"},
     "timer_bad_delay"),
    ({"op": "schedule", "queue": "q", "timerKey": "k", "payload": encoded(1), "delayMs": 1, "txn": "t",
      "deliverAt": "2030-01-01T00:00:00Z"}, "timer_server_owned_field"),
    ({"op": "schedule", "queue": "q", "timerKey": "k", "payload": encoded(1), "delayMs": 1, "txn": "t",
      "producerSub": "someone"}, "timer_server_owned_field"),
    ("not an object", "timer_bad_request"),
])
async def test_bad_ops_are_a_400_and_nothing_is_scheduled(http, queue, op, code):
    response = await http.post("/api/v1/timers", json={"operations": [schedule(queue, "first", 1, 600_000), op]})
    assert response.status_code == 400, response.text
    assert response.json()["error"] == code and "index 1" in response.json()["detail"]
    assert (await peek(http, queue, "first"))["found"] is False
