"""Push, pop (every shape) and ack, written once and run over HTTP and through the library
(ported from tests/conformance/test_client_push_pop_ack.py without the client's own behaviour)."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime

from reginamq.library import Ack, PushItem, QueueOptions
from tests.conftest import let_a_long_poll_park, outlast_lease
from tests.plane.helpers import data, pop_now, pop_until

# ---------------------------------------------------------------- push


async def test_push_answers_one_queued_result_per_item_in_order(plane, queue):
    results = await plane.push(queue, [{"n": i} for i in range(5)])

    assert [r.index for r in results] == [0, 1, 2, 3, 4]
    assert {r.status for r in results} == {"queued"}
    assert {r.queue for r in results} == {queue}
    assert len({r.message_id for r in results}) == 5 and all(r.transaction_id for r in results)
    messages = await pop_now(plane, queue)
    assert [m.data["n"] for m in messages] == [0, 1, 2, 3, 4]
    assert [(m.id, m.transaction_id) for m in messages] == [(r.message_id, r.transaction_id) for r in results]


async def test_scalar_null_and_list_payloads_come_back_as_pushed(plane, queue):
    await plane.push(queue, ["text", 42, None, [1, 2], 1.5, {"nested": {"deep": [True]}}])

    messages = await pop_now(plane, queue)
    assert data(messages) == ["text", 42, None, [1, 2], 1.5, {"nested": {"deep": [True]}}]


async def test_raw_payload_bytes_are_delivered_verbatim(plane, queue):
    await plane.push_items([PushItem(queue=queue, raw=b'{"b":1,  "a":[2]}')])

    [message] = await pop_now(plane, queue)
    assert bytes(message.payload) == b'{"b":1,  "a":[2]}'


async def test_push_items_to_several_queues_and_partitions_in_one_call(plane, queue, queue2):
    results = await plane.push_items([PushItem(queue=queue, data=1, partition="a"),
                                      PushItem(queue=queue2, data=2), PushItem(queue=queue, data=3, partition="b")])

    assert [(r.index, r.queue) for r in results] == [(0, queue), (1, queue2), (2, queue)]
    assert data(await pop_now(plane, queue, partition="b")) == [3]
    assert data(await pop_now(plane, queue2)) == [2]
    [message] = await pop_now(plane, queue, partition="a")
    assert message.partition == "a" and message.partition_id and message.queue == queue


async def test_explicit_transaction_id_dedups_with_the_original_id(plane, queue):
    tx = f"order-{uuid.uuid4()}"
    first = await plane.push(queue, [{"v": 1}], transaction_ids=[tx])
    second = await plane.push(queue, [{"v": 2}], transaction_ids=[tx])

    assert (first[0].status, first[0].transaction_id) == ("queued", tx)
    assert second[0].status == "duplicate" and second[0].message_id == first[0].message_id
    assert [(m.transaction_id, m.data) for m in await pop_now(plane, queue)] == [(tx, {"v": 1})]


async def test_duplicate_within_one_push_first_item_wins(plane, queue):
    tx = f"dup-{uuid.uuid4()}"
    results = await plane.push(queue, [{"v": "first"}, {"v": "second"}], transaction_ids=[tx, tx])

    assert [r.status for r in results] == ["queued", "duplicate"]
    assert results[1].message_id == results[0].message_id
    assert data(await pop_now(plane, queue)) == [{"v": "first"}]


async def test_dedup_is_per_partition(plane, queue):
    tx = f"tx-{uuid.uuid4()}"
    a = await plane.push(queue, [1], partition="a", transaction_ids=[tx])
    b = await plane.push(queue, [2], partition="b", transaction_ids=[tx])

    assert (a[0].status, b[0].status) == ("queued", "queued")
    assert a[0].message_id != b[0].message_id


async def test_dedup_window_zero_accepts_repeated_transaction_ids(plane, queue):
    await plane.configure(queue, QueueOptions(dedup_window_seconds=0))
    tx = f"tx-{uuid.uuid4()}"
    first = await plane.push(queue, [1], transaction_ids=[tx])
    second = await plane.push(queue, [2], transaction_ids=[tx])

    assert (first[0].status, second[0].status) == ("queued", "queued")
    assert second[0].message_id != first[0].message_id
    assert data(await pop_now(plane, queue)) == [1, 2]


async def test_trace_id_is_delivered_with_the_message(plane, queue):
    trace = str(uuid.uuid4())
    await plane.push(queue, [{"n": 1}], trace_id=trace)
    await plane.push(queue, [{"n": 2}])

    assert [m.trace_id for m in await pop_now(plane, queue)] == [trace, None]


# ---------------------------------------------------------------- pop


async def test_pop_batch_returns_at_most_batch_in_push_order_under_one_lease(plane, queue):
    await plane.push(queue, [{"n": i} for i in range(10)])

    first = await plane.pop(queue, batch=4)
    assert [m.data["n"] for m in first.messages] == [0, 1, 2, 3]
    assert first.lease_id and {m.lease_id for m in first.messages} == {first.lease_id}
    assert {m.delivery_attempt for m in first.messages} == {1}
    assert (first.queue, first.partition, first.partitions_claimed) == (queue, "Default", 1)
    assert all(r.success for r in await plane.ack(first.messages))

    rest = await plane.pop(queue, batch=100)
    assert [m.data["n"] for m in rest.messages] == [4, 5, 6, 7, 8, 9]


async def test_pop_without_batch_takes_the_default_batch(plane, queue):
    await plane.push(queue, list(range(30)))

    assert data((await plane.pop(queue)).messages) == list(range(30))


async def test_empty_pop_without_wait_answers_at_once_with_nothing(plane, queue):
    await plane.configure(queue)

    popped = await plane.pop(queue, wait=False)
    assert not popped and popped.messages == [] and popped.lease_id is None


async def test_long_poll_is_woken_by_a_push(plane, queue):
    await plane.configure(queue)
    waiting = asyncio.create_task(plane.pop(queue, batch=1, wait=True, timeout_ms=30_000))
    await let_a_long_poll_park()
    await plane.push(queue, [{"late": True}])

    popped = await asyncio.wait_for(waiting, 25)  # well before the poll's own timeout
    assert data(popped.messages) == [{"late": True}]


async def test_long_poll_times_out_empty(plane, queue):
    await plane.configure(queue)
    started = time.monotonic()

    popped = await plane.pop(queue, wait=True, timeout_ms=500)

    assert not popped and time.monotonic() - started >= 0.4


async def test_pop_of_a_named_partition_returns_only_that_partition(plane, queue):
    await plane.push(queue, [{"p": "a", "n": i} for i in range(3)], partition="a")
    await plane.push(queue, [{"p": "b", "n": i} for i in range(3)], partition="b")

    popped = await plane.pop(queue, partition="b", batch=10)

    assert [(m.data["p"], m.data["n"]) for m in popped.messages] == [("b", 0), ("b", 1), ("b", 2)]
    assert popped.partition == "b" and {m.partition for m in popped.messages} == {"b"}
    assert await pop_now(plane, queue, partition="zzz") == []


async def test_one_leased_batch_per_partition(plane, queue):
    await plane.push(queue, list(range(4)))

    first = await plane.pop(queue, batch=2)
    second = await plane.pop(queue, batch=2)

    assert data(first.messages) == [0, 1]
    assert not second  # the partition is leased: nobody reads past it


async def test_a_wildcard_pop_takes_another_partition_while_one_is_leased(plane, queue):
    await plane.push(queue, ["a1", "a2"], partition="a")
    await plane.push(queue, ["b1", "b2"], partition="b")

    first = await plane.pop(queue, batch=10)
    second = await plane.pop(queue, batch=10)

    assert {tuple(data(first.messages)), tuple(data(second.messages))} == {("a1", "a2"), ("b1", "b2")}
    assert first.partition != second.partition
    assert not await plane.pop(queue, batch=10)


async def test_a_multi_partition_pop_claims_several_partitions_under_one_lease(plane, queue):
    for p in ("a", "b", "c"):
        await plane.push(queue, [f"{p}{i}" for i in range(2)], partition=p)

    popped = await plane.pop(queue, batch=100, partitions=3)

    assert popped.partitions_claimed == 3
    by_partition: dict[str, list] = {}
    for message in popped.messages:
        assert message.lease_id == popped.lease_id
        by_partition.setdefault(message.partition, []).append(message.data)
    assert by_partition == {p: [f"{p}0", f"{p}1"] for p in ("a", "b", "c")}
    assert all(r.success for r in await plane.ack(popped.messages))
    assert not await plane.pop(queue, batch=100, partitions=3)


async def test_a_namespace_and_task_pop_finds_the_queues_configured_under_them(plane, queue, queue2):
    namespace, task = f"ns-{uuid.uuid4().hex[:8]}", "invoices"
    await plane.configure(queue, namespace=namespace, task=task)
    await plane.configure(queue2, namespace=namespace, task="other")
    await plane.push(queue2, ["not this task"])
    await plane.push(queue, ["billed"])

    by_task = await plane.pop(namespace=namespace, task=task, batch=10)
    assert (by_task.queue, data(by_task.messages)) == (queue, ["billed"])
    by_namespace = await plane.pop(namespace=namespace, batch=10)
    assert (by_namespace.queue, data(by_namespace.messages)) == (queue2, ["not this task"])


async def test_auto_ack_pop_needs_no_ack(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, [0, 1, 2])

    popped = await plane.pop(queue, batch=10, auto_ack=True)
    popped_at = time.monotonic()
    assert data(popped.messages) == [0, 1, 2]
    assert all(m.lease_id is None for m in popped.messages)

    await outlast_lease(popped_at, 1)  # a lease, had there been one, would have run out
    assert await pop_now(plane, queue) == []


async def test_lease_seconds_of_a_pop_outlives_the_queues_lease_time(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, ["held"])

    popped = await plane.pop(queue, lease_seconds=30)
    popped_at = time.monotonic()

    await outlast_lease(popped_at, 1)
    assert await pop_now(plane, queue) == []  # still leased: the pop asked for 30 s
    assert all(r.success for r in await plane.ack(popped.messages))


async def test_subscription_from_reads_what_came_after_the_instant(plane, queue, group):
    await plane.push(queue, ["before"])
    start = datetime.now(UTC)  # after the first push committed (one machine, one clock)
    await plane.push(queue, ["after"])

    popped = await plane.pop(queue, group=group, subscription_from=start, batch=10)
    assert data(popped.messages) == ["after"]
    assert data(await pop_now(plane, queue, group=f"{group}-all")) == ["before", "after"]


# ---------------------------------------------------------------- ack


async def test_ack_completes_the_message(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, [1])
    [message] = await pop_now(plane, queue)
    popped_at = time.monotonic()

    [result] = await plane.ack(message, True)

    assert result.success and not result.error and result.transaction_id == message.transaction_id
    await outlast_lease(popped_at, 1)  # an unacked message would be back now
    assert await pop_now(plane, queue) == []


async def test_ack_of_a_batch_releases_the_lease_for_the_next_batch(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30))
    await plane.push(queue, [0, 1, 2, 3])
    first = await plane.pop(queue, batch=2)

    results = await plane.ack(first.messages)

    assert [r.success for r in results] == [True, True] and [r.index for r in results] == [0, 1]
    assert results[-1].lease_released
    assert data((await plane.pop(queue, batch=2)).messages) == [2, 3]


async def test_ack_by_ids_for_a_message_popped_elsewhere(plane, queue):
    await plane.push(queue, ["x"])
    [message] = await pop_now(plane, queue)

    [result] = await plane.ack(Ack(transaction_id=message.transaction_id, partition_id=message.partition_id,
                                   lease_id=message.lease_id))

    assert result.success
    assert await pop_now(plane, queue) == []


async def test_failed_ack_redelivers_after_the_default_retry_delay(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30, retry_limit=3))
    await plane.push(queue, ["x"])
    [message] = await pop_now(plane, queue)

    [result] = await plane.ack(message, False, error="boom")
    failed_at = time.monotonic()

    assert result.success and not result.error
    assert await pop_now(plane, queue) == []  # the default retryDelay (1000 ms) holds it back
    again = await plane.pop(queue, wait=True, timeout_ms=10_000)
    assert time.monotonic() - failed_at >= 0.9
    assert [(m.transaction_id, m.delivery_attempt) for m in again.messages] == [(message.transaction_id, 2)]


async def test_retry_redelivers_without_charging_the_budget(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30, retry_limit=1, retry_delay=0))
    await plane.push(queue, ["r"])

    attempts = []
    for _ in range(4):  # far past retry_limit=1: 'retry' never spends the budget
        [message] = await pop_now(plane, queue)
        attempts.append(message.delivery_attempt)
        [result] = await plane.ack(message, "retry")
        assert result.success and not result.error

    assert data(await pop_now(plane, queue)) == ["r"]
    assert attempts == [1, 2, 3, 4]
    assert (await plane.dlq(queue)).total == 0


async def test_dlq_status_dead_letters_at_once_and_moves_the_cursor(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30, retry_limit=5))
    await plane.push(queue, ["bad", "good"])
    [bad] = await pop_now(plane, queue, batch=1)

    [result] = await plane.ack(bad, "dlq", error="poison")

    assert result.success and result.dlq and not result.error
    page = await plane.dlq(queue)
    assert [(d.transaction_id, d.error_message) for d in page.messages] == [(bad.transaction_id, "poison")]
    [good] = await pop_now(plane, queue)
    assert good.data == "good"


async def test_batch_ack_with_a_group_reports_each_success(plane, queue, group):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, list(range(5)))
    messages = await pop_now(plane, queue, group=group)
    popped_at = time.monotonic()
    assert data(messages) == [0, 1, 2, 3, 4] and {m.consumer_group for m in messages} == {group}

    results = await plane.ack(messages, True, group=group)

    assert len(results) == 5 and all(r.success and not r.error for r in results)
    await outlast_lease(popped_at, 1)
    assert await pop_now(plane, queue, group=group) == []


async def test_batch_ack_failed_redelivers_the_batch(plane, queue, group):
    await plane.configure(queue, QueueOptions(lease_time=30, retry_limit=3, retry_delay=0))
    await plane.push(queue, [0, 1, 2])
    messages = await pop_now(plane, queue, group=group)

    assert all(r.success for r in await plane.ack(messages, False, group=group, error="handler failed"))

    again = await pop_now(plane, queue, group=group)
    assert [m.transaction_id for m in again] == [m.transaction_id for m in messages]
    assert {m.delivery_attempt for m in again} == {2}


async def test_acks_with_their_own_statuses_stop_the_cursor_at_the_first_failure(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30, retry_limit=3, retry_delay=0))
    await plane.push(queue, [0, 1, 2])
    m0, m1, m2 = await pop_now(plane, queue)
    def by_id(m, status, error=None):
        return Ack(transaction_id=m.transaction_id, partition_id=m.partition_id, lease_id=m.lease_id,
                   status=status, error=error)

    results = await plane.ack([by_id(m0, "completed"), by_id(m1, "failed", "second"), by_id(m2, "completed")])

    assert all(r.success for r in results)
    again = await pop_now(plane, queue)
    assert (again[0].data, again[0].delivery_attempt) == (1, 2)


async def test_ack_with_an_expired_lease_is_refused_as_a_result(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=1))
    await plane.push(queue, ["late"])
    [stale] = await pop_now(plane, queue)
    [redelivered] = await pop_until(plane, queue)  # once the lease ran out
    assert (redelivered.transaction_id, redelivered.delivery_attempt) == (stale.transaction_id, 2)

    [refused] = await plane.ack(stale, True)
    [accepted] = await plane.ack(redelivered, True)

    assert not refused.success and refused.error
    assert accepted.success


async def test_three_partitions_drain_in_order_for_a_group(plane, queue, group):
    await plane.configure(queue, QueueOptions(lease_time=30))
    for p in ("a", "b", "c"):
        await plane.push(queue, [{"p": p, "n": i} for i in range(20)], partition=p)

    seen = []
    for _ in range(20):
        messages = await pop_now(plane, queue, group=group, batch=10)
        if not messages:
            break
        seen.extend(messages)
        assert all(r.success for r in await plane.ack(messages, group=group))

    by_partition: dict[str, list[int]] = {}
    for m in seen:
        by_partition.setdefault(m.data["p"], []).append(m.data["n"])
    assert by_partition == {p: list(range(20)) for p in ("a", "b", "c")}
