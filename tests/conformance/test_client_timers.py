"""Timers through the official client: ``client.timer(queue)``, ``client.timers`` and a
transaction's ``tx.timer(queue)``."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

from tests.conformance.helpers import pop_now


async def popped_within(queen, queue: str, seconds: float) -> list[dict]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        messages = await pop_now(queen, queue)
        if messages:
            return messages
        await asyncio.sleep(0.05)
    return []


async def test_a_scheduled_timer_is_delivered_with_the_identity_promised(queen, queue):
    scheduled = await queen.timer(queue).key("fire-1").payload({"kind": "reminder"}).after_ms(300).schedule()
    assert scheduled and scheduled["status"] == "scheduled" and scheduled["messageId"] and scheduled["deliverAt"]
    [message] = await popped_within(queen, queue, 10)
    assert message["data"] == {"kind": "reminder"}
    assert message["transactionId"] == scheduled["txn"] and message["id"] == scheduled["messageId"]


async def test_reschedule_peek_list_and_cancel(queen, queue):
    first = await queen.timers.schedule(queue, "k", {"v": 1}, delay=timedelta(minutes=30))
    second = await queen.timer(queue).key("k").payload({"v": 2}).after(timedelta(minutes=45)).reschedule()
    assert second["status"] == "rescheduled" and second["txn"] != first["txn"]
    pending = await queen.timers.peek(queue, "k")
    assert pending and pending["txn"] == second["txn"]
    for key in ("a", "b"):
        await queen.timers.schedule(queue, key, key, delay_ms=600_000)
    assert [row["timerKey"] for row in await queen.timers.list_all(queue, limit=2)] == ["a", "b", "k"]
    cancelled = await queen.timer(queue).key("k").cancel()
    assert cancelled and cancelled["status"] == "cancelled"
    absent = await queen.timers.cancel(queue, "k", txn=second["txn"])
    assert not absent and absent["status"] == "absent" and absent["txn"] == second["txn"]
    assert not await queen.timers.peek(queue, "k")


async def test_a_timer_rides_the_transaction(queen, queue, queue2):
    result = await (queen.transaction()
                    .queue(queue).push([{"data": {"step": "reserved"}}])
                    .timer(queue2).key("compensate").payload({"step": "compensate"}).after_ms(200).schedule()
                    .commit())
    assert result["success"] is True and [r["type"] for r in result["results"]] == ["push", "timer"]
    [message] = await popped_within(queen, queue2, 10)
    assert message["data"] == {"step": "compensate"}
