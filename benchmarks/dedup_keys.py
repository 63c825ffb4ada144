"""What a deduplication key costs a push: PostgreSQL CPU and bytes on disk a key, in each store.

Calls rq_push directly over one connection per queue, as the broker calls it for a fused flush
(8 partitions × 100 messages a call, the bench's one-letter payloads; payload_compression.py
builds the calls), on an embedded PostgreSQL of its own in a temporary folder, into four
queues in turn, a block of calls each, the order turning every block so that the machine's
drift falls on all four alike:

- ``runs``: Queen's default window (3,600 s), UUIDv7 transactionIds, kept in rq_dedup_runs;
- ``rows``: the same window, UUIDv4 transactionIds (the Python client's default), a row a key
  in rq_dedup;
- ``none-v7``, ``none-v4``: no window (``dedupWindowSeconds: 0``), keys of the same forms.

A key's cost is a store's queue less the queue without a window whose keys have the same form:
the form alone changes what a push costs (random keys make the segment's transactionIds
compress worse). The CPU is each connection's backend's own, summed over its blocks. The bytes
are each store's (its indexes and TOAST included) over its keys.

    python benchmarks/dedup_keys.py [--blocks 24] [--calls 60]
"""

from __future__ import annotations

import argparse
import asyncio
import random

import asyncpg
from payload_compression import PARTITIONS, PER_PARTITION, call_arguments, embedded_server

from reginamq.bench.system import cpu_seconds
from reginamq.store.messages import PUSH_SQL
from reginamq.store.schema import apply_schema

QUEUES = {"runs": (3600, False), "rows": (3600, True), "none-v7": (0, False), "none-v4": (0, True)}  # window, UUIDv4
TWIN = {"runs": "none-v7", "rows": "none-v4"}
STORES = {
    "runs": ("SELECT coalesce(sum(cardinality(keys)), 0) FROM rq_dedup_runs", "rq_dedup_runs"),
    "rows": ("SELECT count(*) FROM rq_dedup", "rq_dedup"),
}
WARMUP_CALLS = 5


async def main(blocks: int, calls: int) -> None:
    with embedded_server("reginamq-dedup-") as url:
        await apply_schema(url)
        conns = {name: await asyncpg.connect(url) for name in QUEUES}
        try:
            backends = {name: await conn.fetchval("SELECT pg_backend_pid()") for name, conn in conns.items()}
            for name, (window, _) in QUEUES.items():
                await conns[name].execute("INSERT INTO rq_queues (name, options) VALUES ($1, $2::jsonb)",
                                          f"dk-{name}", f'{{"dedupWindowSeconds": {window}}}')
            seconds, messages = dict.fromkeys(QUEUES, 0.0), dict.fromkeys(QUEUES, 0)
            rng, call = random.Random(7), 0
            for block in range(blocks):
                names = list(QUEUES)[block % len(QUEUES):] + list(QUEUES)[:block % len(QUEUES)]
                for name in names:
                    random_keys = QUEUES[name][1]
                    prepared = [call_arguments(f"dk-{name}", "x", call + n, rng, random_keys) for n in range(calls)]
                    for arguments in prepared[:WARMUP_CALLS]:
                        await conns[name].fetch(PUSH_SQL, *arguments)
                    started = cpu_seconds(backends[name])
                    for arguments in prepared[WARMUP_CALLS:]:
                        await conns[name].fetch(PUSH_SQL, *arguments)
                    seconds[name] += cpu_seconds(backends[name]) - started
                    messages[name] += (calls - WARMUP_CALLS) * PARTITIONS * PER_PARTITION
                call += calls
            micros = {name: seconds[name] / messages[name] * 1e6 for name in QUEUES}
            for name in QUEUES:
                print(f"{name:7}: {micros[name]:6.2f} µs of PostgreSQL CPU a message"
                      + (f", a key {micros[name] - micros[TWIN[name]]:.2f} µs" if name in TWIN else ""))
            for name, (count_sql, table) in STORES.items():
                keys = await conns[name].fetchval(count_sql)
                size = await conns[name].fetchval("SELECT pg_total_relation_size($1::regclass)", table)
                print(f"{table}: {keys:,} keys, {size / keys:.0f} bytes a key with its indexes and TOAST")
        finally:
            for conn in conns.values():
                await conn.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--calls", type=int, default=60, help="calls of a block, 800 messages each")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.blocks, arguments.calls))
