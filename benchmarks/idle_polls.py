"""What an idle consumer costs: long polls of an empty queue, broker and PostgreSQL CPU a poll.

``--polls`` connections each loop ``GET /api/v1/pop/queue/<q>?wait=true&timeout=<ms>`` for a
named consumer group on a configured, empty queue (with ``--missing-queue``, on a queue that does
not exist: consumers started before their producers), for ``--duration`` seconds, against an own
broker (``reginamq serve --workers N`` on an embedded PostgreSQL in a temporary folder, as
``reginamq bench`` starts it). Every poll times out empty; CPU is sampled as the bench samples it.

    python benchmarks/idle_polls.py --polls 600 --duration 20 [--missing-queue]

Run it from outside the checkout (or with ``PYTHONPATH`` set) to choose which code the broker
runs: the broker is started with the same interpreter and inherits the path.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

import aiohttp

from reginamq.bench.broker import OwnBroker
from reginamq.bench.system import CpuMeter, broker_tree, postgres_of


async def poll(url: str, polls: int, duration: float, timeout_ms: int, missing: bool) -> int:
    """Polls answered in all, once every connection's loop has passed ``duration``."""
    queue = f"idle-{uuid.uuid4().hex[:8]}"
    answered = 0
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        if not missing:
            async with session.post(f"{url}/api/v1/configure", json={"queue": queue}) as response:
                response.raise_for_status()
        stop = time.monotonic() + duration
        params = {"wait": "true", "timeout": str(timeout_ms), "consumerGroup": "idle"}

        async def loop() -> None:
            nonlocal answered
            while time.monotonic() < stop:
                async with session.get(f"{url}/api/v1/pop/queue/{queue}", params=params) as response:
                    assert response.status == 204, f"an idle poll answered {response.status}"
                answered += 1

        await asyncio.gather(*(loop() for _ in range(polls)))
    return answered


def main(args: argparse.Namespace) -> None:
    with OwnBroker(workers=args.workers) as broker:
        broker_cpu = CpuMeter(lambda: broker_tree(broker.process.pid))
        postgres_cpu = CpuMeter(postgres_of(str(broker.data_dir)))
        broker_cpu.sample()
        postgres_cpu.sample()
        started = time.monotonic()
        answered = asyncio.run(poll(broker.url, args.polls, args.duration, args.timeout_ms, args.missing_queue))
        rate = answered / (time.monotonic() - started)
        broker_cores, postgres_cores = broker_cpu.sample()[0], postgres_cpu.sample()[0]
    polled = "a queue that does not exist" if args.missing_queue else "an empty queue"
    print(f"{args.polls} idle long polls (timeout {args.timeout_ms} ms) of {polled}, "
          f"broker --workers {args.workers}: {rate:,.0f} polls/s answered empty")
    print(f"  broker {broker_cores:.3f} + PostgreSQL {postgres_cores:.3f} cores: "
          f"{broker_cores / rate * 1e6:,.0f} + {postgres_cores / rate * 1e6:,.0f} µs a poll")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=600, help="connections polling at once")
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--timeout-ms", type=int, default=1000, help="each long poll's timeout")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--missing-queue", action="store_true", help="poll a queue nobody created")
    main(parser.parse_args())
