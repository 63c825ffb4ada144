"""Dead letters: made by failures or a dlq ack, listed, replayed and purged, over HTTP and
through the library (ported from tests/conformance/test_client_dlq.py)."""

from __future__ import annotations

import pytest

from reginamq.library import NotFound, QueueOptions
from tests.plane.helpers import data, pop_now


async def dead_letter_one(plane, queue, group=None, error="poison", partition="Default"):
    await plane.configure(queue, QueueOptions(lease_time=30, retry_limit=3))
    [pushed] = await plane.push(queue, [{"bad": True}], partition=partition)
    [message] = await pop_now(plane, queue, group=group, partition=partition)
    [result] = await plane.ack(message, "dlq", error=error, group=group)
    assert result.success and result.dlq
    return pushed


async def test_retry_exhaustion_dead_letters_with_the_last_error(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30, retry_limit=1, retry_delay=0))
    [pushed] = await plane.push(queue, ["doomed"])

    attempts = []
    for _ in range(5):
        messages = await pop_now(plane, queue)
        if not messages:
            break
        attempts.append(messages[0].delivery_attempt)
        [result] = await plane.ack(messages[0], False, error=f"try {len(attempts)}")
        assert result.success

    assert attempts == [1, 2]  # the first delivery and retry_limit retries
    page = await plane.dlq(queue)
    assert [(d.transaction_id, d.error_message) for d in page.messages] == [(pushed.transaction_id, "try 2")]


async def test_a_dead_letter_records_the_retries_it_spent(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30, retry_limit=1, retry_delay=0))
    await plane.push(queue, ["doomed"])
    for _ in range(2):
        [message] = await pop_now(plane, queue)
        assert (await plane.ack(message, False, error="again"))[0].success

    [entry] = (await plane.dlq(queue)).messages
    assert entry.retry_count == 1


async def test_dlq_is_per_consumer_group(plane, queue, group):
    await dead_letter_one(plane, queue, group=group, error="group-specific")

    mine = await plane.dlq(queue, group=group)
    other = await plane.dlq(queue, group="some-other-group")

    assert [d.consumer_group for d in mine.messages] == [group] and other.total == 0
    assert data(await pop_now(plane, queue)) == [{"bad": True}]  # queue mode never failed it


async def test_dlq_off_drops_exhausted_messages(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30, retry_limit=0, dead_letter_queue=False,
                                              dlq_after_max_retries=False))
    await plane.push(queue, ["dropped", "next"])
    [message] = await pop_now(plane, queue, batch=1)

    [result] = await plane.ack(message, False, error="nope")

    assert result.success and not result.dlq
    assert (await plane.dlq(queue)).total == 0
    assert data(await pop_now(plane, queue)) == ["next"]


async def test_a_dead_letter_is_listed_with_its_message_and_never_redelivered(plane, queue):
    pushed = await dead_letter_one(plane, queue, error="poison", partition="p")

    page = await plane.dlq(queue, limit=10)

    assert (page.total, page.limit, page.offset) == (1, 10, 0)
    [entry] = page.messages
    assert (entry.transaction_id, entry.message_id) == (pushed.transaction_id, pushed.message_id)
    assert (entry.queue, entry.partition, entry.error_message, entry.data) == (queue, "p", "poison", {"bad": True})
    assert entry.consumer_group is None
    assert (await plane.dlq(queue, partition="other")).total == 0
    assert await pop_now(plane, queue) == []


async def test_pages_keep_a_stable_total(plane, queue):
    await plane.configure(queue, QueueOptions(lease_time=30, retry_limit=3))
    await plane.push(queue, [{"n": n} for n in range(3)])
    for _ in range(3):
        [message] = await pop_now(plane, queue, batch=1)
        assert (await plane.ack(message, "dlq", error="poison"))[0].success

    first = await plane.dlq(queue, limit=2)
    rest = await plane.dlq(queue, limit=2, offset=2)

    assert (first.total, rest.total) == (3, 3)
    assert (len(first.messages), len(rest.messages)) == (2, 1)
    assert sorted(d.data["n"] for d in first.messages + rest.messages) == [0, 1, 2]


async def test_replay_puts_the_message_back_once(plane, queue):
    pushed = await dead_letter_one(plane, queue)
    [entry] = (await plane.dlq(queue)).messages

    replayed = await plane.dlq_replay(entry.id)

    assert replayed.success and (replayed.queue, replayed.partition) == (queue, "Default")
    assert replayed.transaction_id and replayed.message_id != pushed.message_id
    [again] = await pop_now(plane, queue)
    assert (again.id, again.data) == (replayed.message_id, {"bad": True})
    assert (await plane.dlq(queue)).total == 0
    with pytest.raises(NotFound) as twice:
        await plane.dlq_replay(entry.id)
    assert twice.value.status == 404


async def test_purge_deletes_a_groups_dead_letters_only(plane, queue, group):
    await dead_letter_one(plane, queue, group=group)
    [message] = await pop_now(plane, queue)  # queue mode fails it too
    assert (await plane.ack(message, "dlq", error="queue mode"))[0].dlq
    assert (await plane.dlq(queue)).total == 2

    assert await plane.dlq_purge(queue, group=group) == 1
    assert [d.error_message for d in (await plane.dlq(queue)).messages] == ["queue mode"]
    assert await plane.dlq_purge(queue) == 1
    assert (await plane.dlq(queue)).total == 0
