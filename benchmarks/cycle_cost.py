"""What one message round costs in CPU: a single client, closed loop, repeats push (a batch to one
partition) → pop (wildcard, no wait) → ack (the batch), and divides the CPU the broker's
processes and PostgreSQL's processes spent by the number of rounds.

    python benchmarks/cycle_cost.py --cycles 3000

With one request in flight at a time nothing queues and nothing is fused, so the figures are
the fixed cost of each request on each side: the number to watch when changing the per-request
path (SQL statements, planning, the HTTP layer, JSON checks), where a load run's CPU totals are
too noisy on a shared machine. Run it before and after a change, the same hour. Starts its own
broker (``--workers 2``) on an embedded PostgreSQL in a temporary folder, removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

import httpx

from reginamq.bench.broker import OwnBroker
from reginamq.bench.system import CpuMeter, broker_tree, postgres_of


async def rounds(http: httpx.AsyncClient, queue: str, count: int, push_batch: int, partitions: int,
                 first: int) -> None:
    for n in range(first, first + count):
        items = [{"queue": queue, "partition": f"p{n % partitions}", "payload": {"n": n, "k": k, "pad": "x" * 200}}
                 for k in range(push_batch)]
        answer = await http.post("/api/v1/push", json={"items": items})
        answer.raise_for_status()
        answer = await http.get(f"/api/v1/pop/queue/{queue}", params={"batch": 1000, "wait": "false"})
        answer.raise_for_status()
        messages = answer.json()["messages"]
        if len(messages) != push_batch:
            raise AssertionError(f"round {n}: popped {len(messages)} messages, pushed {push_batch}")
        acks = [{"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"],
                 "status": "completed"} for m in messages]
        answer = await http.post("/api/v1/ack/batch", json={"acknowledgments": acks})
        answer.raise_for_status()


async def measure(url: str, broker: CpuMeter, postgres: CpuMeter, args) -> None:
    queue = f"cycle-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        await rounds(http, queue, args.warmup, args.push_batch, args.partitions, 0)
        broker.sample()
        postgres.sample()
        started = time.perf_counter()
        await rounds(http, queue, args.cycles, args.push_batch, args.partitions, args.warmup)
        wall = time.perf_counter() - started
        broker_cores = broker.sample()[0]
        postgres_cores = postgres.sample()[0]
    per = 1e6 / args.cycles
    print(f"{args.cycles:,} rounds of push {args.push_batch} / pop / ack over {args.partitions} partitions: "
          f"wall {wall * per:,.0f} µs, broker CPU {broker_cores * wall * per:,.0f} µs, "
          f"PostgreSQL CPU {postgres_cores * wall * per:,.0f} µs per round")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--push-batch", type=int, default=8)
    parser.add_argument("--partitions", type=int, default=200)
    args = parser.parse_args()
    with OwnBroker(workers=2) as own:
        asyncio.run(measure(own.url, CpuMeter(lambda: broker_tree(own.process.pid)),
                            CpuMeter(postgres_of(str(own.data_dir))), args))


if __name__ == "__main__":
    main()
