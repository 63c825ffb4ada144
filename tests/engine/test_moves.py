"""Moving idle partitions to the member placement names for them (store/rebalance.py,
docs/shards.md "Rebalancing"): after a member is added, a rebalance moves exactly the idle
partitions whose placement changed, each with its messages, cursors, dedup keys and dead
letters, under an id that tells its new home, and lists it there in the directory; a busy
partition stays; nothing is left on the old home or prepared anywhere; a broker whose cache
still names the old home is refused there, and finds the partition on its new home once it
forgot the moved names."""

from __future__ import annotations

import contextlib
import uuid
from collections import Counter

import pytest

from reginamq.store import Store
from reginamq.store.members import admit, home_of, join_up, place
from reginamq.store.messages import PartitionMoved
from reginamq.store.rebalance import rebalance
from reginamq.store.sharded import ShardedStore
from tests.engine.helpers import ack, member_databases, opened, pop, push

NAMES = [f"p{n}" for n in range(40)]


@contextlib.asynccontextmanager
async def grown(database_url: str):
    """A deployment of two members with its store, and a third database given to the store
    that waits to be added."""
    async with member_databases(database_url, 3) as urls, opened(urls) as databases:
        await join_up(databases[:2])
        store = ShardedStore(databases)
        yield databases, store, await store.join()


async def drain(store: ShardedStore, queue: str, expected: int) -> list[str]:
    seen: list[str] = []
    for _ in range(50):
        lease_id, delivered, _ = await pop(store.messages, queue, batch=100, partitions=20)
        if delivered:
            await ack(store.messages, lease_id, delivered)
            seen += [txid for _, _, txid in delivered]
        if len(seen) >= expected:
            break
    return seen


async def rows_of(database, table: str, column: str, ids: list[uuid.UUID]) -> int:
    return await database.fetchval(f"SELECT count(*) FROM {table} WHERE {column} = ANY ($1::uuid[])", ids)


async def test_a_rebalance_moves_the_idle_partitions_placement_changed_with_everything_they_own(database_url):
    queue = f"moving-{uuid.uuid4().hex[:6]}"
    async with grown(database_url) as (databases, store, deployment):
        await push(store.messages, [(queue, name, f"{name}-{n}") for name in NAMES for n in range(2)])
        assert sorted(await drain(store, queue, 80)) == sorted(f"{name}-{n}" for name in NAMES for n in range(2))
        member = await admit(databases[:2], databases[2])
        assert len(await store.grow()) == 1
        ids = [m.id for m in deployment.members] + [member.id]
        moving = [name for name in NAMES if place(queue, name, ids) == 2]
        busy, idle = moving[0], moving[1:]
        assert idle, "placement put no name on the added member"
        await push(store.messages, [(queue, busy, "unconsumed")])
        before = {row["name"]: (ordinal, row["id"]) for ordinal in (0, 1) for row in await databases[ordinal].fetch(
            "SELECT p.name, p.id FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1", queue)}
        old_ids = [before[name][1] for name in idle]
        dead = idle[0]
        await databases[before[dead][0]].execute(
            "INSERT INTO rq_dlq (queue_id, partition_id, consumer_group, message_offset, transaction_id, payload, "
            "message_created_at, retry_count) SELECT queue_id, id, '__QUEUE_MODE__', 0, 'dead', '\\x01', now(), 3 "
            "FROM rq_partitions WHERE id = $1", before[dead][1])

        for database in databases:
            await Store(database).statistics.refresh(60, 3600, full=True)
        planned = await rebalance(databases, queue, idle_seconds=0, dry_run=True)
        expected = Counter((before[name][0], 2) for name in idle)
        assert planned.planned == expected and not planned.moved
        assert (await rebalance(databases, queue, idle_seconds=0, limit=3, dry_run=True)).planned.total() == 3
        done = await rebalance(databases, queue, idle_seconds=0, batch=7)
        assert sum(done.moved.values()) == len(idle) and done.skipped == 0

        for database in databases:  # an incremental refresh counts the moves, as a full pass would
            await Store(database).statistics.refresh(60, 3600, full=False)
        counted = [{row["queue_name"]: row["partitions"] for row in await Store(database).statistics.queues(queue)}
                   for database in databases]
        placed = [{row["name"]: row["id"] for row in await database.fetch(
            "SELECT p.name, p.id FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1", queue)}
            for database in databases]
        assert set(placed[2]) == set(idle)
        assert [members.get(queue, 0) for members in counted] == [len(names) for names in placed]
        assert set(placed[0]) | set(placed[1]) == set(NAMES) - set(idle) and not set(placed[0]) & set(placed[1])
        numbers_from = deployment.numbers_from
        assert all(home_of(partition_id, numbers_from) == 2 for partition_id in placed[2].values())
        listed = {row["partition"]: row["id"] for row in await databases[0].fetch(
            "SELECT partition, id FROM rq_directory WHERE queue = $1", queue)}
        assert {name: listed[name] for name in idle} == placed[2]
        # the messages, cursors and dedup keys moved with them; nothing stays on the old homes
        new_ids = list(placed[2].values())
        assert await rows_of(databases[2], "rq_segments", "partition_id", new_ids) == len(idle)
        assert await databases[2].fetchval("SELECT count(*) FROM rq_consumers WHERE partition_id = ANY ($1::uuid[]) "
                                           "AND committed = 1 AND lease_id IS NULL", new_ids) == len(idle)
        assert await databases[2].fetchval("SELECT count(*) FROM rq_dlq WHERE transaction_id = 'dead' "
                                           "AND partition_id = $1", placed[2][dead]) == 1
        for database in databases[:2]:
            for table in ("rq_segments", "rq_consumers", "rq_dedup", "rq_dedup_runs", "rq_dlq"):
                assert await rows_of(database, table, "partition_id", old_ids) == 0, table
        for member_ in deployment.members:
            assert await member_.database.fetchval("SELECT count(*) FROM pg_prepared_xacts") == 0

        # this store's cache still names the old homes: they refuse rather than create the names
        # again, and the push looks the names up again and lands on the new home
        old_home = before[idle[0]][0]
        assert await push(store.messages, [(queue, idle[0], f"{idle[0]}-after")]) == {}
        assert await databases[2].fetchval("SELECT count(*) FROM rq_segments WHERE partition_id = $1",
                                           placed[2][idle[0]]) == 2
        assert await databases[old_home].fetchval("SELECT count(*) FROM rq_partitions WHERE name = $1", idle[0]) == 0
        # inside a transaction the refusal fails the unit, and the client's retry finds the new home
        with pytest.raises(PartitionMoved):
            await store.atomically(lambda unit: push(unit.messages, [(queue, idle[1], "in-a-transaction")]))
        assert await store.homes.forget_moved() == len(idle)
        # a message pushed before the move is still known there: a retry of it is a duplicate
        duplicates = await push(store.messages, [(queue, name, f"{name}-0") for name in idle])
        assert sorted(duplicates) == list(range(len(idle)))
        await push(store.messages, [(queue, name, f"{name}-after") for name in idle[1:]])
        assert {row["name"] for row in await databases[0].fetch("SELECT name FROM rq_partitions")} & set(idle) == set()
        lease_id, delivered, _ = await pop(store.messages, queue, idle[0])
        assert [txid for _, _, txid in delivered] == [f"{idle[0]}-after"]
        await ack(store.messages, lease_id, delivered)
        rest = await drain(store, queue, len(idle))
        assert sorted(rest) == sorted([f"{name}-after" for name in idle[1:]] + ["unconsumed"])


async def test_a_balanced_deployment_moves_nothing(database_url):
    queue = f"still-{uuid.uuid4().hex[:6]}"
    async with member_databases(database_url, 3) as urls, opened(urls) as databases:
        store = ShardedStore(databases)
        await store.join()
        await push(store.messages, [(queue, name, name) for name in NAMES])
        await drain(store, queue, len(NAMES))
        done = await rebalance(databases, idle_seconds=0)
        assert not done.planned and not done.moved
