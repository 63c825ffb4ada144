"""PgQueuer on the same machine and the same embedded PostgreSQL, in the shape closest to
`reginamq bench`'s throughput shape: open-loop producers enqueue batches of 100 jobs with
256-byte payloads, consumers dequeue in batches and complete every job (PgQueuer's
acknowledgement), and end-to-end latency is measured from each batch's *scheduled* instant
(coordinated omission corrected, as the bench does).

    pip install pgqueuer
    python benchmarks/pgqueuer/run.py --rate 5000 --duration 60

CPU is reported for PostgreSQL and for the PgQueuer processes (the consumers are PgQueuer's
"broker": they hold the dequeue/complete logic that reginamq runs in its server), so
msg/s per core compares with the bench's "per core of broker + PostgreSQL".
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import multiprocessing
import shutil
import struct
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import asyncpg
import psutil

from reginamq.bench import system

PAYLOAD_BYTES = 256
STAMP = struct.Struct("!d")  # the scheduled instant, at the front of each payload
ENTRYPOINT = "bench"


async def _install(database_url: str) -> None:
    from pgqueuer.db import AsyncpgDriver
    from pgqueuer.queries import Queries

    conn = await asyncpg.connect(database_url)
    try:
        queries = Queries(AsyncpgDriver(conn))
        if not await queries.schema_is_installed():
            await queries.install()
    finally:
        await conn.close()


def _produce(database_url: str, rate: float, batch: int, duration: float, start: float, results) -> None:
    async def main() -> None:
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.queries import Queries

        conn = await asyncpg.connect(database_url)
        queries = Queries(AsyncpgDriver(conn))
        interval, sent, lag = batch / rate, 0, 0.0
        n = 0
        while True:
            scheduled = start + n * interval
            if scheduled >= start + duration:
                break
            delay = scheduled - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            lag = max(lag, -delay)
            payload = STAMP.pack(scheduled) + b"x" * (PAYLOAD_BYTES - STAMP.size)
            await queries.enqueue([ENTRYPOINT] * batch, [payload] * batch, [0] * batch)
            sent += batch
            n += 1
        await conn.close()
        results.put(("produced", sent, lag))

    import uvloop

    uvloop.run(main())


def _consume(database_url: str, batch: int, stop_at: float, results) -> None:
    async def main() -> None:
        from pgqueuer.db import AsyncpgDriver
        from pgqueuer.qm import QueueManager
        from pgqueuer.queries import Queries

        conn = await asyncpg.connect(database_url)
        manager = QueueManager(Queries(AsyncpgDriver(conn)))
        latencies: list[float] = []

        @manager.entrypoint(ENTRYPOINT)
        async def handle(job) -> None:
            latencies.append(time.time() - STAMP.unpack_from(job.payload)[0])

        async def stop() -> None:
            await asyncio.sleep(max(0.0, stop_at - time.time()))
            manager.shutdown.set()

        stopper = asyncio.create_task(stop())
        await manager.run(batch_size=batch, dequeue_timeout=timedelta(seconds=1))
        stopper.cancel()
        await conn.close()
        results.put(("consumed", latencies))

    import uvloop

    uvloop.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, required=True, help="jobs per second offered")
    parser.add_argument("--duration", type=float, default=60)
    parser.add_argument("--drain", type=float, default=10)
    parser.add_argument("--push-batch", type=int, default=100)
    parser.add_argument("--dequeue-batch", type=int, default=100)
    parser.add_argument("--producers", type=int, default=1)
    parser.add_argument("--consumers", type=int, default=2, help="consumer processes")
    parser.add_argument("--database-url", default=None, help="default: an own embedded PostgreSQL")
    args = parser.parse_args()

    folder = server = None
    database_url = args.database_url
    if database_url is None:
        from reginamq.store.embedded import EmbeddedPostgres

        folder = Path(tempfile.mkdtemp(prefix="pgqueuer-bench-"))
        server = EmbeddedPostgres(folder / "pgdata")
        database_url = server.start()
    try:
        asyncio.run(_install(database_url))
        context = multiprocessing.get_context("spawn")
        results = context.Queue()
        start = time.time() + 3.0
        producers = [context.Process(target=_produce, args=(database_url, args.rate / args.producers,
                                                             args.push_batch, args.duration, start, results))
                     for _ in range(args.producers)]
        consumers = [context.Process(target=_consume, args=(database_url, args.dequeue_batch,
                                                             start + args.duration + args.drain, results))
                     for _ in range(args.consumers)]
        for process in producers + consumers:
            process.start()
        own = [psutil.Process(p.pid) for p in producers + consumers]
        pg_meter, own_meter = system.CpuMeter(system.all_postgres), system.CpuMeter(lambda: own)
        time.sleep(max(0.0, start - time.time()))
        pg_meter.sample(), own_meter.sample()
        time.sleep(args.duration)
        pg_cpu, own_cpu = pg_meter.sample()[0], own_meter.sample()[0]
        produced, lag, latencies = 0, 0.0, []
        for _ in producers + consumers:
            kind, *rest = results.get(timeout=args.drain + 120)
            if kind == "produced":
                produced += rest[0]
                lag = max(lag, rest[1])
            else:
                latencies += rest[0]
        for process in producers + consumers:
            process.join(30)
        latencies.sort()

        def pct(q: float) -> float:
            return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 if latencies else float("nan")

        version = importlib.metadata.version("pgqueuer")
        print(f"pgqueuer {version}: offered {args.rate:,.0f} jobs/s for {args.duration:.0f} s "
              f"(batches of {args.push_batch}, {PAYLOAD_BYTES} B), {args.consumers} consumer process(es), "
              f"dequeue batch {args.dequeue_batch}")
        print(f"  enqueued {produced:,} ({produced / args.duration:,.0f}/s), completed {len(latencies):,} "
              f"({len(latencies) / args.duration:,.0f}/s); worst producer lag {lag * 1000:.0f} ms")
        print(f"  e2e p50={pct(0.50):.1f} p99={pct(0.99):.1f} p99.9={pct(0.999):.1f} ms (from the scheduled instant)")
        print(f"  cpu: postgres={pg_cpu:.2f} pgqueuer processes={own_cpu:.2f} cores -> "
              f"{len(latencies) / args.duration / max(pg_cpu + own_cpu, 1e-9):,.0f} jobs/s per core")
    finally:
        if server is not None:
            server.stop()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
