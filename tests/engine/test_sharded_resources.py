"""Resources and statistics over three member databases (store/sharded_resources.py,
store/sharded_statistics.py): the same traffic put into one database and into a deployment of
three, every call of both families answers alike on both, pages included, once the rows that
legitimately differ (ids, instants) are left out."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import orjson

from reginamq.engine.names import QUEUE_MODE
from reginamq.engine.push import NEW_QUEUE_OPTIONS
from reginamq.store import Store
from reginamq.store.members import place
from reginamq.store.routing import Pooled
from reginamq.store.sharded_resources import ShardedResources
from reginamq.store.sharded_statistics import ShardedStatistics
from tests.engine.helpers import columns, member_databases, opened, sharded

ORDERS, RETURNS, AUDIT = "shop.orders", "shop.returns", "audit"
LEASE_SECONDS = 3600  # longer than any run: a lease taken here is in flight until the end
INSTANTS = {"id", "at", "created_at", "updated_at", "last_write_at", "oldest_pending_at", "refreshed_at"}


def plain(rows):
    """Rows (or one row) as dicts without the columns one database and three answer apart."""
    if rows is None or isinstance(rows, int):
        return rows
    if isinstance(rows, list):
        return [plain(row) for row in rows]
    return {column: value for column, value in dict(rows).items() if column not in INSTANTS}


async def lease(messages, queue: str, partition: str, group: str = QUEUE_MODE, batch: int = 10):
    """One pop of a partition; answers its lease id and its (partition id, transactionId) pairs."""
    lease_id = str(uuid.uuid4())
    rows = await messages.pop(queue, partition, None, None, group, batch, 1, False, LEASE_SECONDS, lease_id, "all",
                              None, None, None, True, [], None, True, None, False)
    return lease_id, [(row[1], orjson.loads(b"{" + fragment + b"}")["transactionId"])
                      for row in rows if row[1] is not None for fragment in row[5]]


async def settle(messages, lease_id: str, delivered, status: str, group: str = QUEUE_MODE) -> None:
    count = len(delivered)
    rows = await messages.ack([group] * count, [partition_id for partition_id, _ in delivered],
                              [txid for _, txid in delivered], [lease_id] * count, [status] * count, [None] * count)
    assert [row for row in rows if row[1] is False] == []  # none refused


class Traffic:
    """The same calls on one database and on the deployment."""

    def __init__(self, single: Store, deployment_store):
        self.stores = (single, deployment_store)

    async def configure(self, queue: str, namespace: str | None, task: str | None) -> None:
        for store in self.stores:
            await store.atomically(lambda unit: unit.queues.upsert(queue, namespace, task, NEW_QUEUE_OPTIONS))

    async def push(self, items: list[tuple[str, str, str]]) -> None:
        for store in self.stores:
            rows = await store.messages.push(*columns(items))
            assert [row for row in rows if row[0] is not None] == []  # no duplicates

    async def pop(self, queue: str, partition: str, group: str = QUEUE_MODE, status: str | None = None,
                  batch: int = 10) -> int:
        """Pops the partition on both, and settles what it got with ``status`` (``None``: keeps the
        lease); answers how many messages it got."""
        answers = []
        for store in self.stores:
            lease_id, delivered = await lease(store.messages, queue, partition, group, batch)
            if status is not None and delivered:
                await settle(store.messages, lease_id, delivered, status, group)
            answers.append([txid for _, txid in delivered])
        assert answers[0] == answers[1]
        return len(answers[0])


async def fill(traffic: Traffic, member_ids: list[uuid.UUID]) -> list[str]:
    """Queues in two namespaces and tasks, 36 + 12 + 4 partitions, messages pushed, some
    consumed, some dead-lettered, some leased, by queue mode and three groups: g1 and g2 read
    orders on every member, g3 audit, whose partitions all live on the last member. Answers the
    audit partitions' names."""
    await traffic.configure(ORDERS, "shop", "billing")
    await traffic.configure(RETURNS, "shop", "refunds")
    await traffic.configure(AUDIT, None, "billing")
    audit = [name for name in (f"a{n}" for n in range(100)) if place(AUDIT, name, member_ids) == 2][:4]
    # four partitions of orders on each member: a group registers on the members it pops on
    leased_by_g2 = [name for ordinal in range(3)
                    for name in [f"p{n:02}" for n in range(36) if place(ORDERS, f"p{n:02}", member_ids) == ordinal][:4]]
    assert len(leased_by_g2) == 12
    items = [(ORDERS, f"p{n:02}", f"o{n}-{m}") for n in range(36) for m in range(n % 4 + 1)]
    items += [(RETURNS, f"r{n:02}", f"r{n}-{m}") for n in range(12) for m in range(2)]
    items += [(AUDIT, name, f"{name}-{m}") for name in audit for m in range(3)]
    await traffic.push(items)
    for n in range(36):
        partition = f"p{n:02}"
        status = {0: "completed", 1: None}.get(n % 3, "dlq" if n % 6 == 2 else "completed")
        assert await traffic.pop(ORDERS, partition, status=status) == n % 4 + 1
        assert await traffic.pop(ORDERS, partition, "g1", "completed", batch=1) == 1
        if partition in leased_by_g2:
            assert await traffic.pop(ORDERS, partition, "g2") == n % 4 + 1
    for n in range(0, 12, 3):
        assert await traffic.pop(RETURNS, f"r{n:02}", status="completed", batch=1) == 1
    assert await traffic.pop(AUDIT, audit[0], "g3", "completed") == 3
    assert await traffic.pop(AUDIT, audit[1], "g3") == 3
    return audit


async def test_resources_answer_over_three_members_as_one_database_does(database_url):
    async with (member_databases(database_url, 1) as urls, opened(urls) as (database,),
                sharded(database_url) as (deployment, store)):
        single = Store(database)
        audit = await fill(Traffic(single, store), [member.id for member in deployment.members])
        one = single.resources
        three = ShardedResources(store.homes, Pooled(store.homes.stores))

        held = [await member.resources.partition_count(None, None) for member in store.homes.stores]
        assert all(held) and sum(held) == 36 + 12 + 4, held  # spread over every member
        audit_held = [await member.resources.partition_count(AUDIT, None) for member in store.homes.stores]
        assert audit_held == [0, 0, 4]

        overview = await three.overview()
        assert plain(overview) == plain(await one.overview())
        assert (overview["consumer_groups"], overview["subscriptions"]) == (3, 3)  # g1, g2 on orders; g3 on audit
        assert overview["in_flight"] > 0 and overview["dlq"] > 0
        assert overview["last_write_at"] is not None

        for limit, offset in [(10, 0), (1, 0), (1, 1), (2, 1), (5, 3)]:
            assert plain(await three.queue_page(None, None, None, limit, offset)) == plain(
                await one.queue_page(None, None, None, limit, offset))
        for namespace, task, search in [("shop", None, None), (None, "billing", None), (None, None, "shop.r"),
                                        ("nowhere", None, None)]:
            assert plain(await three.queue_page(namespace, task, search, 10, 0)) == plain(
                await one.queue_page(namespace, task, search, 10, 0))
            assert await three.queue_count(namespace, task, search) == await one.queue_count(namespace, task, search)
        orders = await three.queue(ORDERS)
        assert plain(orders) == plain(await one.queue(ORDERS))
        assert orders["consumer_groups"] == 2 and orders["partitions"] == 36
        assert await three.queue("nowhere") is None and await one.queue("nowhere") is None
        assert await three.queue_exists(ORDERS) and not await three.queue_exists("nowhere")

        for queue, search in [(None, None), (ORDERS, None), (ORDERS, "p1"), (RETURNS, "r0"), ("nowhere", None)]:
            assert await three.partition_count(queue, search) == await one.partition_count(queue, search)
            for limit, offset in [(7, 0), (7, 7), (5, 33), (100, 0), (3, 60)]:
                assert plain(await three.partition_page(queue, search, limit, offset)) == plain(
                    await one.partition_page(queue, search, limit, offset)), (queue, search, limit, offset)
        pages = [row["name"] for offset in range(0, 36, 5)
                 for row in await three.partition_page(ORDERS, None, 5, offset)]
        assert pages == [f"p{n:02}" for n in range(36)]

        for by_task in (False, True):
            assert plain(await three.groupings(by_task)) == plain(await one.groupings(by_task))

        for queue in (ORDERS, RETURNS, AUDIT):
            queue_id, single_id = await three.queue_id(queue), await one.queue_id(queue)
            assert queue_id is not None and single_id is not None
            for group in (None, QUEUE_MODE, "g1", "g2", "g3"):
                totals = await three.depth_totals(queue_id, group)
                assert plain(totals) == plain(await one.depth_totals(single_id, group)), (queue, group)
                for limit, offset in [(5, 0), (5, 5), (4, 30), (50, 0)]:
                    assert plain(await three.depth_page(queue_id, group, limit, offset)) == plain(
                        await one.depth_page(single_id, group, limit, offset)), (queue, group, limit, offset)
        assert (await three.depth_totals(await three.queue_id(ORDERS), "g2"))["pending"] > 0
        assert [row["partition_name"] for row in await three.depth_page(await three.queue_id(AUDIT), "g3", 5, 0)] \
            == [*sorted(audit[1:]), audit[0]]  # three behind by 3 (one leased), by name; the consumed one
        assert await three.queue_id("nowhere") is None


async def test_statistics_answer_over_three_members_as_one_database_does(database_url):
    async with (member_databases(database_url, 1) as urls, opened(urls) as (database,),
                sharded(database_url) as (deployment, store)):
        single = Store(database)
        traffic = Traffic(single, store)
        await fill(traffic, [member.id for member in deployment.members])
        # a refresh counts the dead letters older than two seconds: age them rather than wait
        for database_of in [database, *(member.database for member in deployment.members)]:
            await database_of.execute("UPDATE rq_dlq SET failed_at = failed_at - interval '1 minute'")
        one = single.statistics
        three = ShardedStatistics(store.homes, Pooled(store.homes.stores))
        assert await three.refreshed_at() is None and await three.last_full_pass() is None

        assert await three.refresh(10, 3600, True) == await one.refresh(10, 3600, True) == 3
        await compare_statistics(one, three)
        orders = (await three.queues(ORDERS))[0]
        assert orders["lag"] > 0 and orders["depth"] > 0 and orders["dead_lettered"] > 0
        assert orders["partitions"] == 36 and orders["pushed"] == sum(n % 4 + 1 for n in range(36))
        assert {group["consumer_group"] for group in await three.groups(None)} == {"g1", "g2", "g3"}

        # an incremental refresh carries each member's gauges forward by what it booked
        await traffic.push([(ORDERS, f"p{n:02}", f"late-{n}") for n in range(0, 36, 2)])
        await traffic.pop(ORDERS, "p04", "g1", "completed")
        assert await three.refresh(10, 3600, False) == await one.refresh(10, 3600, False)
        await compare_statistics(one, three)
        assert (await three.queues(ORDERS))[0]["pushed"] == sum(n % 4 + 1 for n in range(36)) + 18

        full = await three.last_full_pass()
        assert full is not None and full["since"] >= 0 and full["full_seconds"] >= 0
        refreshed = await three.refreshed_at()
        assert refreshed is not None
        assert refreshed == min([await member.statistics.refreshed_at() for member in store.homes.stores])


async def compare_statistics(one, three) -> None:
    assert plain(await three.queues(None)) == plain(await one.queues(None))
    for queue in (ORDERS, AUDIT, "nowhere"):
        assert plain(await three.queues(queue)) == plain(await one.queues(queue))
        assert plain(await three.groups(queue)) == plain(await one.groups(queue))
    assert plain(await three.groups(None)) == plain(await one.groups(None))
    assert plain(await three.retention_totals()) == plain(await one.retention_totals())
    now = datetime.now(UTC)
    # one step holding every bucket of the run, which both refreshes wrote
    series = plain(await three.series(None, now - timedelta(hours=1), now + timedelta(hours=1), 10 ** 9))
    assert [{column: value for column, value in row.items() if column != "bucket"} for row in series] == [
        {column: value for column, value in row.items() if column != "bucket"}
        for row in plain(await one.series(None, now - timedelta(hours=1), now + timedelta(hours=1), 10 ** 9))]
    assert {row["queue_name"] for row in series} == {ORDERS, RETURNS, AUDIT}
