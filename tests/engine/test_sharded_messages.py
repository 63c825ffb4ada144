"""Push, pop, ack and leases over three member databases (store/sharded_messages.py,
store/homes.py): each partition lives on exactly one member, the one its id and its name tell;
every queue is on every member; pops of one partition and wildcard pops deliver every message
once and in order per partition; acks and lease renewals reach the member of their partition
or lease; a member that is down fails only the pushes and pops that reach it."""

from __future__ import annotations

import uuid
from collections import Counter, defaultdict
from dataclasses import replace

import orjson
import pytest

from reginamq.common.errors import QueueFull, Unavailable
from reginamq.engine.names import QUEUE_MODE
from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.members import Deployment, place
from reginamq.store.sharded import ShardedStore
from tests.engine.helpers import ack, columns, pop, push, sharded


async def partitions_on(database: Database, queue: str) -> dict[str, str]:
    rows = await database.fetch("SELECT p.name, p.id::text FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id "
                                "WHERE q.name = $1", queue)
    return {row[0]: row[1] for row in rows}


async def test_each_partition_lives_on_the_one_member_its_id_and_name_tell(database_url):
    async with sharded(database_url) as (deployment, store):
        messages = store.messages
        items = [("orders", f"customer-{n % 60}", f"t{n}") for n in range(300)]
        assert await push(messages, items) == {}
        ids = [member.id for member in deployment.members]
        held = [await partitions_on(member.database, "orders") for member in deployment.members]
        names = [name for partitions in held for name in partitions]
        assert sorted(names) == sorted(f"customer-{n}" for n in range(60))  # each on exactly one member
        assert all(held), "every member holds some of the 60 partitions"
        homes = store.homes
        for ordinal, partitions in enumerate(held):
            for name, partition_id in partitions.items():
                assert place("orders", name, ids) == ordinal
                assert homes.of_id(partition_id) == ordinal
        queue_ids = [await Store(member.database).provisioning.existing_queues(["orders"])
                     for member in deployment.members]  # on every member, partitions or not, with one id
        assert queue_ids[0].keys() == {"orders"} and queue_ids[1] == queue_ids[0] and queue_ids[2] == queue_ids[0]
        listed = await Store(deployment.members[0].database).directory.lookup([("orders", f"customer-{n}")
                                                                               for n in range(60)])
        assert {name: str(partition_id) for (_, name), partition_id in listed.items()} == {
            name: partition_id for partitions in held for name, partition_id in partitions.items()}


async def test_duplicates_answer_the_items_of_the_request_across_members(database_url):
    async with sharded(database_url) as (_deployment, store):
        messages = store.messages
        first = [("q", f"p{n}", f"t{n}") for n in range(12)]
        await push(messages, first)
        _, delivered, _ = await pop(messages, "q", "p7")
        assert [txid for _, _, txid in delivered] == ["t7"]
        again = [("q", "p7", "t7"), ("q", "p1", "new-1"), ("q", "p3", "t3"), ("q", "p11", "t11")]
        duplicates = await push(messages, again)
        assert sorted(duplicates) == [0, 2, 3]


async def test_pops_deliver_every_message_once_in_order_and_acks_reach_each_member(database_url):
    async with sharded(database_url) as (_deployment, store):
        messages = store.messages
        items = [("jobs", f"p{n % 24}", f"t{n:03}") for n in range(240)]
        await push(messages, items)
        lease_id, delivered, _ = await pop(messages, "jobs", "p5", batch=100)
        assert [txid for _, _, txid in delivered] == [txid for _, name, txid in items if name == "p5"]
        answered = await ack(messages, lease_id, delivered)
        assert sum(row[7] for row in answered if row[7] is not None) == len(delivered)
        seen = defaultdict(list, {"p5": [txid for _, _, txid in delivered]})
        homes_delivered: set[str] = set()
        while True:
            lease_id, delivered, _ = await pop(messages, "jobs", batch=7)
            if not delivered:
                break
            assert len({partition_id for partition_id, _, _ in delivered}) == 1
            homes_delivered.add(delivered[0][0])
            for _, name, txid in delivered:
                seen[name].append(txid)
            answered = await ack(messages, lease_id, delivered)
            assert sum(row[7] for row in answered if row[7] is not None) == len(delivered)
        for name in {name for _, name, _ in items}:
            assert seen[name] == [txid for _, item_name, txid in items if item_name == name]
        homes = store.homes
        assert {homes.of_id(partition_id) for partition_id in homes_delivered} == {0, 1, 2}


async def test_hints_lead_the_pop_to_the_member_that_holds_them(database_url):
    async with sharded(database_url) as (deployment, store):
        messages = store.messages
        await push(messages, [("h", f"p{n}", f"t{n}") for n in range(30)])
        homes = store.homes
        on_third = sorted((await partitions_on(deployment.members[2].database, "h")).values())[:2]
        on_catalog = sorted((await partitions_on(deployment.members[0].database, "h")).values())[:1]
        rows = await messages.pop("h", None, None, None, QUEUE_MODE, 1, 1, False, 30, str(uuid.uuid4()), "all",
                                  None, None, None, False, on_third + on_catalog, None, False, None, False)
        assert homes.of_id(rows[0][1]) == 2
        trailer = rows[-1]
        assert trailer[1] is None  # the hints not taken come back: the third member's other, the catalog's
        assert sorted(trailer[9]) == sorted([on_third[1] if rows[0][1] == on_third[0] else on_third[0], *on_catalog])


async def test_lease_renewal_and_live_leases_find_the_member_of_the_lease(database_url):
    async with sharded(database_url) as (_deployment, store):
        messages = store.messages
        await push(messages, [("l", f"p{n}", f"t{n}") for n in range(9)])
        leases = []
        for n in range(9):
            lease_id, delivered, _ = await pop(messages, "l", f"p{n}")
            assert delivered
            leases.append(lease_id)
        assert await messages.live_leases(leases) == set(leases)
        renewed, expires_at = await messages.extend_lease(leases[4], 300)
        assert renewed == 1 and expires_at is not None
        renewed, _ = await messages.extend_lease(str(uuid.uuid4()), 300)
        assert renewed == 0


async def test_a_member_down_fails_only_the_pushes_that_reach_it(database_url):
    async with sharded(database_url) as (deployment, store):
        messages = store.messages
        ids = [member.id for member in deployment.members]
        names = [f"p{n}" for n in range(40)]
        on = {ordinal: [name for name in names if place("d", name, ids) == ordinal] for ordinal in range(3)}
        await push(messages, [("d", name, f"first-{name}") for name in names])
        away = Database("postgresql://127.0.0.1:1/nowhere", 1)
        down = Deployment([replace(member, database=away) if member.ordinal == 2 else member
                           for member in deployment.members], deployment.numbers_from)
        crippled_store = ShardedStore([member.database for member in down.members])
        await crippled_store.join(down)
        crippled = crippled_store.messages
        await crippled.push(*columns([("d", name, f"second-{name}") for name in on[0] + on[1]]))
        with pytest.raises(Unavailable):
            await crippled.push(*columns([("d", name, f"third-{name}") for name in names]))
        _, delivered, _ = await pop(crippled, "d", on[1][0], batch=10)
        assert [txid for _, _, txid in delivered] == [f"{step}-{on[1][0]}" for step in ("first", "second", "third")]
        _, delivered, _ = await pop(messages, "d", on[2][0], batch=10)
        assert [txid for _, _, txid in delivered] == [f"first-{on[2][0]}"]
        again = await push(messages, [("d", name, f"third-{name}") for name in names])
        assert sorted(again) == [index for index, name in enumerate(names) if name not in on[2]]
        with pytest.raises(Unavailable):
            await pop(crippled, "d", on[2][0])
        _, delivered, _ = await pop(crippled, "d", batch=100, partitions=100)
        assert {crippled_store.homes.of_id(partition_id) for partition_id, _, _ in delivered} == {0, 1}, \
            "a wildcard pop answers from the members it reaches"


async def test_a_pop_with_room_left_takes_from_the_next_member_under_one_lease(database_url):
    async with sharded(database_url) as (deployment, store):
        messages = store.messages
        ids = [member.id for member in deployment.members]
        on_member = {place("r", f"p{n}", ids): f"p{n}" for n in range(40)}
        await push(messages, [("r", on_member[ordinal], f"t{ordinal}-{k}") for ordinal in range(3) for k in range(4)])
        lease_id, delivered, _ = await pop(messages, "r", batch=10, partitions=3)
        assert len(delivered) == 10 and len({partition_id for partition_id, _, _ in delivered}) == 3
        assert {store.homes.of_id(partition_id) for partition_id, _, _ in delivered} == {0, 1, 2}
        renewed, _ = await messages.extend_lease(lease_id, 120)
        assert renewed == 3, "the lease holds a partition on each member"
        assert await messages.live_leases([lease_id]) == {lease_id}
        answered = await ack(messages, lease_id, delivered)
        assert sum(row[7] for row in answered if row[7] is not None) == 10
        assert await messages.live_leases([lease_id]) == set()


async def test_a_new_partition_is_created_by_the_push_that_names_it_or_not_at_all(database_url):
    """A new name is listed in the directory first; its home creates the partition with the
    listed id inside the push itself. A push refused there (queue full, a transaction rolled
    back) leaves the name listed and no partition behind; the next push creates it on the
    listed home."""
    async with sharded(database_url) as (deployment, store):
        messages, catalog = store.messages, Store(deployment.members[0].database)
        *arguments, options, enforce = columns([("small", "p1", "a"), ("small", "p1", "b")])
        with pytest.raises(QueueFull):  # two messages for a queue of at most one
            await messages.push(*arguments, orjson.dumps(orjson.loads(options) | {"maxSize": 1}).decode(), enforce)
        listed = await catalog.directory.lookup([("small", "p1")])
        home = store.homes.of_id(listed["small", "p1"])
        held = [await partitions_on(member.database, "small") for member in deployment.members]
        assert held == [{}, {}, {}], "the refused push created no partition anywhere"

        assert await push(messages, [("small", "p1", "a")]) == {}
        held = [await partitions_on(member.database, "small") for member in deployment.members]
        assert [ordinal for ordinal, names in enumerate(held) if names] == [home]
        assert store.homes.of_id(held[home]["p1"]) == home

        async def in_a_transaction(unit):
            await push(unit.messages, [("roomy", "p2", "c")])
            raise RuntimeError("the transaction rolls back")

        with pytest.raises(RuntimeError):
            await store.atomically(in_a_transaction)
        assert ("roomy", "p2") in await catalog.directory.lookup([("roomy", "p2")])
        held = [await partitions_on(member.database, "roomy") for member in deployment.members]
        assert held == [{}, {}, {}], "the rolled-back push left no partition behind"
        _lease, delivered, _ = await pop(messages, "small", "p1")
        assert [txid for _, _, txid in delivered] == ["a"]


async def test_a_name_not_kept_costs_the_catalog_one_claim_and_no_look_up(database_url):
    """A push naming a partition its process does not keep claims the name at once: a new name
    is listed, a name listed already (by another broker) answers its listed id, and either way
    the catalog is called once, with no look-up before the claim."""
    async with sharded(database_url) as (deployment, store):
        assert await push(store.messages, [("named", "p1", "a")]) == {}
        other = ShardedStore([member.database for member in deployment.members])  # another broker: nothing kept
        await other.join(deployment)
        directory = other.homes.stores[0].directory
        calls: Counter = Counter()

        def counting(name, method):
            def counted(*args):
                calls[name] += 1
                return method(*args)
            return counted

        for name in ("claim", "lookup"):
            setattr(directory, name, counting(name, getattr(directory, name)))

        assert await push(other.messages, [("named", "p1", "b"), ("named", "p2", "c")]) == {}
        assert calls == Counter(claim=1), "one claim for the listed name and the new one, no look-up"
        held = [await partitions_on(member.database, "named") for member in deployment.members]
        assert sorted(name for names in held for name in names) == ["p1", "p2"], "each created once"
        _lease, delivered, _ = await pop(other.messages, "named", "p1")
        assert [txid for _, _, txid in delivered] == ["a", "b"]
