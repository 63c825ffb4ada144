"""The disk spool on its own: framing, torn records, progress, and orphaned files."""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import msgspec

from reginamq.engine import push
from reginamq.engine.errors import Unavailable
from reginamq.engine.spool import Spool, SpoolFile
from tests.conftest import eventually


def prepared(queue: str, *values: int) -> push.PreparedPush:
    return push.prepare([push.PushItem(queue=queue, payload=msgspec.Raw(str(v).encode()),
                                       transactionId=f"{queue}-{v}") for v in values])


def test_records_survive_reopening_and_a_torn_tail_is_ignored(tmp_path):
    spool_file = SpoolFile(tmp_path / "spool-1.log")
    spool_file.append(prepared("q", 1, 2))
    spool_file.append(prepared("q", 3))
    spool_file.close()
    with open(tmp_path / "spool-1.log", "ab") as handle:
        handle.write(b"\x00\x00\x01\x00garbage")  # a record cut short by a crash
    reopened = SpoolFile(tmp_path / "spool-1.log")
    records = [record.txids for _end, record in reopened.records()]
    assert records == [["q-1", "q-2"], ["q-3"]]
    first_end = next(iter(reopened.records()))[0]
    reopened.mark_drained(first_end)
    assert [record.txids for _end, record in reopened.records()] == [["q-3"]]


async def test_an_orphaned_spool_is_drained_in_order_into_the_database(tmp_path, database_url):
    queue = f"spool-{uuid.uuid4().hex[:8]}"
    orphan = SpoolFile(tmp_path / "spool-999999.log")  # a process that died with records pending
    orphan.append(prepared(queue, 1, 2))
    orphan.append(prepared(queue, 3))
    orphan.close()

    conn = await asyncpg.connect(database_url)
    outage = {"on": True}

    async def run(call):
        if outage["on"]:
            raise Unavailable("database unavailable")
        return await call(conn)

    spool = Spool(tmp_path, run)
    spool.start()
    try:
        assert spool.pending()
        answer = spool.append(prepared(queue, 4))  # this process, during the outage
        assert [a["status"] for a in answer] == ["buffered"]
        outage["on"] = False
        assert await eventually(lambda: _drained(spool), seconds=10)
        stored = await conn.fetch(
            "SELECT unnest(s.txids) AS txid FROM rq_segments s JOIN rq_partitions p ON p.id = s.partition_id "
            "JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1 ORDER BY s.base_offset", queue)
        assert [r["txid"] for r in stored] == [f"{queue}-{v}" for v in (1, 2, 3, 4)]
    finally:
        await spool.stop()
        await conn.close()


async def _drained(spool: Spool) -> bool:
    await asyncio.sleep(0)
    return not spool.pending()
