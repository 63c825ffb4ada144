"""Consumer groups: independent cursors, subscription modes, durable subscriptions."""

from __future__ import annotations

from datetime import UTC, timedelta

from tests.integration.helpers import ack_batch, pop, pop_messages, push


async def test_each_named_group_sees_every_message(http, queue):
    await push(http, queue, *range(5))
    for group in ("g1", "g2", "g3"):
        messages = await pop_messages(http, queue, consumerGroup=group, subscriptionMode="all")
        assert [m["data"] for m in messages] == list(range(5))
        await ack_batch(http, messages, consumer_group=group)
    # queue mode is one more independent reader
    assert [m["data"] for m in await pop_messages(http, queue)] == list(range(5))
    await push(http, queue, 5)
    for group in ("g1", "g2", "g3"):
        assert [m["data"] for m in await pop_messages(http, queue, consumerGroup=group)] == [5]


async def test_acks_of_one_group_do_not_move_another(http, queue):
    await push(http, queue, "a", "b")
    g1 = await pop_messages(http, queue, consumerGroup="g1", subscriptionMode="all")
    await ack_batch(http, g1, consumer_group="g1")
    g2 = await pop_messages(http, queue, consumerGroup="g2", subscriptionMode="all")
    assert [m["data"] for m in g2] == ["a", "b"]


async def test_named_group_default_subscription_is_new_as_on_queen(http, queue):
    await push(http, queue, "old-1", "old-2")
    assert await pop(http, queue, consumerGroup="late-joiner") is None
    await push(http, queue, "later")
    messages = await pop_messages(http, queue, consumerGroup="late-joiner")
    assert [m["data"] for m in messages] == ["later"]


async def test_subscription_mode_all_reads_history(http, queue):
    await push(http, queue, "old")
    messages = await pop_messages(http, queue, consumerGroup="g", subscriptionMode="all")
    assert [m["data"] for m in messages] == ["old"]


async def _skips_history(http, queue, **subscription):
    await push(http, queue, "before-1", "before-2")
    assert await pop(http, queue, consumerGroup="fresh", **subscription) is None
    await push(http, queue, "after")
    messages = await pop_messages(http, queue, consumerGroup="fresh", **subscription)
    assert [m["data"] for m in messages] == ["after"]
    # another group that asks for "all" still sees the history
    history = await pop_messages(http, queue, consumerGroup="historian", subscriptionMode="all")
    assert [m["data"] for m in history] == ["before-1", "before-2", "after"]


async def test_subscription_mode_new_skips_earlier_messages(http, queue):
    await _skips_history(http, queue, subscriptionMode="new")


async def test_subscription_mode_new_only_skips_earlier_messages(http, queue):
    await _skips_history(http, queue, subscriptionMode="new-only")


async def test_subscription_from_now_skips_earlier_messages(http, queue):
    await _skips_history(http, queue, subscriptionFrom="now")


async def test_subscription_from_timestamp_between_two_pushes(http, queue, db):
    await push(http, queue, "first")
    between = await db.fetchval("SELECT clock_timestamp()")
    await push(http, queue, "second")
    await push(http, queue, "third")
    messages = await pop_messages(http, queue, consumerGroup="from-ts", subscriptionFrom=between.isoformat())
    assert [m["data"] for m in messages] == ["second", "third"]


async def test_subscription_from_timestamp_in_z_form(http, queue, db):
    await push(http, queue, "first")
    between = await db.fetchval("SELECT clock_timestamp()")
    # rounded up to the next millisecond: still after "first", and a push round trip takes longer
    rounded = between + timedelta(microseconds=1000 - between.microsecond % 1000)
    await push(http, queue, "second")
    stamp = rounded.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    messages = await pop_messages(http, queue, consumerGroup="from-z", subscriptionFrom=stamp)
    assert [m["data"] for m in messages] == ["second"]


async def test_subscription_is_durable_for_the_group(http, queue):
    # history in two partitions, before the group exists
    await push(http, queue, "history-a", partition="pa")
    await push(http, queue, "history-b", partition="pb")
    # the group registers with subscriptionMode=new by reading one partition only
    assert await pop(http, queue, "pa", consumerGroup="durable", subscriptionMode="new") is None
    # a later pop without the parameter keeps the subscription: pb's history stays skipped
    assert await pop(http, queue, consumerGroup="durable", partitions=10) is None
    # a partition created after the group registered is read from its beginning
    await push(http, queue, "new-1", "new-2", partition="pc")
    await push(http, queue, "more-a", partition="pa")
    body = await pop(http, queue, consumerGroup="durable", partitions=10)
    got = {}
    for m in body["messages"]:
        got.setdefault(m["partition"], []).append(m["data"])
    assert got == {"pc": ["new-1", "new-2"], "pa": ["more-a"]}


async def test_subscription_params_do_not_reseed_existing_group(http, queue):
    await push(http, queue, "one")
    messages = await pop_messages(http, queue, consumerGroup="g", subscriptionMode="new")
    assert messages == []
    await push(http, queue, "two")
    # asking for "all" later does not rewind the group's durable subscription
    messages = await pop_messages(http, queue, consumerGroup="g", subscriptionMode="all")
    assert [m["data"] for m in messages] == ["two"]


async def test_queue_mode_always_reads_everything(http, queue):
    await push(http, queue, "old")
    messages = await pop_messages(http, queue, subscriptionMode="new")
    assert [m["data"] for m in messages] == ["old"]
