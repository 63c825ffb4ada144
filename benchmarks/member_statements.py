"""How many statements each member database runs for a client's pop, push and ack (issue 42),
over 1 and N members, for the same load.

    python benchmarks/member_statements.py [--shards 1 3] [--rate 2400] [--duration 150]

For each N, one after the other: ``reginamq serve --shards N --workers 2`` in a temporary
folder (the bench's :class:`~reginamq.bench.broker.OwnBroker`) with ``pg_stat_statements``
loaded on every member, then ``reginamq bench`` against it in the shape of
``benchmarks/million_partitions.sh --small`` (a space of 100,000 partitions none of which
exists at the start, a window of 1,000 active ones that moves on after 1,000 pushes (every
3.3 s at 2,400 msg/s), so that nearly every push creates the partition it names; pushes of 8,
4 consumers each popping up to 100 partitions with a wildcard pop, explicit acks, completed
retention 60 s, deduplication off). Then the statements every member ran as calls of their
own are counted (calls, and the time they spent executing) and set against the requests the
bench made: ``rq_pop``, ``rq_push`` and ``rq_ack``, and for a new partition the directory's
claim on the catalog and the creation on its home when that is a call of its own
(``rq_provision_listed``; inside ``rq_push`` it is not counted). A statement's execution time includes
its waits for a core, so on a machine the run fills it measures the queue for the core as much
as the work.

Everything runs on 127.0.0.1 and stops by itself; the folders are removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import asyncpg

from reginamq.bench.broker import OwnBroker, embedded_url
from reginamq.store.embedded import shard_data_dir

ACTIVE = 1000
PUSH_BATCH = 8
SPACE = 100_000
# the statement a broker sends for each call, found by the function it calls
CALLS = {"pop": "rq_pop(", "push": "rq_push(", "ack": "rq_ack(", "claim": "rq_directory_claim(",
         "create": "rq_provision_listed("}
# the client's requests each kind of statement is counted against
REQUESTS = {"pop": "pop_reqs", "push": "push_reqs", "ack": "ack_reqs", "claim": "push_reqs", "create": "push_reqs"}
STATEMENTS_SQL = """
SELECT coalesce(sum(calls), 0)::bigint, coalesce(sum(total_exec_time), 0)::float8
FROM pg_stat_statements WHERE toplevel AND query LIKE '%' || $1 || '%'
"""
PG_SETTINGS = ("--pg-setting", "shared_preload_libraries=pg_stat_statements")


async def statements(url: str) -> dict[str, tuple[int, float]]:
    """(calls, execution ms) of each of CALLS on one member, since the extension was created."""
    conn = await asyncpg.connect(url)
    try:
        return {name: tuple(await conn.fetchrow(STATEMENTS_SQL, function)) for name, function in CALLS.items()}
    finally:
        await conn.close()


async def reset(url: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        await conn.execute("SELECT pg_stat_statements_reset()")
    finally:
        await conn.close()


def one(shards: int, rate: float, duration: float) -> tuple[list[dict[str, tuple[int, float]]], dict]:
    """Each member's statements over the bench (by ordinal), and the bench's final figures."""
    rotate = ACTIVE / (rate / PUSH_BATCH)
    with OwnBroker(workers=2, serve_args=("--shards", str(shards), "--retention-parallelism", "4",
                                          *PG_SETTINGS)) as broker, tempfile.TemporaryDirectory() as folder:
        urls = [embedded_url(shard_data_dir(broker.data_dir, shard)) for shard in range(shards)]
        for url in urls:
            asyncio.run(reset(url))
        report = Path(folder) / "bench.json"
        subprocess.run([sys.executable, "-m", "reginamq", "bench", "--url", broker.url, "--queue", "partitions",
                        "--rate", str(rate), "--push-batch", str(PUSH_BATCH), "--consumers", "4",
                        "--pop-partitions", "100", "--completed-retention", "60", "--dedup-window", "0",
                        "--partitions", str(SPACE), "--active", str(ACTIVE), "--rotate-seconds", f"{rotate:.4f}",
                        "--duration", str(duration), "--report", str(duration), "--json", str(report)],
                       check=True, stdout=subprocess.DEVNULL)
        members = [asyncio.run(statements(url)) for url in urls]
        final = json.loads(report.read_text())["final"]
    return members, final


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--rate", type=float, default=2400)
    parser.add_argument("--duration", type=float, default=150)
    args = parser.parse_args()
    print(f"{'N':>2}  {'pops':>7}  {'p99 ms':>6}  member statements a request, and their ms of execution each  "
          "per member pops")
    for shards in args.shards:
        members, final = one(shards, args.rate, args.duration)
        columns = []
        for name in CALLS:
            calls = sum(member[name][0] for member in members)
            spent = sum(member[name][1] for member in members)
            columns.append(f"{name} {calls / max(final[REQUESTS[name]], 1):.2f} × {spent / max(calls, 1):.2f} ms")
        each = ", ".join(f"{member['pop'][0]:,}" for member in members)
        print(f"{shards:>2}  {final['pop_reqs']:>7,}  {final['p99_ms']:>6.1f}  {' / '.join(columns)}  {each}",
              flush=True)


if __name__ == "__main__":
    main()
