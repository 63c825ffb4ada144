"""Where the members' extra PostgreSQL work goes (issue 42): commits and WAL flushes over 1 and
N member databases for the same load.

    python benchmarks/member_commits.py [--shards 1 3] [--rate 3000] [--duration 20]

For each N, one after the other: ``reginamq serve --shards N --workers 1`` in a temporary
folder (the bench's :class:`~reginamq.bench.broker.OwnBroker`), ``reginamq bench`` against it
with its defaults (pushes of 100 messages over 200 partitions, 4 consumers, explicit acks), and
each member's counters read before and after the bench from ``pg_stat_database`` (commits),
``pg_stat_wal`` (records, bytes) and ``pg_stat_io`` (WAL writes and fsyncs). A commit that
writes has its WAL flushed; several commits at once share a flush, so members that each see a
part of the commits share fewer.

Everything runs on 127.0.0.1 and stops by itself; the folders are removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys

import asyncpg

from reginamq.bench.broker import OwnBroker, embedded_url
from reginamq.store.embedded import shard_data_dir

COUNTERS_SQL = """
SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits,
       (SELECT wal_records FROM pg_stat_wal) AS wal_records,
       (SELECT wal_bytes FROM pg_stat_wal)::bigint AS wal_bytes,
       (SELECT sum(writes) FROM pg_stat_io WHERE object = 'wal')::bigint AS wal_writes,
       (SELECT sum(fsyncs) FROM pg_stat_io WHERE object = 'wal')::bigint AS wal_fsyncs
"""
NAMES = ("commits", "wal_records", "wal_bytes", "wal_writes", "wal_fsyncs")


async def counters(url: str) -> tuple[int, ...]:
    conn = await asyncpg.connect(url)
    try:
        row = await conn.fetchrow(COUNTERS_SQL)
    finally:
        await conn.close()
    return tuple(int(row[name] or 0) for name in NAMES)


def one(shards: int, rate: float, duration: float) -> list[tuple[int, ...]]:
    """Each member's counters over the bench (by ordinal)."""
    with OwnBroker(workers=1, serve_args=("--shards", str(shards))) as broker:
        urls = [embedded_url(shard_data_dir(broker.data_dir, shard)) for shard in range(shards)]
        before = [asyncio.run(counters(url)) for url in urls]
        subprocess.run([sys.executable, "-m", "reginamq", "bench", "--url", broker.url,
                        "--rate", str(rate), "--duration", str(duration), "--report", str(duration)],
                       check=True, stdout=subprocess.DEVNULL)
        after = [asyncio.run(counters(url)) for url in urls]
    return [tuple(b - a for a, b in zip(first, last, strict=True)) for first, last in zip(before, after, strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--rate", type=float, default=3000)
    parser.add_argument("--duration", type=float, default=20)
    args = parser.parse_args()
    print(f"{'N':>2}  {'commits':>8}  {'WAL records':>11}  {'WAL MB':>7}  {'WAL writes':>10}  {'WAL fsyncs':>10}"
          "  per member (commits / fsyncs)")
    for shards in args.shards:
        members = one(shards, args.rate, args.duration)
        total = [sum(member[index] for member in members) for index in range(len(NAMES))]
        each = "  ".join(f"{member[0]:,} / {member[4]:,}" for member in members)
        print(f"{shards:>2}  {total[0]:>8,}  {total[1]:>11,}  {total[2] / 1e6:>7.1f}  {total[3]:>10,}  {total[4]:>10,}"
              f"  {each}", flush=True)


if __name__ == "__main__":
    main()
