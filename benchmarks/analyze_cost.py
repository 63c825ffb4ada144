"""What autovacuum's ANALYZE of the message table costs, with the shipped statistics settings and
with PostgreSQL's defaults on every column. Under completed retention ``rq_segments`` turns over
every minute or so, so autovacuum analyses it every round (``autovacuum_naptime``, 10 s on the
embedded server): this CPU is paid again and again while the broker serves.

    python benchmarks/analyze_cost.py --segments 15000

Starts its own broker on an embedded PostgreSQL in a temporary folder (removed at the end),
pushes ``--segments`` requests of 100 messages of 256 bytes over 200 partitions (a minute of the
throughput shape at 25,000 msg/s), then runs ANALYZE on ``rq_segments`` alternately with each
setting and reports the analysing backend's CPU time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import asyncpg
import httpx

from reginamq.bench.broker import OwnBroker
from reginamq.bench.system import cpu_seconds

QUEUE = "analyze-cost"
PARTITIONS = 200
PAYLOAD = {"s": 1764560000000000000, "p": 0, "k": 0, "q": 0, "x": "x" * 200}  # ~256 bytes as JSON
SETTINGS = {
    "shipped": "ALTER TABLE rq_segments ALTER COLUMN payloads SET STATISTICS 0",
    "defaults": "ALTER TABLE rq_segments ALTER COLUMN payloads SET STATISTICS -1",
}


async def fill(url: str, segments: int, concurrency: int = 8) -> None:
    """One segment a push: 100 messages to one partition."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:

        async def pusher(first: int) -> None:
            for index in range(first, segments, concurrency):
                items = [{"queue": QUEUE, "partition": f"p{index % PARTITIONS}", "payload": PAYLOAD}
                         for _ in range(100)]
                response = await http.post("/api/v1/push", json={"items": items})
                response.raise_for_status()

        await asyncio.gather(*(pusher(first) for first in range(concurrency)))


async def measure(database_url: str, rounds: int) -> dict[str, list[float]]:
    conn = await asyncpg.connect(database_url)
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        cpu: dict[str, list[float]] = {name: [] for name in SETTINGS}
        for _ in range(rounds):
            for name, sql in SETTINGS.items():
                await conn.execute(sql)
                before = cpu_seconds(pid)
                await conn.execute("ANALYZE rq_segments")
                cpu[name].append(cpu_seconds(pid) - before)
        await conn.execute(SETTINGS["shipped"])
        return cpu
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--segments", type=int, default=15_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with OwnBroker(workers=2) as broker:
        started = time.monotonic()
        asyncio.run(fill(broker.url, args.segments))
        print(f"{args.segments:,} segments of 100 messages written in {time.monotonic() - started:.0f} s")
        cpu = asyncio.run(measure(broker.database_url, args.rounds))
    for name, seconds in cpu.items():
        print(f"ANALYZE rq_segments, {name:8s}: CPU median {1000 * statistics.median(seconds):6.0f} ms "
              f"(runs: {', '.join(f'{1000 * s:.0f}' for s in seconds)})")


if __name__ == "__main__":
    main()
