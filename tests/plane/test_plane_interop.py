"""The library in a process of its own (tests/plane/child.py) and the session's HTTP broker (two
worker processes) on one database: messages, wake-ups, leases, dedup and the retry budget are
shared across the three processes."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import msgspec
import pytest

from reginamq.library import Message, PopResult, PushItem, PushResult, QueueOptions, RenewResult, errors
from reginamq.library.types import AckResult, DlqPage
from tests.conftest import MEMBERS, let_a_long_poll_park, outlast_lease, spool_dir
from tests.plane.helpers import pop_now

ROOT = Path(__file__).resolve().parents[2]
ANSWER_SECONDS = 40  # no call here waits longer than a 30 s long poll


class Child:
    """The child's JSON-line commands as awaitable calls, answers decoded into the library's types."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.waiting: dict[int, asyncio.Future] = {}
        self.ids = itertools.count(1)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            answer = msgspec.json.decode(line)
            future = self.waiting.pop(answer.get("id"), None)
            if future is not None and not future.done():
                future.set_result(line)
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(RuntimeError("the library child exited"))

    async def call(self, answer_type: Any, op: str, *args: Any, **kwargs: Any) -> Any:
        number = next(self.ids)
        future = asyncio.get_running_loop().create_future()
        self.waiting[number] = future
        assert self.process.stdin is not None
        self.process.stdin.write(msgspec.json.encode({"id": number, "op": op, "args": args, "kwargs": kwargs})
                                 + b"\n")
        await self.process.stdin.drain()
        line = await asyncio.wait_for(future, ANSWER_SECONDS)
        answer = msgspec.json.decode(line, type=dict[str, msgspec.Raw])
        if "error" in answer:
            refused = msgspec.json.decode(answer["error"])
            raise getattr(errors, refused["class"])(refused["error"], status=refused["status"],
                                                    extra=refused["extra"])
        return msgspec.json.decode(answer["result"], type=answer_type)

    async def pop(self, queue: str, **options: Any) -> PopResult:
        options.setdefault("batch", 100)
        return await self.call(PopResult, "pop", queue, **options)

    async def push(self, queue: str, values: list, **options: Any) -> list[PushResult]:
        return await self.call(list[PushResult], "push", queue, values, **options)

    async def ack(self, messages: list[Message], status: str = "completed", **options: Any) -> list[AckResult]:
        acks = [{"transaction_id": m.transaction_id, "partition_id": m.partition_id, "lease_id": m.lease_id,
                 "group": m.consumer_group, "status": status, **options} for m in messages]
        return await self.call(list[AckResult], "ack", acks)


@pytest.fixture(scope="module")
async def child(database_url, tmp_path_factory):
    log = tmp_path_factory.mktemp("library-child") / "child.log"
    urls = MEMBERS.get(database_url, [database_url])
    with log.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.plane.child", spool_dir(), *urls, cwd=ROOT,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr)
    try:
        assert process.stdout is not None
        ready = await asyncio.wait_for(process.stdout.readline(), 60)
        assert ready.startswith(b'{"ready":true}'), log.read_text(errors="replace")[-4000:]
        driver = Child(process)
        yield driver
        assert process.stdin is not None
        process.stdin.close()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), 15)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]
    assert process.returncode == 0, text[-4000:]


async def test_a_push_in_the_child_is_popped_over_http_with_its_bytes_ids_and_trace(child, http_plane, queue):
    trace = str(uuid.uuid4())
    value = {"order": 7, "lines": [1.5, "x"], "note": "é"}
    [pushed] = await child.push(queue, [value], partition="p1", transaction_ids=["lib-1"], trace_id=trace)

    [message] = await pop_now(http_plane, queue, partition="p1")

    assert (message.id, message.transaction_id, message.trace_id) == (pushed.message_id, "lib-1", trace)
    assert bytes(message.payload) == msgspec.json.encode(value)


async def test_an_http_push_is_popped_in_the_child_with_its_bytes(child, http_plane, queue):
    raw = b'{"b": 1,  "a": [2, "\\u00e9"]}'
    [pushed] = await http_plane.push_items([PushItem(queue=queue, raw=raw, partition="p2", transaction_id="h-1")])

    popped = await child.pop(queue, partition="p2")

    assert [(m.id, m.transaction_id, bytes(m.payload)) for m in popped.messages] == [(pushed.message_id, "h-1", raw)]


async def test_a_long_poll_in_the_child_is_woken_by_an_http_push(child, http_plane, queue):
    await http_plane.configure(queue)
    waiting = asyncio.create_task(child.pop(queue, wait=True, timeout_ms=30_000))
    await let_a_long_poll_park()

    await http_plane.push(queue, ["over http"])

    popped = await asyncio.wait_for(waiting, 25)  # before the poll's own 30 s
    assert [m.data for m in popped.messages] == ["over http"]


async def test_an_http_long_poll_is_woken_by_a_push_in_the_child(child, http_plane, queue):
    await http_plane.configure(queue)
    waiting = asyncio.create_task(http_plane.pop(queue, wait=True, timeout_ms=30_000))
    await let_a_long_poll_park()

    await child.push(queue, ["in the child"])

    popped = await asyncio.wait_for(waiting, 25)
    assert [m.data for m in popped.messages] == ["in the child"]


async def test_a_lease_taken_in_the_child_is_acked_over_http(child, http_plane, queue):
    await http_plane.configure(queue, QueueOptions(lease_time=1))
    await http_plane.push(queue, ["a", "b"])
    popped = await child.pop(queue)
    popped_at = time.monotonic()

    results = await http_plane.ack(popped.messages)

    assert [r.success for r in results] == [True, True]
    await outlast_lease(popped_at, 1)  # unacked, they would be back now
    assert await pop_now(http_plane, queue) == []


async def test_a_lease_taken_over_http_is_renewed_and_acked_in_the_child(child, http_plane, queue):
    await http_plane.configure(queue, QueueOptions(lease_time=1))
    await child.push(queue, ["held"])
    popped = await http_plane.pop(queue)
    popped_at = time.monotonic()

    renewed = await child.call(RenewResult, "renew", popped.lease_id, 30)

    assert renewed.success and renewed.renewed == 1
    await outlast_lease(popped_at, 1)
    assert not (await child.pop(queue)).messages  # still held past the queue's lease time
    assert [r.success for r in await child.ack(popped.messages)] == [True]
    assert not (await http_plane.renew(popped.lease_id)).success  # the ack released it


async def test_one_transaction_id_is_deduplicated_across_the_child_and_http(child, http_plane, queue):
    tx = f"once-{uuid.uuid4()}"
    [first] = await child.push(queue, ["from the child"], transaction_ids=[tx])
    [second] = await http_plane.push(queue, ["over http"], transaction_ids=[tx])
    [third] = await child.push(queue, ["the child again"], transaction_ids=[tx])

    assert first.status == "queued"
    assert (second.status, second.message_id) == ("duplicate", first.message_id)
    assert (third.status, third.message_id) == ("duplicate", first.message_id)
    assert [m.data for m in await pop_now(http_plane, queue)] == ["from the child"]


async def test_the_retry_budget_and_the_dead_letters_are_shared(child, http_plane, queue):
    await http_plane.configure(queue, QueueOptions(lease_time=30, retry_limit=1, retry_delay=0))
    [pushed] = await child.push(queue, ["doomed"])

    first = await child.pop(queue)
    assert [r.success for r in await child.ack(first.messages, "failed", error="in the child")] == [True]
    [second] = await pop_now(http_plane, queue)  # the one retry the budget allows
    assert second.delivery_attempt == 2
    [spent] = await http_plane.ack(second, False, error="over http")
    assert spent.success and spent.dlq

    seen_by_child = await child.call(DlqPage, "dlq", queue)
    seen_over_http = await http_plane.dlq(queue)
    assert [(d.id, d.transaction_id, d.error_message) for d in seen_by_child.messages] == \
        [(d.id, d.transaction_id, d.error_message) for d in seen_over_http.messages] == \
        [(seen_over_http.messages[0].id, pushed.transaction_id, "over http")]

    replayed = await http_plane.dlq_replay(seen_over_http.messages[0].id)
    popped = await child.pop(queue)
    assert [(m.id, m.data, m.delivery_attempt) for m in popped.messages] == [(replayed.message_id, "doomed", 1)]
