"""What one partition costs in PostgreSQL: create N partitions through pushes (one message
each, none declared in advance), consume every one with the queue-mode reader (one cursor per
partition), and divide each table's size (heap + indexes + TOAST) by N. Also times what grows
with N: finding one partition with data (wildcard pop), the statistics refresh (a full pass,
and an incremental one after a few partitions moved), one full retention walk over every
partition with 1 and with 4 workers, and the reads by offset and discovery.

    python benchmarks/partition_cost.py --partitions 100000

Starts its own broker on an embedded PostgreSQL in a temporary folder (removed at the end).
The figure to hold against Queen 1.0's 641 bytes is partitions + cursors, after VACUUM (what a
long-running database settles to; before it, dead row versions of the consume pass count too).
"""

from __future__ import annotations

import argparse
import asyncio
import time

import asyncpg
import httpx

from reginamq.bench.broker import OwnBroker
from reginamq.engine import analytics
from reginamq.maintenance.retention import STEP_ROWS, WINDOW_PARTITIONS, id_ranges
from reginamq.store import Store
from reginamq.store.database import Database

TABLES = ("rq_partitions", "rq_consumers", "rq_segments", "rq_dedup")
SIZE_SQL = ("SELECT pg_relation_size($1::regclass) AS heap, pg_indexes_size($1::regclass) AS indexes, "
            "pg_total_relation_size($1::regclass) AS total")
INDEX_SQL = ("SELECT indexrelid::regclass::text AS name, pg_relation_size(indexrelid) AS bytes FROM pg_index "
             "WHERE indrelid::regclass::text = ANY ($1::text[]) ORDER BY 1")


async def create_and_consume(url: str, queue: str, partitions: int, push_batch: int, concurrency: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=120,
                                 limits=httpx.Limits(max_connections=concurrency)) as http:
        # completed retention on, with a window longer than the run: the retention walk looks at
        # every partition (each holds its consumed message) and deletes nothing
        await http.post("/api/v1/configure", json={"queue": queue, "options": {
            "dedupWindowSeconds": 0, "completedRetentionSeconds": 86_400}})
        starts = iter(range(0, partitions, push_batch))

        async def producer() -> None:
            for start in starts:
                items = [{"queue": queue, "partition": f"p-{n}", "payload": {"n": n}}
                         for n in range(start, min(start + push_batch, partitions))]
                answer = await http.post("/api/v1/push", json={"items": items})
                answer.raise_for_status()

        await asyncio.gather(*(producer() for _ in range(concurrency)))
        consumed = 0

        async def consumer() -> None:
            nonlocal consumed
            while consumed < partitions:
                answer = await http.get(f"/api/v1/pop/queue/{queue}",
                                        params={"batch": 1000, "partitions": 1000, "autoAck": "true"})
                if answer.status_code == 204:
                    await asyncio.sleep(0.05)
                    continue
                answer.raise_for_status()
                consumed += len(answer.json()["messages"])

        await asyncio.wait_for(asyncio.gather(*(consumer() for _ in range(concurrency))), timeout=3600)


async def wildcard_pop_ms(url: str, queue: str, rounds: int = 30) -> tuple[float, float]:
    """The cost of finding work among all these partitions: push one message to one partition
    (an old one, so the recent-writes index does not hand it over for free), then time the
    wildcard pop that must find it, as a client sees it. Median and worst, in ms."""
    timings = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for n in range(rounds):
            await http.post("/api/v1/push", json={"items": [{"queue": queue, "partition": f"p-{n * 7919}",
                                                             "payload": n}]})
            started = time.monotonic()
            answer = await http.get(f"/api/v1/pop/queue/{queue}", params={"batch": 10, "autoAck": "true"})
            timings.append((time.monotonic() - started) * 1000)
            assert answer.status_code == 200, answer.status_code
    timings.sort()
    return timings[len(timings) // 2], timings[-1]


async def discovery_seconds(url: str, queue: str, partitions: int, moved: int = 100) -> tuple[float, float, float]:
    """Reads that grow with the partitions, as queen-mq's reads module calls them: every
    partition of the queue a page of 1,000 at a time (POST /api/v1/partitions/changed, no
    since), the partitions changed since that pass's safe time after ``moved`` old ones were
    written, and one fetch of the first 1,000 partitions' records."""
    async with httpx.AsyncClient(base_url=url, timeout=600) as http:
        started, listed, after, safe = time.monotonic(), 0, None, None
        while True:
            entry = {"queue": queue, "limit": 1000, **({"after": after} if after else {})}
            answer = (await http.post("/api/v1/partitions/changed", json={"entries": [entry]})).json()
            safe = safe or answer["safeTime"]
            listed += len(answer["entries"][0]["partitions"])
            after = answer["entries"][0]["next"]
            if after is None:
                break
        everything = time.monotonic() - started
        assert listed >= partitions, listed  # the wildcard-pop timing above wrote a few new ones
        await http.post("/api/v1/push", json={"items": [
            {"queue": queue, "partition": f"p-{n * (partitions // moved)}", "payload": n} for n in range(moved)]})
        started = time.monotonic()
        answer = (await http.post("/api/v1/partitions/changed", json={"entries": [
            {"queue": queue, "since": safe}]})).json()
        since = time.monotonic() - started
        assert len(answer["entries"][0]["partitions"]) == moved
        started = time.monotonic()
        answer = (await http.post("/api/v1/fetch", json={"entries": [
            {"queue": queue, "partition": f"p-{n}"} for n in range(min(partitions, 1000))]})).json()
        fetched = time.monotonic() - started
        assert all(entry["highWatermark"] >= 1 for entry in answer["entries"])
        return everything, since, fetched


async def sizes(database_url: str) -> tuple[dict[str, asyncpg.Record], list[asyncpg.Record]]:
    conn = await asyncpg.connect(database_url)
    try:
        return ({table: await conn.fetchrow(SIZE_SQL, table) for table in TABLES},
                await conn.fetch(INDEX_SQL, list(TABLES[:2])))
    finally:
        await conn.close()


async def refresh_seconds(database_url: str, url: str, queue: str, partitions: int, moved: int = 100) -> list[float]:
    """How long the statistics refresh takes over this many partitions: a full pass after the
    load (it books the changes), a full pass with nothing changed, then an incremental refresh
    (what the stats loop runs between full passes) after ``moved`` old partitions were written
    and consumed."""
    database = Database(database_url, 1)
    await database.open()
    try:
        timings = []
        for full in (True, True, False):
            if not full:
                async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                    await http.post("/api/v1/push", json={"items": [
                        {"queue": queue, "partition": f"p-{n * (partitions // moved)}", "payload": n}
                        for n in range(moved)]})
                    answer = await http.get(f"/api/v1/pop/queue/{queue}",
                                            params={"batch": moved, "partitions": moved, "autoAck": "true"})
                    assert answer.status_code == 200, answer.status_code
            started = time.monotonic()
            await analytics.refresh(Store(database), full)
            timings.append(time.monotonic() - started)
        return timings
    finally:
        await database.close()


async def retention_walk_seconds(database_url: str, workers: int) -> float:
    """One full retention walk over every partition, ``workers`` ranges side by side, each in
    the loop's bounded steps (maintenance/retention.py), as the elected loop walks them."""
    database = Database(database_url, workers)
    await database.open()
    store = Store(database)

    async def walk(start, end) -> None:
        position = start
        while position is not None:
            row = await store.retention.sweep_step(position, end, WINDOW_PARTITIONS, STEP_ROWS, 0, 0)
            position = row["next_from"]

    try:
        started = time.monotonic()
        await asyncio.gather(*(walk(start, end) for start, end in id_ranges(workers)))
        return time.monotonic() - started
    finally:
        await database.close()


async def vacuum(database_url: str) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        for table in TABLES:
            await conn.execute(f"VACUUM {table}")
    finally:
        await conn.close()


def table_lines(measured: tuple[dict[str, asyncpg.Record], list[asyncpg.Record]], partitions: int) -> list[str]:
    measured, indexes = measured
    lines = [f"  {'table':<22}{'heap':>9}{'indexes':>9}{'total':>9}  (bytes per partition)"]
    for table, row in measured.items():
        lines.append(f"  {table:<22}{row['heap'] / partitions:>9.0f}{row['indexes'] / partitions:>9.0f}"
                     f"{row['total'] / partitions:>9.0f}")
    lines += [f"    index {row['name']:<30}{row['bytes'] / partitions:>9.0f}" for row in indexes]
    core = (measured["rq_partitions"]["total"] + measured["rq_consumers"]["total"]) / partitions
    lines.append(f"  partition + cursor: {core:.0f} bytes (Queen 1.0: 641)")
    return lines


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--push-batch", type=int, default=1_000)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    with OwnBroker(workers=1) as broker:
        started = time.monotonic()
        await create_and_consume(broker.url, "cost", args.partitions, args.push_batch, args.concurrency)
        print(f"{args.partitions:,} partitions created and consumed in {time.monotonic() - started:.0f} s")
        median, worst = await wildcard_pop_ms(broker.url, "cost")
        print(f"wildcard pop finding one message among them: median {median:.1f} ms, worst {worst:.1f} ms")
        booked, idle, incremental = await refresh_seconds(broker.database_url, broker.url, "cost", args.partitions)
        print(f"statistics refresh: full pass {booked * 1000:.0f} ms booking the load, {idle * 1000:.0f} ms with "
              f"nothing new; incremental {incremental * 1000:.0f} ms after 100 partitions moved")
        walks = {workers: await retention_walk_seconds(broker.database_url, workers) for workers in (1, 4)}
        print("retention walk over every partition: " + ", ".join(
            f"{seconds * 1000:.0f} ms with {workers} worker{'s' if workers > 1 else ''}"
            for workers, seconds in walks.items()))
        everything, since, fetched = await discovery_seconds(broker.url, "cost", args.partitions)
        print(f"reads: every partition by discovery pages {everything * 1000:.0f} ms; changed since the safe time "
              f"after 100 moved {since * 1000:.0f} ms; one fetch of 1,000 partitions {fetched * 1000:.0f} ms")
        print("before VACUUM:")
        print("\n".join(table_lines(await sizes(broker.database_url), args.partitions)))
        await vacuum(broker.database_url)
        print("after VACUUM:")
        print("\n".join(table_lines(await sizes(broker.database_url), args.partitions)))


if __name__ == "__main__":
    asyncio.run(main())
