"""The official client (queen-mq) as a program that sets nothing would run it, against its own broker.

Producers push one message at a time through the client's buffer (``.buffer()`` with the
values of its BUFFER_DEFAULTS: a flush every 100 messages or every second; an empty options
dict would not buffer at all), each to one of ``--partitions``
partitions, paced to ``--rate`` messages a second in all. Consumers are ``consume()`` loops left
at the client's defaults (autopilot on, so the broker sizes each pop; a 30-s long poll; the
client acks after the handler), ``--consumers`` of them over ``--consumer-procs`` processes.
Every payload carries its send instant, so the handler measures end-to-end latency.

The broker is ``reginamq serve --workers N`` on an embedded PostgreSQL in a temporary folder
(reginamq/bench/broker.py); its CPU and PostgreSQL's are sampled as ``reginamq bench`` samples
them, so the msg/s per core printed here is comparable with the bench's line for the same rate.

    python benchmarks/queen_client.py --rate 5000 --duration 30 --consumers 50
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import time
import uuid

from queen import Queen

from reginamq.bench.broker import OwnBroker
from reginamq.bench.latency import Histogram
from reginamq.bench.system import CpuMeter, broker_tree, postgres_of

PRODUCER_TASKS = 16  # per producer process: each pushes its share of partitions
BUFFER = {"message_count": 100, "time_millis": 1000}  # queen-mq's BUFFER_DEFAULTS


def produce(url: str, queue: str, rate: float, duration: float, partitions: int, index: int, procs: int,
            counts) -> None:
    async def run() -> None:
        async with Queen(url) as queen:
            share = rate / procs / PRODUCER_TASKS
            started = time.monotonic()

            async def task(slot: int) -> None:
                sent = 0
                while (elapsed := time.monotonic() - started) < duration:
                    due = int(elapsed * share)
                    while sent < due:
                        partition = f"p{(slot * procs + index + sent * PRODUCER_TASKS * procs) % partitions}"
                        await queen.queue(queue).partition(partition).buffer(BUFFER).push({"t": time.time()})
                        sent += 1
                    await asyncio.sleep(0.005)
                with counts.get_lock():
                    counts.value += sent

            await asyncio.gather(*(task(slot) for slot in range(PRODUCER_TASKS)))
            await queen.flush_all_buffers()

    asyncio.run(run())


def consume(url: str, queue: str, consumers: int, stop, results) -> None:
    async def run() -> None:
        latency = Histogram()
        handled = 0

        async def handler(messages) -> None:  # one message, or a list when autopilot sized a batch
            nonlocal handled
            now = time.time()
            for message in messages if isinstance(messages, list) else [messages]:
                handled += 1
                latency.record(max(0, int((now - message["data"]["t"]) * 1_000_000)))

        async with Queen(url) as queen:
            done = asyncio.Event()
            waiting = asyncio.get_running_loop().run_in_executor(None, stop.wait)
            waiting.add_done_callback(lambda _: done.set())
            await queen.queue(queue).concurrency(consumers).consume(handler, signal=done)
        results.put((handled, latency.percentile(50) / 1000, latency.percentile(99) / 1000))

    asyncio.run(run())


def main(args: argparse.Namespace) -> None:
    context = multiprocessing.get_context("spawn")
    queue = f"client-{uuid.uuid4().hex[:8]}"
    with OwnBroker(workers=args.workers) as broker:
        broker_cpu = CpuMeter(lambda: broker_tree(broker.process.pid))
        postgres_cpu = CpuMeter(postgres_of(str(broker.data_dir)))
        counts, stop, results = context.Value("q", 0), context.Event(), context.Queue()
        consumers = [context.Process(target=consume, args=(broker.url, queue, share, stop, results))
                     for share in _shares(args.consumers, args.consumer_procs)]
        for process in consumers:
            process.start()
        time.sleep(args.warmup)  # the consumers' first long polls are parked before the load
        producers = [context.Process(target=produce, args=(broker.url, queue, args.rate, args.duration,
                                                           args.partitions, index, args.producer_procs, counts))
                     for index in range(args.producer_procs)]
        broker_cpu.sample()
        postgres_cpu.sample()
        started = time.monotonic()
        for process in producers:
            process.start()
        for process in producers:
            process.join()
        elapsed = time.monotonic() - started
        broker_cores, postgres_cores = broker_cpu.sample()[0], postgres_cpu.sample()[0]
        time.sleep(args.drain)
        stop.set()
        handled, p50s, p99s = 0, [], []
        for _ in consumers:
            count, p50, p99 = results.get(timeout=120)
            handled += count
            p50s.append(p50)
            p99s.append(p99)
        for process in consumers:
            process.join(timeout=60)
    pushed = counts.value
    print(f"queen-mq client: {args.producer_procs} producer processes x {PRODUCER_TASKS} tasks pushing through "
          f"the buffer, {args.consumers} consume() workers over {args.consumer_procs} processes, "
          f"{args.partitions} partitions, broker --workers {args.workers}")
    print(f"  pushed {pushed:,} in {elapsed:.1f} s ({pushed / elapsed:,.0f}/s), handled {handled:,} "
          f"(after {args.drain:.0f} s of drain)")
    print(f"  e2e p50 {max(p50s):.1f} ms, p99 {max(p99s):.1f} ms (the worst consumer process's)")
    cores = broker_cores + postgres_cores
    print(f"  broker {broker_cores:.2f} + PostgreSQL {postgres_cores:.2f} cores: "
          f"{pushed / elapsed / cores:,.0f} msg/s per core of broker + PostgreSQL")


def _shares(total: int, procs: int) -> list[int]:
    return [total // procs + (1 if index < total % procs else 0) for index in range(procs)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=5000, help="messages a second offered, in all")
    parser.add_argument("--duration", type=float, default=30)
    parser.add_argument("--partitions", type=int, default=200)
    parser.add_argument("--consumers", type=int, default=50, help="consume() workers, in all")
    parser.add_argument("--consumer-procs", type=int, default=2)
    parser.add_argument("--producer-procs", type=int, default=2)
    parser.add_argument("--workers", type=int, default=1, help="the broker's worker processes")
    parser.add_argument("--warmup", type=float, default=3)
    parser.add_argument("--drain", type=float, default=10)
    main(parser.parse_args())
