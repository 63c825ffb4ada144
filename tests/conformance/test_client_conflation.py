"""conflation(): last-value delivery, a consumer group's policy fixed at its first pop.

A pop of a conflating group delivers only the newest visible message of each partition it
claims and retires everything behind it; queen-mq raises ConflationUnsupportedError on any
answer to a pop that asked for conflation without the broker's ``"conflation": true`` echo
(empty pops included), so every test here also proves the echo.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from queen.errors import ConflationUnsupportedError
from queen.utils import conflation as client_conflation

from tests.conformance.helpers import create_queue, dlq_rows, drain, pop_now

PARTITIONS = ("a", "b", "c")


async def push_backlog(queen, queue: str, per_partition: int = 5) -> None:
    for partition in PARTITIONS:
        await queen.queue(queue).partition(partition).push(
            [{"data": {"p": partition, "n": n}} for n in range(per_partition)])


def conflating(queen, queue: str, group: str):
    return queen.queue(queue).group(group).subscription_mode("all").conflation().wait(False)


async def test_a_conflating_group_under_a_backlog_sees_only_each_partitions_newest_message(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    await push_backlog(queen, queue)

    messages = await conflating(queen, queue, group).batch(10).pop()

    assert sorted((m["partition"], m["data"]["n"]) for m in messages) == [("a", 4), ("b", 4), ("c", 4)]
    await queen.ack(messages, True, {"group": group})
    assert await conflating(queen, queue, group).batch(10).pop() == []  # the echo rides the empty answer too
    # another group of the same queue, not conflating, still reads every message
    plain = await drain(queen, queue, group=f"{group}-plain")
    assert len(plain) == 3 * 5


async def test_the_next_pop_delivers_what_was_pushed_while_the_newest_was_leased(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).partition("a").push([{"data": {"n": n}} for n in range(3)])
    first = await conflating(queen, queue, group).batch(1).pop()
    assert [m["data"]["n"] for m in first] == [2]

    await queen.queue(queue).partition("a").push([{"data": {"n": n}} for n in range(3, 6)])
    assert await conflating(queen, queue, group).batch(1).pop() == []  # the partition is leased
    await queen.ack(first, True, {"group": group})

    second = await conflating(queen, queue, group).batch(1).pop()
    assert [m["data"]["n"] for m in second] == [5]


async def test_consume_with_conflation_runs_the_handler_once_per_partition_on_the_newest(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    await push_backlog(queen, queue, per_partition=20)
    handled = []

    async def handler(message):
        handled.append((message["partition"], message["data"]["n"]))

    await asyncio.wait_for(
        queen.queue(queue).group(group).subscription_mode("all").conflation().batch(1).limit(3).consume(handler), 30)

    assert sorted(handled) == [("a", 19), ("b", 19), ("c", 19)]
    depth = await queen.admin.get_queue_depth(queue, group)
    assert depth["conflation"] is True and depth["pending"] == 0 and depth["effectivePending"] == 0


async def test_depth_counts_a_conflating_groups_work_in_partitions(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    await conflating(queen, queue, group).batch(10).pop()  # registers the group as conflating
    await push_backlog(queen, queue, per_partition=4)

    depth = await queen.admin.get_queue_depth(queue, group)

    assert depth["conflation"] is True
    assert depth["pending"] == 12 and depth["partitionsPending"] == 3 and depth["effectivePending"] == 3
    plain = await queen.admin.get_queue_depth(queue)
    assert plain["conflation"] is False and plain["effectivePending"] == plain["pending"]
    assert (await queen.admin.get_consumer_group(group))[queue]["conflation"] is True


async def test_the_policy_stored_at_registration_wins_for_every_consumer_of_the_group(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    await conflating(queen, queue, group).batch(10).pop()  # registered conflating
    await push_backlog(queen, queue)

    # a consumer of the same group that does not ask for conflation is conflated all the same
    messages = await queen.queue(queue).group(group).batch(10).wait(False).pop()
    assert sorted(m["data"]["n"] for m in messages) == [4, 4, 4]


async def test_asking_for_conflation_on_a_plain_group_warns_and_keeps_plain_delivery(queen, queue, group, capsys):
    await create_queue(queen, queue, lease_time=30)
    await pop_now(queen, queue, group=group)  # registered without conflation
    await queen.queue(queue).partition("a").push([{"data": {"n": n}} for n in range(4)])
    client_conflation.reset_conflict_warnings()

    messages = await conflating(queen, queue, group).batch(10).pop()

    assert [m["data"]["n"] for m in messages] == [0, 1, 2, 3]
    assert "conflation conflict" in capsys.readouterr().err


async def test_conflation_is_refused_without_a_group_and_with_commit_on_delivery(queen, queue, group):
    await create_queue(queen, queue)
    await queen.queue(queue).push([{"data": 1}])
    with pytest.raises(httpx.HTTPStatusError) as no_group:
        await queen.queue(queue).conflation().batch(1).wait(False).pop()
    assert no_group.value.response.status_code == 400
    with pytest.raises(httpx.HTTPStatusError) as auto_ack:
        await conflating(queen, queue, group).commit_on_delivery().batch(1).pop()
    assert auto_ack.value.response.status_code == 400
    assert len(await pop_now(queen, queue)) == 1  # nothing was consumed by the refused pops


async def test_a_failed_newest_message_is_retried_then_dead_lettered(queen, queue, group, db):
    await create_queue(queen, queue, lease_time=30, retry_limit=1, retry_delay=0)
    await queen.queue(queue).partition("a").push([{"data": {"n": n}} for n in range(3)])

    first = await conflating(queen, queue, group).batch(1).pop()
    assert [(m["data"]["n"], m["deliveryAttempt"]) for m in first] == [(2, 1)]
    await queen.ack(first, False, {"group": group, "error": "boom"})
    again = await conflating(queen, queue, group).batch(1).pop()
    assert [(m["data"]["n"], m["deliveryAttempt"]) for m in again] == [(2, 2)]
    await queen.ack(again, False, {"group": group, "error": "boom again"})

    rows = await dlq_rows(db, queue)
    assert [(r["transaction_id"], r["consumer_group"]) for r in rows] == [(first[0]["transactionId"], group)]
    assert await conflating(queen, queue, group).batch(1).pop() == []


async def test_a_broker_that_echoes_nothing_would_be_caught_by_the_client(queen, queue, group):
    """The guard the echo satisfies: the client's own check raises on an answer without it."""
    with pytest.raises(ConflationUnsupportedError):
        client_conflation.check_pop_response({"messages": []}, requested=True, queue=queue, group=group)
    await create_queue(queen, queue)
    assert await conflating(queen, queue, group).batch(5).pop() == []  # our empty answer passes it


async def test_a_deleted_newest_message_hands_the_newest_one_left(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    await queen.queue(queue).partition("a").push([{"data": {"n": n}, "transactionId": f"t{n}"} for n in range(4)])
    listed = await queen.admin.list_messages(queue=queue)
    newest = next(m for m in listed["messages"] if m["transactionId"] == "t3")
    await queen.admin.delete_message(newest["partitionId"], "t3")

    messages = await conflating(queen, queue, group).batch(1).pop()

    assert [m["data"]["n"] for m in messages] == [2]
    await queen.ack(messages, True, {"group": group})
    assert await conflating(queen, queue, group).batch(1).pop() == []  # which passes the deleted one
    assert (await queen.admin.get_queue_depth(queue, group))["pending"] == 0


async def test_a_deleted_group_registers_afresh_with_the_policy_of_its_next_pop(queen, queue, group):
    await create_queue(queen, queue, lease_time=30)
    await conflating(queen, queue, group).batch(10).pop()  # registered conflating
    await queen.admin.delete_consumer_group_for_queue(group, queue)
    await queen.queue(queue).partition("a").push([{"data": {"n": n}} for n in range(3)])

    plain = await drain(queen, queue, group=group)  # registers it plain, on whichever worker

    assert [m["data"]["n"] for m in plain] == [0, 1, 2]
    assert (await queen.admin.get_queue_depth(queue, group))["conflation"] is False
