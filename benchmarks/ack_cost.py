"""What one ``rq_ack`` call costs PostgreSQL, in CPU of the backend that runs it, and the broker,
in CPU of this process making the call as the broker does (engine/ack.py's ``write``: encoding
the arguments, reading the rows, building the answer): an ack of a whole pop (``--batch``
messages over ``--partitions`` partitions, in delivery order, as a consumer acks), with
nothing else in the way: no HTTP on the measured call, one call at a time.

    python benchmarks/ack_cost.py
    python benchmarks/ack_cost.py --against /path/to/older/checkout

Each measured ack follows a push of the batch and a wildcard pop of it through the broker. With
``--against DIR`` the run alternates, in the same database, between this code's ``rq_ack``
(``004_ack.sql``) and DIR's, which must keep this code's signature (to compare a change of
the call too, run this script with ``PYTHONPATH=DIR`` and without, in turns).
``--analyze-after N`` runs ANALYZE after N rounds: before it the tables have no planner
statistics, as in a new broker's first minute. Starts its own broker (one worker) on an
embedded PostgreSQL in a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

import asyncpg
import httpx

from reginamq.bench.broker import OwnBroker
from reginamq.bench.system import cpu_seconds
from reginamq.engine import ack
from reginamq.store.schema import schema_files

QUEUE = "ack-cost"
ACK_FILE = Path("reginamq") / "store" / "sql" / "004_ack.sql"  # in a checkout
PAD = "x" * 200


def ack_function(sql: str) -> str:
    """The file's rq_ack definition alone (its types are created once, by the schema)."""
    start = sql.index("CREATE OR REPLACE FUNCTION rq_ack(")
    return sql[start:sql.index("CREATE OR REPLACE FUNCTION", start + 1)]


async def measure(url: str, database_url: str, versions: dict[str, str], args) -> dict[str, list[float]]:
    conn = await asyncpg.connect(database_url)
    pid = await conn.fetchval("SELECT pg_backend_pid()")
    per_partition = args.batch // args.partitions
    rounds = 0

    async def one_round(http: httpx.AsyncClient) -> tuple[float, float]:
        nonlocal rounds
        for k in range(args.partitions):
            items = [{"queue": QUEUE, "partition": f"p{(rounds * args.partitions + k) % 200}",
                      "payload": {"n": n, "pad": PAD}} for n in range(per_partition)]
            (await http.post("/api/v1/push", json={"items": items})).raise_for_status()
        rounds += 1
        answer = await http.get(f"/api/v1/pop/queue/{QUEUE}", params={
            "batch": args.batch, "wait": "false", "partitions": args.partitions})
        messages = answer.json()["messages"]
        prepared = ack.prepare([ack.Ack(m["transactionId"], m["partitionId"], None, m["leaseId"], "completed")
                                for m in messages])
        before, own_before = cpu_seconds(pid), time.process_time()
        results = await ack.write(conn, prepared)  # the broker's own call (nothing to announce here)
        own = time.process_time() - own_before
        spent = cpu_seconds(pid) - before
        if len(results) != len(messages) or not all(r["success"] and r["leaseReleased"] for r in results):
            raise AssertionError(f"round {rounds}: the ack did not complete every span")
        return spent, own

    cpu: dict[str, list[float]] = {name: [] for name in versions}
    own: dict[str, list[float]] = {name: [] for name in versions}
    try:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            for round_number in range(args.rounds):
                if round_number == args.analyze_after:
                    await conn.execute("ANALYZE")
                for name, sql in versions.items():
                    await conn.execute(sql)
                    spent = [await one_round(http) for _ in range(args.acks)]
                    cpu[name].append(sum(database for database, _ in spent) / args.acks)
                    own[name].append(sum(broker for _, broker in spent) / args.acks)
        await conn.execute(versions["this code"])
    finally:
        await conn.close()
    return cpu, own


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=1_000, help="messages a pop and its ack")
    parser.add_argument("--partitions", type=int, default=4, help="partitions a pop spans")
    parser.add_argument("--acks", type=int, default=40, help="acks a measurement")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--analyze-after", type=int, default=4, help="rounds before ANALYZE")
    parser.add_argument("--against", type=Path, help="another checkout, to alternate with")
    args = parser.parse_args()
    versions = {"this code": ack_function(dict(schema_files())[ACK_FILE.name])}
    if args.against:
        versions[str(args.against)] = ack_function((args.against / ACK_FILE).read_text())
    with OwnBroker(workers=1) as broker:
        httpx.post(f"{broker.url}/api/v1/configure",
                   json={"queue": QUEUE, "options": {"dedupWindowSeconds": 0}}).raise_for_status()
        cpu, own = asyncio.run(measure(broker.url, broker.database_url, versions, args))
    for name, seconds in cpu.items():
        before, after = seconds[:args.analyze_after], seconds[args.analyze_after:]
        print(f"ack of {args.batch} over {args.partitions} partitions, {name}: PostgreSQL CPU a call, median "
              f"{1e6 * statistics.median(before):,.0f} us without statistics, "
              f"{1e6 * statistics.median(after):,.0f} us after ANALYZE (rounds: {microseconds(seconds)}); "
              f"the call's own CPU, median {1e6 * statistics.median(own[name]):,.0f} us "
              f"(rounds: {microseconds(own[name])})")


def microseconds(seconds: list[float]) -> str:
    return ", ".join(f"{1e6 * s:,.0f}" for s in seconds)

if __name__ == "__main__":
    main()
