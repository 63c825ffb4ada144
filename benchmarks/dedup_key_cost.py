"""What a deduplication key costs PostgreSQL to insert, in the shape ``rq_dedup`` stores it and in
narrower shapes, with nothing else in the way: one connection, one transaction a push, a push's
keys (``--batch`` transactionIds of one partition) in one statement.

    python benchmarks/dedup_key_cost.py --prefill 2000000 --pushes 1500 --rounds 4

Each shape is a table of its own in a scratch schema, filled first with ``--prefill`` keys (so
the indexes are as deep as a window's worth of keys makes them), then measured in alternation
with the others. ``call only`` runs the same statement as a SELECT (the statement, the unnest of
the arrays and the commit, no row written): what remains above it is the key's own cost. CPU is
the backend's, read from /proc. Starts its own broker (one worker: it only provides the
embedded PostgreSQL) in a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import uuid

import asyncpg

from reginamq.bench.broker import OwnBroker
from reginamq.bench.system import cpu_seconds

ROWS = "FROM unnest($2::text[], $3::uuid[]) AS k(txid, msg_id)"
HASHED_KEY = "md5($1::uuid::text || k.txid)::uuid"  # 16 bytes for (partition, transactionId)
EXPIRY = "now() + interval '1 hour'"
# name -> (the table, the statement that writes a push's keys)
SHAPES = {
    "as stored: (partition, transactionId) + expiry index": (
        "CREATE TABLE keycost.stored (partition_id uuid NOT NULL, transaction_id text NOT NULL,"
        " message_id uuid NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (partition_id, transaction_id));"
        " CREATE INDEX ON keycost.stored (expires_at)",
        f"INSERT INTO keycost.stored SELECT $1, k.txid, k.msg_id, {EXPIRY} {ROWS}"),
    "no expiry index": (
        "CREATE TABLE keycost.no_expiry (partition_id uuid NOT NULL, transaction_id text NOT NULL,"
        " message_id uuid NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (partition_id, transaction_id))",
        f"INSERT INTO keycost.no_expiry SELECT $1, k.txid, k.msg_id, {EXPIRY} {ROWS}"),
    "16-byte hash key + expiry index": (
        "CREATE TABLE keycost.hashed (key uuid PRIMARY KEY, message_id uuid NOT NULL, expires_at timestamptz NOT NULL);"
        " CREATE INDEX ON keycost.hashed (expires_at)",
        f"INSERT INTO keycost.hashed SELECT {HASHED_KEY}, k.msg_id, {EXPIRY} {ROWS}"),
    "16-byte hash key, no expiry index": (
        "CREATE TABLE keycost.hashed_only (key uuid PRIMARY KEY, message_id uuid NOT NULL,"
        " expires_at timestamptz NOT NULL)",
        f"INSERT INTO keycost.hashed_only SELECT {HASHED_KEY}, k.msg_id, {EXPIRY} {ROWS}"),
}
CALL_ONLY = f"SELECT count(*) FROM (SELECT $1::uuid, k.txid, k.msg_id, {EXPIRY} {ROWS}) s"


def keys(partitions: list[uuid.UUID], batch: int) -> tuple[uuid.UUID, list[str], list[uuid.UUID]]:
    return random.choice(partitions), [str(uuid.uuid4()) for _ in range(batch)], [uuid.uuid4() for _ in range(batch)]


async def measure(database_url: str, args) -> dict[str, list[float]]:
    conn = await asyncpg.connect(database_url)
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        partitions = [uuid.uuid4() for _ in range(args.partitions)]
        await conn.execute("DROP SCHEMA IF EXISTS keycost CASCADE; CREATE SCHEMA keycost")
        for table, insert in SHAPES.values():
            await conn.execute(table)
            filling = await conn.prepare(insert)
            for _ in range(args.prefill // 10_000):
                await filling.fetch(*keys(partitions, 10_000))
        statements = {"call only": CALL_ONLY} | {name: insert for name, (_, insert) in SHAPES.items()}
        await conn.execute("VACUUM ANALYZE")
        cpu: dict[str, list[float]] = {name: [] for name in statements}
        for _ in range(args.rounds):
            for name, sql in statements.items():
                statement = await conn.prepare(sql)
                pushes = [keys(partitions, args.batch) for _ in range(args.pushes)]
                before = cpu_seconds(pid)
                for push in pushes:
                    async with conn.transaction():
                        await statement.fetch(*push)
                cpu[name].append((cpu_seconds(pid) - before) / args.pushes / args.batch)
        await conn.execute("DROP SCHEMA keycost CASCADE")
        return cpu
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=100, help="keys a push")
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--prefill", type=int, default=2_000_000, help="keys in each table before measuring")
    parser.add_argument("--pushes", type=int, default=1_500, help="pushes a measurement")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    with OwnBroker(workers=1) as broker:
        cpu = asyncio.run(measure(broker.database_url, args))
    for name, seconds in cpu.items():
        print(f"{name:55s} median {1e6 * statistics.median(seconds):5.2f} us a key "
              f"(runs: {', '.join(f'{1e6 * s:.2f}' for s in seconds)})")


if __name__ == "__main__":
    main()
