"""``reginamq bench ceiling``: what the same PostgreSQL does for the same shape with no broker.

Producers INSERT batches of ``--push-batch`` rows (a ``--payload``-byte bytea each, one
statement per batch, one partition per batch like a push) into a plain table; consumers claim
and delete batches of ``--pop-batch`` rows (``FOR UPDATE SKIP LOCKED``, the classic PostgreSQL
job-queue claim), both closed loop, as fast as they can, for ``--duration``. The lesser of the
two rates is the database's sustainable rate per side for this shape: the denominator for the
broker's figure (``--broker-rate`` or the bench run just before).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import queue as queue_module
import time
import uuid

import asyncpg

from reginamq.bench.child import Reporter, child_setup, stop_processes
from reginamq.bench.config import BenchConfig, partition_name
from reginamq.bench.display import Display
from reginamq.bench.system import CpuMeter, is_postgres, tree

FIELDS = ("inserted", "deleted", "insert_err", "delete_err", "inserts", "deletes")
START_DELAY_S = 2.0
STATEMENT_TIMEOUT_S = 10.0
APPLICATION_NAME = "reginamq-bench-ceiling"

CREATE = "CREATE TABLE {t} (id bigserial PRIMARY KEY, partition text NOT NULL, payload bytea NOT NULL)"
INSERT = "INSERT INTO {t} (partition, payload) SELECT $1, unnest($2::bytea[])"
# ``= ANY(ARRAY(...))`` evaluates the claim once and deletes by primary key; the ``IN (...)``
# spelling lets the planner pick a semi-join that scans the whole backlog on every claim.
CLAIM = ("DELETE FROM {t} WHERE id = ANY(ARRAY(SELECT id FROM {t} ORDER BY id FOR UPDATE SKIP LOCKED LIMIT $1)) "
         "RETURNING id, partition, payload")


def writer_main(cfg: BenchConfig, index: int, database_url: str, table: str, connections: int,
                start_ns: int, reports, stop) -> None:
    child_setup()
    asyncio.run(_writers(cfg, index, database_url, table, connections, start_ns, reports, stop))


def reader_main(cfg: BenchConfig, index: int, database_url: str, table: str, connections: int,
                start_ns: int, reports, stop) -> None:
    child_setup()
    asyncio.run(_readers(cfg, index, database_url, table, connections, start_ns, reports, stop))


async def _loop(cfg, index, database_url, connections, start_ns, reports, kind, body) -> None:
    reporter = Reporter(kind, index, FIELDS, reports, start_ns, cfg.report)
    # No statement may outlive the run by much: a claim stuck behind a bloated backlog is cut off.
    pool = await asyncpg.create_pool(database_url, min_size=connections, max_size=connections,
                                     command_timeout=STATEMENT_TIMEOUT_S,
                                     server_settings={"application_name": APPLICATION_NAME})
    end_ns = start_ns + int(cfg.duration * 1e9)
    await asyncio.sleep(max(0.0, (start_ns - time.monotonic_ns()) / 1e9))
    report_task = asyncio.create_task(reporter.run())

    async def worker(slot: int) -> None:
        async with pool.acquire() as conn:
            n = 0
            while time.monotonic_ns() < end_ns:
                await body(conn, reporter, slot, n)
                n += 1

    try:
        await asyncio.wait_for(asyncio.gather(*(worker(slot) for slot in range(connections))),
                               timeout=cfg.duration + START_DELAY_S + STATEMENT_TIMEOUT_S)
    except TimeoutError:
        reporter.counters["delete_err" if kind == "reader" else "insert_err"] += 1
    finally:
        report_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await report_task
        reporter.send(final=True)
        await pool.close()


async def _writers(cfg, index, database_url, table, connections, start_ns, reports, stop) -> None:
    statement = INSERT.format(t=table)
    payloads = [bytes(cfg.payload)] * cfg.push_batch

    async def insert(conn, reporter, slot, n) -> None:
        partition = partition_name((n * connections + slot + index) % cfg.partitions)
        try:
            await conn.execute(statement, partition, payloads)
            reporter.counters["inserted"] += cfg.push_batch
        except Exception:
            reporter.counters["insert_err"] += 1
        reporter.counters["inserts"] += 1

    await _loop(cfg, index, database_url, connections, start_ns, reports, "writer", insert)


async def _readers(cfg, index, database_url, table, connections, start_ns, reports, stop) -> None:
    statement = CLAIM.format(t=table)

    async def claim(conn, reporter, slot, n) -> None:
        try:
            rows = await conn.fetch(statement, cfg.pop_batch)
            reporter.counters["deleted"] += len(rows)
            if not rows:
                await asyncio.sleep(0.001)
        except Exception:
            reporter.counters["delete_err"] += 1
        reporter.counters["deletes"] += 1

    await _loop(cfg, index, database_url, connections, start_ns, reports, "reader", claim)


async def run_ceiling(cfg: BenchConfig, database_url: str, postgres_finder, description: str,
                      display: Display) -> dict:
    """Run the raw-SQL shape for ``cfg.duration`` and return its figures."""
    table = f"rq_bench_ceiling_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(CREATE.format(t=table))
    finally:
        await conn.close()
    writers = readers = max(1, cfg.total_consumers)
    context = multiprocessing.get_context("spawn")
    reports, stop = context.Queue(), context.Event()
    start_ns = time.monotonic_ns() + int(START_DELAY_S * 1e9)
    wprocs, rprocs = cfg.producer_procs, cfg.consumer_procs
    processes = [context.Process(target=writer_main, daemon=True,
                                 args=(cfg, i, database_url, table, _share(writers, wprocs, i), start_ns, reports,
                                       stop)) for i in range(wprocs)]
    processes += [context.Process(target=reader_main, daemon=True,
                                  args=(cfg, i, database_url, table, _share(readers, rprocs, i), start_ns, reports,
                                        stop)) for i in range(rprocs)]
    display.print(f"reginamq bench ceiling -> {description} | push-batch={cfg.push_batch} pop-batch={cfg.pop_batch} "
                  f"payload={cfg.payload}B partitions={cfg.partitions} | {writers} writer and {readers} reader "
                  f"connections in {wprocs}+{rprocs} proc(s) | duration={cfg.duration:g} s")
    pg = CpuMeter(postgres_finder)
    totals = dict.fromkeys(FIELDS, 0)
    interval = dict.fromkeys(FIELDS, 0)
    generator = CpuMeter(lambda: [p for p in tree(os.getpid()) if not is_postgres(p)])
    pg_cores: list[float] = []
    gen_samples: list[float] = []
    for process in processes:
        process.start()
    try:
        await asyncio.sleep(max(0.0, (start_ns - time.monotonic_ns()) / 1e9))
        pg.sample()
        generator.sample()
        left = len(processes)
        tick, last = 1, start_ns
        while left:
            await asyncio.sleep(0.1)
            while True:
                try:
                    snapshot = reports.get_nowait()
                except queue_module.Empty:
                    break
                for key, value in snapshot["counters"].items():
                    totals[key] += value
                    interval[key] += value
                left -= snapshot["final"]
            now = time.monotonic_ns()
            display.update((now - start_ns) / 1e9, "ceiling", f"in {totals['inserted']:,} out {totals['deleted']:,}")
            due = start_ns + tick * int(cfg.report * 1e9)
            if now >= due + 250_000_000 and due <= start_ns + cfg.duration * 1e9 + 1e6:
                seconds = (due - last) / 1e9
                cores, gen_cores = pg.sample()[0], generator.sample()[0]
                pg_cores.append(cores)
                gen_samples.append(gen_cores)
                display.print(f"[{(due - start_ns) / 1e9:>5.0f}s] "
                              f"in={interval['inserted'] / seconds:,.0f}/s out={interval['deleted'] / seconds:,.0f}/s "
                              f"errors={interval['insert_err']}/{interval['delete_err']} | "
                              f"cpu pg={cores:.2f} gen={gen_cores:.2f}")
                interval = dict.fromkeys(FIELDS, 0)
                last, tick = due, tick + 1
    finally:
        stop.set()
        stop_processes(processes, timeout=30)
        await _drop(database_url, table)
    in_rate = totals["inserted"] / cfg.duration
    out_rate = totals["deleted"] / cfg.duration
    return {"in_rate": in_rate, "out_rate": out_rate, "per_side": min(in_rate, out_rate),
            "cpu_pg": sum(pg_cores) / len(pg_cores) if pg_cores else 0.0,
            "cpu_gen": sum(gen_samples) / len(gen_samples) if gen_samples else 0.0, **totals,
            "writers": writers, "readers": readers, "duration_s": cfg.duration}


async def _drop(database_url: str, table: str) -> None:
    """Drop the table; first end any statement of ours a killed process left running on it."""
    with contextlib.suppress(Exception):
        conn = await asyncpg.connect(database_url, timeout=10)
        try:
            await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE application_name = $1 AND pid <> pg_backend_pid()", APPLICATION_NAME)
            await conn.execute("SET lock_timeout = '10s'")
            await conn.execute(f"DROP TABLE IF EXISTS {table}")
        finally:
            await conn.close()


def _share(total: int, procs: int, index: int) -> int:
    return max(1, total // procs + (1 if index < total % procs else 0))


def ceiling_lines(result: dict, broker_rate: float | None) -> list[str]:
    lines = [f"[final {result['duration_s']:.0f}s] inserted={result['inserted']:,} deleted={result['deleted']:,} "
             f"errors={result['insert_err']}/{result['delete_err']} | in={result['in_rate']:,.0f}/s "
             f"out={result['out_rate']:,.0f}/s | cpu pg={result['cpu_pg']:.2f} gen={result['cpu_gen']:.2f}",
             f"  ceiling per side (lesser of in and out): {result['per_side']:,.0f} msg/s"]
    if broker_rate is not None and result["per_side"] > 0:
        lines.append(f"  broker/ceiling: {broker_rate:,.0f} / {result['per_side']:,.0f} = "
                     f"{broker_rate / result['per_side']:.2f}")
    return lines
