"""Consumer groups over three member databases (store/sharded_consumer_groups.py): a group's
subscription is on every member with one start, even on members where it has not popped yet;
its summary adds the members' partitions and lags up; seek and delete reach every member."""

from __future__ import annotations

from tests.engine.helpers import ack, pop, push, sharded


async def subscriptions(store, queue: str, group: str) -> list:
    """(mode, start) of ``group``'s subscription to ``queue`` on each member."""
    found = []
    for member_store in store.homes.stores:
        queue_id = (await member_store.provisioning.existing_queues([queue]))[queue]
        row = await member_store.consumer_groups.subscription(queue_id, group)
        found.append(None if row is None else (row[0], row[1]))
    return found


async def drain(messages, queue: str, group: str) -> list[str]:
    """Pops (and acks) everything ``group`` gets from ``queue``; the transactionIds, in order."""
    txids = []
    while True:
        lease_id, delivered, _ = await pop(messages, queue, batch=50, group=group)
        if not delivered:
            return txids
        txids += [txid for _, _, txid in delivered]
        await ack(messages, lease_id, delivered, group=group)


async def test_a_new_subscription_starts_at_one_instant_on_every_member(database_url):
    async with sharded(database_url) as (_deployment, store):
        await push(store.messages, [("s", f"p{n}", f"old-{n}") for n in range(30)])
        _, delivered, _ = await pop(store.messages, "s", "p0", group="g-new", mode="new")
        assert delivered == []
        starts = await subscriptions(store, "s", "g-new")
        assert starts[0] is not None and starts[0][0] == "new" and starts == [starts[0]] * 3
        await push(store.messages, [("s", f"p{n}", f"new-{n}") for n in range(30)])
        assert sorted(await drain(store.messages, "s", "g-new")) == sorted(f"new-{n}" for n in range(30))


async def test_summaries_add_up_the_members_and_seek_and_delete_reach_every_one(database_url):
    async with sharded(database_url) as (_deployment, store):
        await push(store.messages, [("c", f"p{n}", f"t{n}") for n in range(30)])
        lease_id, delivered, _ = await pop(store.messages, "c", "p3", group="g")
        await ack(store.messages, lease_id, delivered, group="g")
        [summary] = await store.consumer_groups.summaries("g", "c")
        assert (summary["partitions"], summary["total_lag"], summary["partitions_with_lag"]) == (30, 29, 29)
        page = await store.consumer_groups.partition_pages("g", "c", 10, 5)
        assert [row["partition_name"] for row in page] == sorted(f"p{n}" for n in range(30))[5:15]
        seek = await store.consumer_groups.seek("g", "c", True, None)
        assert seek["updated"] + seek["created"] == 30
        assert await drain(store.messages, "c", "g") == []
        [summary] = await store.consumer_groups.summaries("g", "c")
        assert summary["total_lag"] == 0
        deleted = await store.consumer_groups.delete("g", "c", True)
        assert deleted == {"cursors": 30, "subscriptions": 1}
        for member_store in store.homes.stores:
            assert await member_store.consumer_groups.summaries("g", "c") == []
