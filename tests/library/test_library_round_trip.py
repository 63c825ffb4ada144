"""Push, pop and ack through the library: every pop shape, long polls, leases, transactions,
configure, delete and the DLQ, on the session's PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

import msgspec

from reginamq.library import Ack, Message, PopResult, PushItem, QueueOptions
from tests.conftest import eventually


class Order(msgspec.Struct):
    step: int


async def test_push_pop_ack_round_trip(library, queue):
    pushed = await library.push(queue, [{"step": 1}, {"step": 2}], partition="alice", trace_id="trace-1")
    assert [result.status for result in pushed] == ["queued", "queued"]
    assert [result.queue for result in pushed] == [queue, queue]

    popped = await library.pop(queue, batch=10)
    assert isinstance(popped, PopResult)
    assert popped.partition == "alice" and popped.partitions_claimed == 1 and popped.lease_id
    assert [message.data for message in popped.messages] == [{"step": 1}, {"step": 2}]
    first = popped.messages[0]
    assert first.id == pushed[0].message_id and first.transaction_id == pushed[0].transaction_id
    assert first.trace_id == "trace-1" and first.queue == queue and first.consumer_group is None
    assert first.decode(Order) == Order(step=1) and first.delivery_attempt == 1
    assert isinstance(first.created_at, datetime) and bytes(first.payload) == b'{"step":1}'

    acked = await library.ack(popped.messages)
    assert [answer.success for answer in acked] == [True, True]
    assert not await library.pop(queue)  # an empty pop is an empty result, HTTP's 204


async def test_raw_payloads_go_back_as_pushed(library, queue):
    raw = b'{"b": 1,   "a": [1.50, "x"]}'
    await library.push_items([PushItem(queue=queue, raw=raw, transaction_id="t-1")])
    popped = await library.pop(queue, auto_ack=True)
    assert bytes(popped.messages[0].payload) == raw
    assert popped.lease_id is None and popped.messages[0].lease_id is None  # consumed at delivery


async def test_a_transaction_id_pushed_twice_is_a_duplicate(library, queue):
    first = await library.push(queue, ["a"], transaction_ids=["same"])
    again = await library.push(queue, ["b"], transaction_ids=["same"])
    assert again[0].status == "duplicate" and again[0].message_id == first[0].message_id


async def test_pop_of_one_partition(library, queue):
    await library.push(queue, [1], partition="a")
    await library.push(queue, [2], partition="b")
    popped = await library.pop(queue, partition="b")
    assert [message.data for message in popped.messages] == [2] and popped.partition == "b"


async def test_pop_of_several_partitions_at_once(library, queue):
    for name in ("a", "b", "c"):
        await library.push(queue, [name], partition=name)
    popped = await library.pop(queue, partitions=3, batch=10)
    assert popped.partitions_claimed == 3
    assert sorted(message.data for message in popped.messages) == ["a", "b", "c"]
    assert len({message.lease_id for message in popped.messages}) == 1


async def test_pop_by_namespace_and_task(library, queue):
    name = f"ns{queue[2:]}.billing.{queue}"
    await library.push(name, ["invoice"])
    popped = await library.pop(namespace=f"ns{queue[2:]}", task="billing")
    assert [message.data for message in popped.messages] == ["invoice"] and popped.queue == name


async def test_consumer_groups_each_see_every_message(library, queue, group):
    await library.push(queue, ["m"])
    for name in (group, group + "-2"):
        popped = await library.pop(queue, group=name, subscription_mode="all")
        assert [message.consumer_group for message in popped.messages] == [name]
        await library.ack(popped.messages)


async def test_a_long_poll_is_woken_by_a_push(library, queue):
    waiting = asyncio.create_task(library.pop(queue, wait=True, timeout_ms=30_000))
    started = time.monotonic()
    await library.push(queue, ["wake"])
    popped = await waiting
    assert [message.data for message in popped.messages] == ["wake"]
    assert time.monotonic() - started < 30  # answered by the push, not by the time-out


async def test_renewal_extends_a_lease_and_an_expired_one_is_refused(library, queue, db):
    await library.push(queue, ["slow"])
    popped = await library.pop(queue, lease_seconds=5)
    renewed = await library.renew(popped, 120)
    assert renewed.success and renewed.renewed == 1 and renewed.expires_at is not None
    expires = await db.fetchval("SELECT max(lease_expires_at) FROM rq_consumers WHERE lease_id = $1::uuid",
                                popped.lease_id)
    assert expires == renewed.expires_at.replace(microsecond=expires.microsecond)
    await library.ack(popped.messages)
    gone = await library.renew(popped.messages[0], 60)
    assert not gone.success and gone.error


async def test_a_failed_ack_redelivers_with_the_next_attempt(library, queue):
    await library.configure(queue, QueueOptions(retry_delay=0, retry_limit=3))
    await library.push(queue, ["again"])
    popped = await library.pop(queue)
    await library.ack(popped.messages, False, error="boom")
    again = await library.pop(queue, wait=True, timeout_ms=10_000)
    assert [message.delivery_attempt for message in again.messages] == [2]


async def test_transaction_acks_and_pushes_together(library, queue):
    await library.push(queue, ["in"])
    popped = await library.pop(queue)
    result = await library.transaction(acks=popped.messages, pushes=[PushItem(queue=queue + "-out", data="out")],
                                       required_leases=[popped.lease_id])
    assert result.success and [type(r).__name__ for r in result.results] == ["TxAckResult", "TxPushResult"]
    out = await library.pop(queue + "-out")
    assert [message.data for message in out.messages] == ["out"]

    await library.push(queue, ["twice"], transaction_ids=["dup"])
    rolled_back = await library.transaction(pushes=[PushItem(queue=queue, data="x", transaction_id="dup")])
    assert not rolled_back.success and rolled_back.reason == "duplicate"


async def test_a_rejected_ack_is_a_result(library, queue):
    await library.push(queue, ["x"])
    popped = await library.pop(queue)
    message = popped.messages[0]
    answer = await library.ack(Ack(transaction_id=message.transaction_id, partition_id=message.partition_id,
                                   lease_id="00000000-0000-0000-0000-000000000000"))
    assert not answer[0].success and answer[0].error


async def test_configure_and_delete(library, queue):
    config = await library.configure(queue, QueueOptions(lease_time=7, retry_limit=1))
    assert config.configured and config.options["leaseTime"] == 7 and config.options["retryLimit"] == 1
    merged = await library.configure(queue, {"maxSize": 10})
    assert merged.options["leaseTime"] == 7 and merged.options["maxSize"] == 10
    assert (await library.delete_queue(queue)).deleted
    assert not (await library.delete_queue(queue)).deleted


async def test_dead_letters_are_read_replayed_and_purged(library, queue, group):
    await library.configure(queue, QueueOptions(retry_limit=0, retry_delay=0))
    await library.push(queue, ["poison", "poison-2"])
    popped = await library.pop(queue, group=group, subscription_mode="all", batch=10)
    await library.ack(popped.messages, "dlq", error="cannot parse")
    page = await library.dlq(queue)
    assert page.total == 2 and {letter.data for letter in page.messages} == {"poison", "poison-2"}
    assert page.messages[0].consumer_group == group and page.messages[0].error_message == "cannot parse"
    replayed = await library.dlq_replay(page.messages[0].id)
    assert replayed.success and replayed.queue == queue
    assert await library.dlq_purge(queue) == 1

    async def back() -> list[Message]:
        return (await library.pop(queue, group=group)).messages
    assert [message.data for message in await eventually(back)] == [page.messages[0].data]
