"""Streaming queries through the official client's ``queen.streams.Stream`` (it pops the source,
runs the operators itself and commits each cycle through /streams/v1/*)."""

from __future__ import annotations

import uuid

import pytest
from queen.streams import Stream
from queen.streams.runtime.register import StreamsConfigHashMismatch

from tests.conformance.helpers import create_queue, drain, pop_now, pop_until
from tests.conftest import eventually


async def sink_messages(queen, name: str, expected: int, seconds: float = 10.0) -> list[dict]:
    """Drain the sink until ``expected`` messages arrived (each acked)."""
    seen: list[dict] = []

    async def enough():
        seen.extend(await drain(queen, name))
        return len(seen) >= expected

    await eventually(enough, seconds=seconds, interval=0.2)
    return seen


async def run_until_sunk(stream: Stream, queen, broker_url: str, query_id: str, sink: str, expected: int):
    """Run the stream until its sink holds ``expected`` messages; the stopped runner and the messages.
    The source was pushed before the stream's group first pops, so the stream asks for all of it."""
    runner = await stream.run(query_id=query_id, url=broker_url, max_wait_millis=200, subscription_mode="all")
    try:
        return runner, await sink_messages(queen, sink, expected)
    finally:
        await runner.stop()


@pytest.fixture
def query_id() -> str:
    return f"query-{uuid.uuid4().hex[:8]}"


async def test_a_map_to_a_sink_consumes_the_source_once(queen, broker_url, queue, queue2, query_id):
    for partition in ("a", "b"):
        await queen.queue(queue).partition(partition).push([{"data": {"n": n}} for n in range(5)])
    stream = (Stream.from_(queen.queue(queue)).map(lambda message, ctx=None: {"double": message["data"]["n"] * 2})
              .to(queen.queue(queue2)))
    runner, out = await run_until_sunk(stream, queen, broker_url, query_id, queue2, 10)
    assert sorted((m["partition"], m["data"]["double"]) for m in out) == sorted(
        (p, 2 * n) for p in ("a", "b") for n in range(5))
    assert runner.metrics()["errorsTotal"] == 0
    assert await pop_now(queen, queue, group=f"streams.{query_id}") == []  # every source message acked


async def test_a_tumbling_window_aggregate_is_flushed_from_state(queen, broker_url, queue, queue2, query_id):
    await queen.queue(queue).partition("p").push([{"data": {"n": n}} for n in range(1, 6)])
    stream = (Stream.from_(queen.queue(queue)).window_tumbling(seconds=1, idle_flush_ms=300)
              .aggregate({"count": lambda value: 1, "sum": lambda value: value["n"]}).to(queen.queue(queue2)))
    runner, out = await run_until_sunk(stream, queen, broker_url, query_id, queue2, 1)
    assert sum(m["data"]["count"] for m in out) == 5 and sum(m["data"]["sum"] for m in out) == 15
    assert runner.metrics()["flushCyclesTotal"] >= 1 and runner.metrics()["errorsTotal"] == 0


async def test_a_gate_keeps_the_denied_messages_for_later(queen, broker_url, queue, queue2, query_id):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).partition("p").push([{"data": {"n": n}} for n in range(5)])

    def first_three(value, ctx):
        seen = ctx.state.get("seen", 0)
        if seen >= 3:
            return False
        ctx.state["seen"] = seen + 1
        return True

    runner = await (Stream.from_(queen.queue(queue)).gate(first_three).to(queen.queue(queue2))
                    .run(query_id=query_id, url=broker_url, max_wait_millis=200, subscription_mode="all"))
    try:
        out = await sink_messages(queen, queue2, 3)

        async def tail_denied_again():  # its lease ran out, the runner popped it again, the gate denied it again
            return runner.metrics()["messagesTotal"] >= 5 + 2

        assert await eventually(tail_denied_again, seconds=10)
        out += await drain(queen, queue2)
    finally:
        await runner.stop()
    assert sorted(m["data"]["n"] for m in out) == [0, 1, 2]
    left = await pop_until(queen, queue, group=f"streams.{query_id}")  # once the runner's last lease ran out
    assert [m["data"]["n"] for m in left] == [3, 4]  # acked up to the last allowed, not past it


async def test_another_operator_chain_under_one_name_needs_a_reset(queen, broker_url, queue, queue2, query_id):
    first = await (Stream.from_(queen.queue(queue)).map(lambda m, ctx=None: m["data"]).to(queen.queue(queue2))
                   .run(query_id=query_id, url=broker_url, max_wait_millis=200))
    await first.stop()
    changed = Stream.from_(queen.queue(queue)).filter(lambda m, ctx=None: True).to(queen.queue(queue2))
    with pytest.raises(StreamsConfigHashMismatch):
        await changed.run(query_id=query_id, url=broker_url, max_wait_millis=200)
    again = await changed.run(query_id=query_id, url=broker_url, max_wait_millis=200, reset=True)
    await again.stop()
    assert again.metrics()["serverQueryId"] == first.metrics()["serverQueryId"]
