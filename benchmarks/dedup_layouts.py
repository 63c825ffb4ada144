"""Where a deduplication key's cost lies: PostgreSQL CPU and bytes a key, layout by layout.

Each layout is a table and the one statement a push would run for 800 keys (8 partitions ×
100, as rq_push is called for a fused flush: dedup_keys.py measures rq_push itself), on an
embedded PostgreSQL of its own in a temporary folder:

- ``none``: the statement only unnests its arrays (what every layout pays before it stores).
- ``pattern``: the same, counting the keys a UUIDv7 pattern matches (recognising keys in SQL).
- ``row``: today's rq_dedup, a row a key keyed by (partition id, transactionId), with the
  expiry index the purge reads.
- ``row-hashed``: the same with a 64-bit hash of the transactionId for the text.
- ``heap-only``: a row a key and no index at all, the floor of any row-a-key layout.
- ``runs``: one row per (partition, second of the key's UUIDv7 timestamp) and push, the
  keys in one array (kept in the row) and the message ids in another (toasted); a push first
  reads the runs of its keys' (partition, second) pairs for keys already there, then writes
  its own. The broker, not PostgreSQL, recognises the key as a UUIDv7 and sends it as a uuid
  with its second (a pattern match in SQL costs more than the whole layout).

Keys are UUIDv7 strings, as the official clients send, whose timestamps advance as at 40,000
messages a second (a call every 20 ms: two pushes a partition a second), so ``runs`` probes as
many runs as it would at that rate. The layouts alternate, twice, as the machine drifts; the
CPU is the backend's own between two readings.

    python benchmarks/dedup_layouts.py [--calls 600]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import uuid

import asyncpg
from payload_compression import PARTITIONS, PER_PARTITION, embedded_server, statement_cpu

CALL_MS = 20  # 800 keys a call at 40,000 keys a second
UUID7 = "^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
ITEMS = "unnest($1::uuid[], $2::text[], $3::uuid[], $4::bigint[], $5::uuid[]) AS u(p, x, m, second, key)"
LAYOUTS = {
    "none": ("CREATE TABLE k (x int)", f"SELECT count(*) FROM {ITEMS}"),
    "pattern": ("CREATE TABLE k (x int)", f"SELECT count(*) FROM {ITEMS} WHERE x ~ '{UUID7}'"),
    "row": ("""CREATE TABLE k (partition_id uuid NOT NULL, transaction_id text NOT NULL, message_id uuid NOT NULL,
                  expires_at timestamptz NOT NULL, PRIMARY KEY (partition_id, transaction_id));
               CREATE INDEX ON k (expires_at)""",
            f"INSERT INTO k SELECT p, x, m, now() + interval '1 hour' FROM {ITEMS}"),
    "row-hashed": ("""CREATE TABLE k (partition_id uuid NOT NULL, key bigint NOT NULL, message_id uuid NOT NULL,
                         expires_at timestamptz NOT NULL, PRIMARY KEY (partition_id, key));
                      CREATE INDEX ON k (expires_at)""",
                   f"INSERT INTO k SELECT p, hashtextextended(x, 0), m, now() + interval '1 hour' FROM {ITEMS}"),
    "heap-only": ("""CREATE TABLE k (partition_id uuid NOT NULL, transaction_id text NOT NULL, message_id uuid NOT NULL,
                        expires_at timestamptz NOT NULL)""",
                  f"INSERT INTO k SELECT p, x, m, now() + interval '1 hour' FROM {ITEMS}"),
    "runs": ("""CREATE TABLE k (partition_id uuid NOT NULL, second bigint NOT NULL, expires_at timestamptz NOT NULL,
                   keys uuid[] NOT NULL, ids uuid[] NOT NULL);
                ALTER TABLE k ALTER keys SET STORAGE MAIN, ALTER ids SET STORAGE EXTERNAL;
                CREATE INDEX ON k (partition_id, second); CREATE INDEX ON k (expires_at)""",
             f"""WITH items AS (SELECT p, key, m, second FROM {ITEMS}),
                     pairs AS (SELECT DISTINCT p, second FROM items),
                     stored AS (SELECT s.key FROM pairs,
                                LATERAL (SELECT k.keys FROM k WHERE k.partition_id = pairs.p AND k.second = pairs.second
                                         AND k.expires_at > now()) r, unnest(r.keys) AS s(key))
                INSERT INTO k SELECT p, second, now() + interval '1 hour', array_agg(key), array_agg(m) FROM items
                WHERE key NOT IN (SELECT key FROM stored) GROUP BY p, second"""),
}
KEYS_SQL = {"runs": "SELECT sum(cardinality(keys)) FROM k"}


def uuid7_at(ms: int, rng: random.Random) -> str:
    """A UUIDv7 string whose timestamp is ``ms``."""
    value = (ms << 80) | (0x7 << 76) | (rng.getrandbits(12) << 64) | (0b10 << 62) | rng.getrandbits(62)
    return str(uuid.UUID(int=value))


def calls_for(calls: int, seed: int) -> list[tuple]:
    rng = random.Random(seed)
    partitions = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(200)]
    start_ms = 1_790_000_000_000 + seed * 10_000_000
    prepared = []
    for call in range(calls):
        ms = start_ms + call * CALL_MS
        pids = [partitions[(call * PARTITIONS + group) % 200]
                for group in range(PARTITIONS) for _ in range(PER_PARTITION)]
        keys = [uuid7_at(ms, rng) for _ in pids]
        ids = [uuid.UUID(key) for key in keys]  # a message id per key; the key itself as a uuid
        prepared.append((pids, keys, ids, [ms // 1000] * len(keys), ids))
    return prepared


async def measure(url: str, layout: str, calls: int, seed: int) -> tuple[float, float]:
    """PostgreSQL CPU a key in µs, and bytes a key of the table with its indexes and TOAST."""
    create, statement = LAYOUTS[layout]
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("DROP TABLE IF EXISTS k")
        await conn.execute(create)
        micros = await statement_cpu(conn, statement, calls_for(calls, seed))
        keys = await conn.fetchval(KEYS_SQL.get(layout, "SELECT count(*) FROM k"))
        size = await conn.fetchval("SELECT pg_total_relation_size('k')")
    finally:
        await conn.close()
    return micros, size / keys if keys else 0.0


async def main(calls: int) -> None:
    with embedded_server("reginamq-dedup-layouts-") as url:
        for run in range(2):
            for layout in LAYOUTS:
                micros, size = await measure(url, layout, calls, run)
                print(f"{layout:10} {micros:5.2f} µs of PostgreSQL CPU a key, {size:5.0f} bytes a key", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=600)
    asyncio.run(main(parser.parse_args().calls))
