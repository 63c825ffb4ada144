"""What retention's due walk costs per window size, on the two layouts that matter: the million
shape, where every partition receives one push in its active second and is then left (a second
holds one segment of each of 1,000 partitions, each a partition of its own), and its
200-partition reference, where every partition is written all the time (each 10 ms holds one
segment of each of the 200). Both hold the same number of one-message segments, all consumed
and past completed retention.

    python benchmarks/due_walk_cost.py --segments 400000 --windows 1000,10000

The segments, partitions and cursors are written straight into the tables (a push per segment
would take longer than everything measured here). Each walk runs the loop's steps
(``rq_retention_due_step``) from the start of its layout to the end, inside a transaction that
is rolled back, so every walk deletes the same rows; VACUUM runs between walks. The retention
loop of the broker is kept out by holding its lease. The planner is kept off sequential scans:
here every segment is due, while in a running broker a step's range is a small slice of the
table, where the index is the plan. Starts its own broker on an embedded PostgreSQL in a
temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import time
import uuid

import asyncpg
import httpx

from reginamq.bench.broker import OwnBroker
from reginamq.maintenance.retention import DUE_SQL, DUE_WORKER

ACTIVE = 1_000  # partitions written in a second in the rotating layout, one segment each
REFERENCE_PARTITIONS = 200
# Rows as a push writes them: one segment of one message per (partition, slot). A partition's
# number orders it in its slot, so that slots interleave partitions as concurrent pushes do.
BUILD_SQL = """
WITH parts AS (
    INSERT INTO rq_partitions (queue_id, name, last_offset, last_write_at)
    SELECT $1, 'p-' || n, $3 - 1, now() FROM generate_series(0, $2 - 1) n
    RETURNING id, substr(name, 3)::int AS n
), segments AS (
    INSERT INTO rq_segments (partition_id, base_offset, end_offset, created_at, txids, payloads)
    SELECT p.id, k, k, $4::timestamptz + make_interval(secs => $5 * (p.n / $6) + $7 * k + 0.00005 * (p.n % $6)),
           ARRAY[gen_random_uuid()::text], ARRAY['\\x7b7d'::bytea]
    FROM parts p, generate_series(0, $3 - 1) k
    RETURNING 1
)
INSERT INTO rq_consumers (partition_id, consumer_group, committed)
SELECT p.id, '__QUEUE_MODE__', $3 - 1 FROM parts p
"""
HOLD_LEASE_SQL = """
INSERT INTO rq_leader_leases (name, holder, expires_at) VALUES ('retention', 'due-walk-cost', now() + interval '1 day')
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
"""


async def build(broker: OwnBroker, conn: asyncpg.Connection, segments: int) -> dict[str, tuple]:
    """Both layouts, five days apart, ten and five days old; returns where each walk starts and
    the period that takes in exactly its layout."""
    async with httpx.AsyncClient(base_url=broker.url, timeout=60) as http:
        for queue in ("rotating", "reference"):
            answer = await http.post("/api/v1/configure", json={"queue": queue, "options": {
                "dedupWindowSeconds": 0, "completedRetentionSeconds": 60}})
            answer.raise_for_status()
    ids = {row["name"]: row["id"] for row in await conn.fetch("SELECT id, name FROM rq_queues")}
    now = await conn.fetchval("SELECT now()")
    rotating_start, reference_start = now - datetime.timedelta(days=10), now - datetime.timedelta(days=5)
    await conn.execute(BUILD_SQL, ids["rotating"], segments, 1, rotating_start, 1.0, ACTIVE, 0.0)
    await conn.execute(BUILD_SQL, ids["reference"], REFERENCE_PARTITIONS, segments // REFERENCE_PARTITIONS,
                       reference_start, 0.0, REFERENCE_PARTITIONS, 0.01)
    await conn.execute("VACUUM ANALYZE")
    seven_days = 7 * 86_400
    return {"rotating (a segment per partition, 1,000 a second)": (rotating_start - datetime.timedelta(seconds=1),
                                                                   seven_days),
            f"reference ({REFERENCE_PARTITIONS} partitions written all the time)": (
                now - datetime.timedelta(seconds=seven_days), 60)}


async def walk(conn: asyncpg.Connection, start_at: datetime.datetime, period: int,
               window: int) -> tuple[float, int, int]:
    """One due walk from start_at to its end, rolled back: seconds, steps, segments deleted."""
    position = (start_at, uuid.UUID(int=0), -1)
    steps = deleted = 0
    transaction = conn.transaction()
    await transaction.start()
    try:
        await conn.execute("SET LOCAL enable_seqscan = off")
        started = time.perf_counter()
        while True:
            row = await conn.fetchrow(DUE_SQL, period, *position, window, DUE_WORKER)
            steps += 1
            deleted += row["segments"]
            position = (row["next_at"], row["next_partition"], row["next_base"])
            if row["candidates"] < window:
                break
        took = time.perf_counter() - started
    finally:
        await transaction.rollback()
    return took, steps, deleted


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=400_000, help="segments in each layout")
    parser.add_argument("--windows", default="1000,10000", help="due-walk windows (segments a step reads)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    windows = [int(window) for window in args.windows.split(",")]
    with OwnBroker(workers=1) as broker:
        conn = await asyncpg.connect(broker.database_url)
        try:
            await conn.execute(HOLD_LEASE_SQL)
            await asyncio.sleep(5)  # a round the loop had begun ends
            layouts = await build(broker, conn, args.segments)
            print(f"{args.segments:,} consumed one-message segments per layout; milliseconds per walk")
            for repeat in range(args.repeats):
                for window in windows:
                    for layout, (start_at, period) in layouts.items():
                        took, steps, deleted = await walk(conn, start_at, period, window)
                        assert deleted == args.segments, (layout, deleted)
                        print(f"  run {repeat + 1}  window {window:>6,}  {layout:<52} {took * 1000:>7,.0f} ms  "
                              f"({steps} steps)", flush=True)
                        await conn.execute("VACUUM rq_partitions, rq_segments")
        finally:
            await conn.close()


if __name__ == "__main__":
    asyncio.run(main())
