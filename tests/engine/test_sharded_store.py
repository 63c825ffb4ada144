"""The engine's transactions, configures and deletes over three member databases
(store/sharded.py): a transaction whose acks and pushes fall on several members commits on all
of them or on none, through two-phase commit with nothing left prepared or recorded, and its
notices are sent once it is committed; a configure writes the same options on every member, or
none when one is down; a delete removes the queue from every member and its names from the
directory."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import msgspec
import orjson
import pytest

from reginamq.common.errors import Unavailable
from reginamq.engine import queues, transaction
from reginamq.engine.encryption import Sealer
from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.members import Deployment, place
from reginamq.store.notices import CHANNEL
from reginamq.store.sharded import ShardedStore
from tests.engine.helpers import pop, push, sharded


def names_on_each_member(deployment: Deployment, queue: str, count: int) -> dict[int, list[str]]:
    ids = [member.id for member in deployment.members]
    placed: dict[int, list[str]] = {ordinal: [] for ordinal in range(len(ids))}
    for n in range(count):
        placed[place(queue, f"p{n}", ids)].append(f"p{n}")
    return placed


async def left_behind(deployment: Deployment) -> list:
    """Prepared transactions on any member and outcomes recorded on the catalog."""
    found = []
    for member in deployment.members:
        found += await member.database.fetch("SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")
    return found + await deployment.members[0].database.fetch("SELECT gid FROM rq_decisions")


async def stored_txids(database: Database, queue: str) -> list[str]:
    """The transactionIds of the messages stored for ``queue`` on one member."""
    rows = await database.fetch(
        "SELECT unnest(s.txids) FROM rq_segments s JOIN rq_partitions p ON p.id = s.partition_id "
        "JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1", queue)
    return sorted(row[0] for row in rows)


def bundle(acks: list[tuple[str, str, str]], pushes: list[tuple[str, str, str]]) -> transaction.TransactionBody:
    """Acks (partition id, transactionId, lease id) and pushes (queue, partition, transactionId)."""
    operations = [transaction.Operation(type="ack", partitionId=partition_id, transactionId=txid, leaseId=lease,
                                        status="completed") for partition_id, txid, lease in acks]
    operations += [transaction.Operation(type="push", items=[transaction.pushes.PushItem(
        queue=queue, partition=partition, transactionId=txid, payload=msgspec.Raw(b"1"))])
        for queue, partition, txid in pushes]
    return transaction.TransactionBody(operations=operations)


async def test_a_transaction_over_three_members_commits_on_every_one(database_url):
    async with sharded(database_url) as (deployment, store):
        placed = names_on_each_member(deployment, "t", 30)
        sources = [placed[0][0], placed[1][0]]
        await push(store.messages, [("t", name, f"in-{name}") for name in sources])
        acks = []
        for name in sources:
            lease_id, delivered, _ = await pop(store.messages, "t", name)
            [(partition_id, _, txid)] = delivered
            acks.append((partition_id, txid, lease_id))
        out = names_on_each_member(deployment, "out", 30)
        targets = [("out", out[2][0], "out-a"), ("out", out[0][0], "out-b")]
        heard: list[str] = []
        announced = asyncio.Event()

        def hear(notice: str) -> None:
            heard.append(notice)
            announced.set()

        listener = await Store(deployment.members[2].database).notices.listen({CHANNEL: hear}, lambda: None)
        try:
            answer = await transaction.execute(store, transaction.prepare(bundle(acks, targets)), Sealer())
            assert answer["success"], answer
            await asyncio.wait_for(announced.wait(), timeout=30)  # sent once committed: a prepare refuses them
            assert heard[0].startswith("out\n")
        finally:
            await listener.close()
        assert [result["status"] for result in answer["results"] if result["type"] == "push"] == ["queued", "queued"]
        assert await left_behind(deployment) == []
        stored = [await stored_txids(member.database, "out") for member in deployment.members]
        assert sorted(txid for txids in stored for txid in txids) == ["out-a", "out-b"]
        for name in sources:  # acknowledged: nothing to deliver again, even once the leases run out
            assert (await pop(store.messages, "t", name))[1] == []
        pushed = [result for result in answer["results"] if result["type"] == "push"]
        assert [store.homes.of_id(result["partitionId"]) for result in pushed] == [2, 0]


async def test_a_refused_transaction_changes_no_member(database_url):
    async with sharded(database_url) as (deployment, store):
        placed = names_on_each_member(deployment, "r", 30)
        await push(store.messages, [("r", placed[1][0], "in")])
        lease_id, [(partition_id, _, txid)], _ = await pop(store.messages, "r", placed[1][0])
        pushes = [("r-out", placed[0][0], "x"), ("r-out", placed[2][0], "y")]
        wrong_lease = bundle([(partition_id, txid, str(uuid.uuid4()))], pushes)
        answer = await transaction.execute(store, transaction.prepare(wrong_lease), Sealer())
        assert answer["success"] is False and answer["reason"] == "ack_rejected"
        duplicate = bundle([(partition_id, txid, lease_id)], [*pushes, ("r", placed[1][0], "in")])
        answer = await transaction.execute(store, transaction.prepare(duplicate), Sealer())
        assert answer["success"] is False and answer["reason"] == "duplicate"
        for member in deployment.members:
            assert await stored_txids(member.database, "r-out") == []
        assert await left_behind(deployment) == []
        assert await store.messages.live_leases([lease_id]) == {lease_id}, "the ack was undone with the rest"


async def test_a_configure_is_on_every_member_and_a_delete_on_none(database_url):
    async with sharded(database_url) as (deployment, store):
        answer = await queues.configure(store, queues.ConfigureBody(queue="cfg", options={"leaseTime": 7,
                                                                                          "retryLimit": 2}))
        assert answer["options"]["leaseTime"] == 7
        await push(store.messages, [("cfg", f"p{n}", f"t{n}") for n in range(20)])
        await queues.configure(store, queues.ConfigureBody(queue="next-cfg"))  # the numbering moves on
        for member in deployment.members:
            assert orjson.loads(await Store(member.database).queues.options("cfg")) == answer["options"]
            assert await Store(member.database).provisioning.existing_queues(["cfg", "next-cfg"]) == {
                "cfg": int(answer["queueId"]), "next-cfg": int(answer["queueId"]) + 1}
        assert await left_behind(deployment) == []
        assert (await queues.delete(store, "cfg"))["deleted"] is True
        for member in deployment.members:
            assert await Store(member.database).queues.options("cfg") is None
        catalog = Store(deployment.members[0].database)
        assert await catalog.directory.lookup([("cfg", f"p{n}") for n in range(20)]) == {}
        await push(store.messages, [("cfg", "p1", "t1")])  # a name deleted is placed and listed afresh
        assert len(await catalog.directory.lookup([("cfg", "p1")])) == 1


async def test_a_configure_with_a_member_down_changes_no_member(database_url):
    async with sharded(database_url) as (deployment, store):
        await queues.configure(store, queues.ConfigureBody(queue="c2", options={"leaseTime": 9}))
        away = Database("postgresql://127.0.0.1:1/nowhere", 1)
        down = Deployment([replace(member, database=away) if member.ordinal == 2 else member
                           for member in deployment.members], deployment.numbers_from)
        crippled = ShardedStore([member.database for member in down.members])
        await crippled.join(down)
        with pytest.raises(Unavailable):
            await queues.configure(crippled, queues.ConfigureBody(queue="c2", options={"leaseTime": 11}))
        for member in deployment.members:
            assert orjson.loads(await Store(member.database).queues.options("c2"))["leaseTime"] == 9
        assert await left_behind(deployment) == []
