"""Ack fusion: ack requests that arrive together share one rq_ack call, and each is answered
exactly as it would be alone; requests for the same cursor never share a call."""

from __future__ import annotations

import asyncio

from reginamq.engine import ack as acks
from reginamq.engine.ack_fusion import AckFusion
from reginamq.engine.meter import Meter
from tests.conftest import eventually, opened_store


async def popped(http, queue: str, partition: str, messages: int) -> list[dict]:
    """Push ``messages`` messages to ``partition`` and pop them all under one lease."""
    items = [{"queue": queue, "partition": partition, "payload": {"n": n}} for n in range(messages)]
    assert (await http.post("/api/v1/push", json={"items": items})).status_code == 201
    answer = await http.get(f"/api/v1/pop/queue/{queue}/partition/{partition}",
                            params={"batch": messages, "wait": "false"})
    assert answer.status_code == 200
    delivered = answer.json()["messages"]
    assert len(delivered) == messages
    return delivered


def prepared(messages: list[dict], status: str = "completed", lease: str | None = None) -> acks.PreparedAcks:
    return acks.prepare([acks.Ack(transactionId=m["transactionId"], partitionId=m["partitionId"],
                                  leaseId=lease or m["leaseId"], status=status) for m in messages])


async def test_acks_that_arrive_together_share_one_call_and_each_gets_its_own_answers(http, queue, database_url):
    spans = [await popped(http, queue, f"p{n}", 3 + n) for n in range(4)]
    meter = Meter()
    async with opened_store(database_url) as store:
        fusion = AckFusion(store, meter)
        refused = prepared(spans[3], lease="00000000-0000-4000-8000-000000000000")
        answers = await asyncio.gather(*(fusion.write(prepared(span)) for span in spans[:3]), fusion.write(refused))
    assert meter.ack_calls == 1
    for span, answer in zip(spans[:3], answers[:3], strict=True):
        assert [a["index"] for a in answer] == list(range(len(span)))
        assert [a["transactionId"] for a in answer] == [m["transactionId"] for m in span]
        assert all(a["success"] and a["leaseReleased"] for a in answer)
    assert [a["index"] for a in answers[3]] == list(range(len(spans[3])))
    assert not any(a["success"] for a in answers[3])
    assert {a["error"] for a in answers[3]} == {"invalid or expired lease"}
    # the cursor moved past the acked span: a pop finds only what comes after it
    assert [m["data"] for m in await popped(http, queue, "p0", 1)] == [{"n": 0}]
    # the refused request changed nothing: its lease still holds the span, and acks it whole
    async with opened_store(database_url) as store:
        later = await AckFusion(store, Meter()).write(prepared(spans[3]))
    assert all(a["success"] and a["leaseReleased"] for a in later)


async def test_requests_for_the_same_cursor_go_one_call_after_the_other(http, queue, database_url):
    span = await popped(http, queue, "p", 4)
    meter = Meter()
    async with opened_store(database_url) as store:
        fusion = AckFusion(store, meter)
        first, second = await asyncio.gather(fusion.write(prepared(span[:2])), fusion.write(prepared(span[2:])))
    assert meter.ack_calls == 2
    # in turn: the first half moves the cursor and keeps the lease, the second releases it
    assert all(a["success"] and not a["leaseReleased"] for a in first)
    assert all(a["success"] and a["leaseReleased"] for a in second)
    assert [a["index"] for a in second] == [0, 1]


async def test_a_retry_beside_completions_of_other_cursors_is_applied_on_its_own_cursor(http, queue, database_url):
    done, retried = await popped(http, queue, "done", 2), await popped(http, queue, "retried", 2)
    async with opened_store(database_url) as store:
        fusion = AckFusion(store, Meter())
        answers = await asyncio.gather(fusion.write(prepared(done)), fusion.write(prepared(retried, "retry")))
    assert all(a["success"] for answer in answers for a in answer)

    async def redelivered() -> list[str]:
        again = await http.get(f"/api/v1/pop/queue/{queue}/partition/retried", params={"wait": "false", "batch": 10})
        return [m["transactionId"] for m in again.json()["messages"]] if again.status_code == 200 else []

    assert await eventually(redelivered) == [m["transactionId"] for m in retried]
    assert (await http.get(f"/api/v1/pop/queue/{queue}/partition/done", params={"wait": "false"})).status_code == 204
