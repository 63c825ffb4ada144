"""The disk spool on its own: one file per node, replayed in append order by one process."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import msgspec

from reginamq.engine import push
from reginamq.engine.encryption import Sealer
from reginamq.engine.spool import Spool
from reginamq.store import Store
from reginamq.store.database import Database
from tests.conftest import eventually


def prepared(queue: str, *values: int) -> push.PreparedPush:
    return push.prepare([push.PushItem(queue=queue, partition="p", payload=msgspec.Raw(str(v).encode()),
                                       transactionId=f"{queue}-{v}") for v in values])


async def stored_txids(conn, queue: str) -> list[str]:
    rows = await conn.fetch(
        "SELECT unnest(s.txids) AS txid FROM rq_segments s JOIN rq_partitions p ON p.id = s.partition_id "
        "JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1 ORDER BY s.base_offset", queue)
    return [r["txid"] for r in rows]


async def test_two_processes_spools_replay_in_the_order_the_node_accepted(tmp_path, database_url):
    """Two workers of one node append in turn during an outage; the replay keeps that order,
    and a record torn by a crash at the end is dropped, not replayed and not blocking."""
    queue = f"spool-{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(database_url)
    database = Database(database_url, 2)  # not opened yet: every call is Unavailable, an outage
    store = Store(database)
    first, second = Spool(tmp_path, store, Sealer()), Spool(tmp_path, store, Sealer())
    first.start()
    second.start()
    try:
        for n, spool in enumerate([first, second, first, second]):
            answer = spool.append(prepared(queue, 2 * n, 2 * n + 1))
            assert [a["status"] for a in answer] == ["buffered", "buffered"]
        assert first.pending() and second.pending()  # both see the node's spool
        with open(tmp_path / "spool.log", "ab") as handle:
            handle.write(b"\x00\x00\x01\x00torn")  # a writer killed mid-record
        await database.open()  # the database is back
        assert await eventually(lambda: _empty(first, second), seconds=15)
        assert await stored_txids(conn, queue) == [f"{queue}-{v}" for v in range(8)]
    finally:
        await first.stop()
        await second.stop()
        await database.close()
        await conn.close()


async def test_a_spool_left_by_a_dead_process_is_replayed_by_the_next_one(tmp_path, database_url):
    queue = f"spool-{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(database_url)
    down = Store(Database(database_url, 1))  # never opened: the database is away for this process
    dead = Spool(tmp_path, down, Sealer())
    dead.start()
    dead.append(prepared(queue, 1, 2))
    await dead.stop(drain_seconds=0.2)  # the process goes away with the record still on disk
    database = Database(database_url, 2)
    await database.open()
    survivor = Spool(tmp_path, Store(database), Sealer())
    survivor.start()
    try:
        assert await eventually(lambda: _empty(survivor), seconds=15)
        assert await stored_txids(conn, queue) == [f"{queue}-1", f"{queue}-2"]
    finally:
        await survivor.stop()
        await database.close()
        await conn.close()


async def _empty(*spools: Spool) -> bool:
    await asyncio.sleep(0.05)
    return not any(spool.pending() for spool in spools)
