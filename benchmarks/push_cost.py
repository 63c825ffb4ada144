"""What one ``rq_push`` call costs PostgreSQL, in CPU of the backend that runs it, with nothing
else in the way: no HTTP, no fusion, one call at a time on one connection.

    python benchmarks/push_cost.py --batch 20 --mode existing
    python benchmarks/push_cost.py --batch 20 --mode existing --against /path/to/older/checkout

A queue of ``--partitions`` partitions (100,000 by default, analysed, as a broker's tables are
after a while) receives pushes of ``--batch`` messages of 256 bytes (``--payloads``: one repeated,
or each message its own), each to one partition:
one of those (``--mode existing``) or a new one (``--mode creating``, the first push naming
it). With ``--against DIR`` the run alternates, in the same database, between this code's
``002_push.sql`` and DIR's (``reginamq/store/sql/002_push.sql`` of another checkout), so the
two are compared on the same tables within minutes; a load run's CPU totals are too noisy on a
shared machine for differences of a few percent. Starts its own broker (one worker: it only
lays out the schema and the queue) on an embedded PostgreSQL in a temporary folder, removed
at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import uuid
from pathlib import Path

import asyncpg
import httpx

from reginamq.bench.broker import OwnBroker
from reginamq.bench.system import cpu_seconds
from reginamq.store.schema import schema_files

QUEUE = "push-cost"
PUSH_FILE = Path("reginamq") / "store" / "sql" / "002_push.sql"  # in a checkout
PUSH_SQL = "SELECT * FROM rq_push($1, $2, $3, $4, $5, $6, $7, $8)"
ALPHABET = b"abcdefghijklmnopqrstuvwxyz0123456789"
PAYLOAD = b'{"x":"' + bytes(random.Random(7).choices(ALPHABET, k=240)) + b'"}'


def payloads(n: int, distinct: bool) -> list[bytes]:
    """``n`` payloads of 248 bytes: one repeated (PostgreSQL's compression of a segment then
    finds every message after the first in its window), or each its own, as messages are."""
    if not distinct:
        return [PAYLOAD] * n
    return [b'{"x":"' + bytes(random.choices(ALPHABET, k=240)) + b'"}' for _ in range(n)]


async def measure(database_url: str, versions: dict[str, str], args) -> dict[str, list[float]]:
    conn = await asyncpg.connect(database_url)
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        queue_id = await conn.fetchval("SELECT id FROM rq_queues WHERE name = $1", QUEUE)
        await conn.execute("INSERT INTO rq_partitions (queue_id, name) "
                           "SELECT $1, 'e' || n FROM generate_series(0, $2 - 1) n", queue_id, args.partitions)
        await conn.execute("ANALYZE")
        created = 0

        async def push() -> None:
            nonlocal created
            if args.mode == "creating":
                created += 1
                partition = f"c{created}"
            else:
                partition = f"e{random.randrange(args.partitions)}"
            n = args.batch
            await conn.fetch(PUSH_SQL, [QUEUE], [partition], [1] * n, [str(uuid.uuid4()) for _ in range(n)],
                             [uuid.uuid4() for _ in range(n)], payloads(n, args.payloads == "distinct"), None, False)

        cpu: dict[str, list[float]] = {name: [] for name in versions}
        for _ in range(args.rounds):
            for name, sql in versions.items():
                await conn.execute(sql)
                for _ in range(50):  # plans made again after the redefinition
                    await push()
                before = cpu_seconds(pid)
                for _ in range(args.pushes):
                    await push()
                cpu[name].append((cpu_seconds(pid) - before) / args.pushes)
        await conn.execute(versions["this code"])
        return cpu
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=20, help="messages a push")
    parser.add_argument("--mode", choices=("existing", "creating"), default="existing")
    parser.add_argument("--partitions", type=int, default=100_000, help="partitions laid out before")
    parser.add_argument("--dedup-window", type=int, default=0, help="the queue's dedupWindowSeconds")
    parser.add_argument("--pushes", type=int, default=1_500, help="pushes a measurement")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--payloads", choices=("same", "distinct"), default="same",
                        help="one payload repeated in every message, or each message its own")
    parser.add_argument("--against", type=Path, help="another checkout, to alternate with")
    args = parser.parse_args()
    versions = {"this code": dict(schema_files())[PUSH_FILE.name]}
    if args.against:
        versions[str(args.against)] = (args.against / PUSH_FILE).read_text()
    with OwnBroker(workers=1) as broker:
        httpx.post(f"{broker.url}/api/v1/configure",
                   json={"queue": QUEUE, "options": {"dedupWindowSeconds": args.dedup_window}}).raise_for_status()
        cpu = asyncio.run(measure(broker.database_url, versions, args))
    for name, seconds in cpu.items():
        print(f"push of {args.batch} ({args.mode}, dedup window {args.dedup_window} s), {name}: PostgreSQL CPU "
              f"median {1e6 * statistics.median(seconds):,.0f} us a push "
              f"(runs: {', '.join(f'{1e6 * s:,.0f}' for s in seconds)})")


if __name__ == "__main__":
    main()
