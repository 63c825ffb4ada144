"""What a deduplication key costs a push: PostgreSQL CPU and bytes on disk a key.

Calls rq_push directly over one connection, as the broker calls it for a fused flush (8
partitions × 100 messages a call, the bench's one-letter payloads; payload_compression.py
builds the calls), on an embedded PostgreSQL of its own in a temporary folder: into a queue
without a window and into one with Queen's default window (3,600 s), alternated, twice. The
CPU is the backend's own between two readings; a key's cost is the difference between the
two queues a message. The bytes are the key table's (rq_dedup), its indexes included, over
its keys.

    python benchmarks/dedup_keys.py [--calls 400]
"""

from __future__ import annotations

import argparse
import asyncio
import random

import asyncpg
from payload_compression import embedded_server, push_cpu

from reginamq.store.schema import apply_schema

WINDOWS = (0, 3600, 0, 3600)


async def main(calls: int) -> None:
    with embedded_server("reginamq-dedup-") as url:
        await apply_schema(url)
        conn = await asyncpg.connect(url)
        try:
            micros: dict[int, list[float]] = {window: [] for window in set(WINDOWS)}
            for run, window in enumerate(WINDOWS):
                queue = f"dk-{window}-{run}"
                await conn.execute("INSERT INTO rq_queues (name, options) VALUES ($1, $2::jsonb)", queue,
                                   f'{{"dedupWindowSeconds": {window}}}')
                micros[window].append(await push_cpu(conn, queue, "x", calls, random.Random(run)))
                print(f"window {window:5} s: {micros[window][-1]:6.2f} µs of PostgreSQL CPU a message")
            keys = await conn.fetchval("SELECT count(*) FROM rq_dedup")
            size = await conn.fetchval("SELECT pg_total_relation_size('rq_dedup')")
        finally:
            await conn.close()
    cost = [with_keys - without for with_keys, without in zip(micros[3600], micros[0], strict=True)]
    print(f"rq_dedup: {keys:,} keys, {size / keys:.0f} bytes a key with its indexes; "
          f"a key costs {', '.join(f'{c:.2f}' for c in cost)} µs of PostgreSQL CPU")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400)
    asyncio.run(main(parser.parse_args().calls))
