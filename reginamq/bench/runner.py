"""One bench run: configure the queue, start the producer and consumer processes on a shared
clock, gather their interval snapshots, sample the system, drain, and build the final figures.

The parent does no load itself; it only aggregates, so its CPU stays small and is counted with
the generator's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import multiprocessing
import queue as queue_module
import signal
import time
from collections.abc import Callable

import aiohttp

from reginamq.bench import inprocess, load
from reginamq.bench.child import stop_processes
from reginamq.bench.config import BenchConfig
from reginamq.bench.display import Display
from reginamq.bench.latency import Interval
from reginamq.bench.report import line
from reginamq.bench.system import SystemSampler
from reginamq.bench.verify import Verifier, all_queues

START_DELAY_S = 2.0  # time for spawned processes to import and connect before the first instant
READ_GRACE_S = 0.25  # children send on the tick; the parent reads this much later
CONFIGURE_CONCURRENCY = 16


@dataclasses.dataclass
class Target:
    """Where the load goes and how its costs are found."""

    url: str | None  # None: the load calls the library (or nothing) on database_url
    database_url: str | None
    broker_finder: Callable | None
    postgres_finder: Callable
    description: str
    cpu_scope: str


async def configure_queue(cfg: BenchConfig, url: str) -> None:
    """Create the queues (and set only the options asked for) before any load, a few at a time so
    a thousand queues do not mean a thousand requests at once."""
    names = all_queues(cfg)
    pending = iter(names)  # shared by the workers: each name is taken once
    options = cfg.queue_options()

    async def configure(session) -> None:
        for name in pending:
            async with session.post(f"{url}/api/v1/configure", json={"queue": name, "options": options},
                                    timeout=aiohttp.ClientTimeout(total=30)) as response:
                if response.status != 200:
                    raise RuntimeError(f"configure {name} answered {response.status}: {await response.text()}")

    async with aiohttp.ClientSession() as session:
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(CONFIGURE_CONCURRENCY, len(names))):
                    group.create_task(configure(session))
        except ExceptionGroup as errors:
            raise errors.exceptions[0] from None


def interval_row(t: float, phase: str, interval: Interval, totals: Interval, seconds: float, system: dict) -> dict:
    c, tot = interval.counters, totals.counters
    h = interval.latency
    return {
        "t": round(t, 3), "phase": phase, "seconds": round(seconds, 3),
        **{key: tot[key] for key in ("offered", "accepted", "shed", "popped", "acked", "push_err", "pop_err",
                                     "ack_err", "push_err_msgs", "ack_err_msgs")},
        "interval": dict(c),
        "in_rate": c["accepted"] / seconds if seconds > 0 else 0.0,
        "out_rate": c["acked"] / seconds if seconds > 0 else 0.0,
        "p50_ms": h.percentile(50) / 1000, "p99_ms": h.percentile(99) / 1000, "p999_ms": h.percentile(99.9) / 1000,
        "max_ms": h.max / 1000, "ack_rtt_ms": interval.avg_ack_rtt_ms(),
        "pacer_lag_max_ms": interval.pacer_lag_max_ns / 1e6,
        **system,
    }


def final_figures(cfg: BenchConfig, rows: list[dict], totals: Interval, elapsed: float) -> dict:
    tot = totals.counters
    load_rows = [row for row in rows if row["phase"] == "load"] or rows
    load_seconds = sum(row["seconds"] for row in load_rows) or 1.0

    def mean(key):
        values = [row[key] for row in load_rows if row.get(key) is not None]
        return sum(values) / len(values) if values else None

    h = totals.latency
    return {
        "duration_s": cfg.duration, "elapsed_s": round(elapsed, 3), "interrupted": False,
        **{key: tot[key] for key in ("offered", "accepted", "shed", "popped", "acked", "push_err", "pop_err",
                                     "ack_err", "push_err_msgs", "ack_err_msgs", "push_reqs", "pop_reqs",
                                     "empty_pops", "ack_reqs")},
        "in_rate": sum(row["interval"]["accepted"] for row in load_rows) / load_seconds,
        "out_rate": sum(row["interval"]["acked"] for row in load_rows) / load_seconds,
        "p50_ms": h.percentile(50) / 1000, "p99_ms": h.percentile(99) / 1000, "p999_ms": h.percentile(99.9) / 1000,
        "max_ms": h.max / 1000, "mean_ms": h.mean() / 1000, "latency_samples": h.count,
        "ack_rtt_ms": totals.avg_ack_rtt_ms(),
        "cpu_broker": mean("cpu_broker"), "cpu_pg": mean("cpu_pg") or 0.0, "cpu_gen": mean("cpu_gen") or 0.0,
        "cpu_gen_busiest": max((row["cpu_gen_busiest"] for row in load_rows), default=0.0),
        "cpu_wait": mean("cpu_wait"),
        "broker_rss_mb_max": max((row["broker_rss_mb"] for row in rows if row.get("broker_rss_mb") is not None),
                                 default=None),
        "db_mb": next((row["db_mb"] for row in reversed(rows) if row.get("db_mb") is not None), None),
        "pacer_lag_max_ms": totals.pacer_lag_max_ns / 1e6,
        "drained": tot["popped"] >= tot["accepted"] * cfg.fanout and tot["acked"] >= tot["accepted"] * cfg.fanout,
    }


async def run(cfg: BenchConfig, target: Target, display: Display) -> tuple[list[dict], dict]:
    """Run the load and return (interval rows, final figures). Lines go to ``display``."""
    context = multiprocessing.get_context("spawn")
    reports = context.Queue()
    abort, stop = context.Event(), context.Event()
    if cfg.transport == "http":
        await configure_queue(cfg, target.url)
        delay = START_DELAY_S
        start_ns = time.monotonic_ns() + int(delay * 1e9)
        processes = [context.Process(target=load.consumer_main, args=(cfg, i, target.url, start_ns, reports, stop),
                                     name=f"bench-consumer-{i}", daemon=True) for i in range(cfg.consumer_procs)]
        processes += [context.Process(target=load.producer_main,
                                      args=(cfg, i, target.url, start_ns, reports, abort),
                                      name=f"bench-producer-{i}", daemon=True) for i in range(cfg.producer_procs)]
    else:
        database_url = target.database_url or ""  # the null transport needs none
        if cfg.transport == "library" and not database_url:
            raise ValueError("--transport library needs a database")
        await inprocess.configure(cfg, database_url, all_queues(cfg))
        delay = inprocess.START_DELAY_S
        start_ns = time.monotonic_ns() + int(delay * 1e9)
        processes = inprocess.processes(cfg, context, database_url, start_ns, reports, abort, stop)
    started_at = time.time() + delay
    sampler = SystemSampler(target.broker_finder, target.postgres_finder, target.database_url,
                            target.cpu_scope, target.description)
    interrupted = asyncio.Event()
    loop = asyncio.get_running_loop()
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum in previous:  # stop in order: producers, drain, consumers
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, interrupted.set)
    for process in processes:
        process.start()
    try:
        rows, final = await _collect(cfg, start_ns, reports, abort, stop, sampler, display, interrupted)
        final.update(await sampler.broker_traffic(started_at))
        return rows, final
    finally:
        for signum, handler in previous.items():
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError, TypeError):
                loop.remove_signal_handler(signum)
                signal.signal(signum, handler)
        abort.set()
        stop.set()
        stop_processes(processes, timeout=10)
        await sampler.close()


async def _collect(cfg, start_ns, reports, abort, stop, sampler, display, interrupted) -> tuple[list[dict], dict]:
    await asyncio.sleep(max(0.0, (start_ns - time.monotonic_ns()) / 1e9))
    await sampler.sample()  # the CPU baseline at the first instant
    report_ns = int(cfg.report * 1e9)
    rows: list[dict] = []
    totals, current = Interval(), Interval()
    producers_left, consumers_left = cfg.producer_procs, cfg.consumer_procs
    verifier = Verifier(cfg) if cfg.verify else None
    settled_checked = 0.0
    phase = "load"
    drain_deadline = None
    last_tick_ns = start_ns
    tick = 1
    stop_sent_at = None
    interrupted_at = 0

    def read_reports() -> None:
        nonlocal producers_left, consumers_left
        while True:
            try:
                snapshot = reports.get_nowait()
            except queue_module.Empty:
                return
            if verifier is not None and "verify" in snapshot:
                verifier.add(snapshot["verify"])
            current.add_snapshot(snapshot)
            totals.add_snapshot(snapshot)
            if snapshot["final"]:
                if snapshot["kind"] == "producer":
                    producers_left -= 1
                else:
                    consumers_left -= 1

    load_end_ns = start_ns + int(cfg.duration * 1e9)

    async def emit(now_ns: int) -> None:
        nonlocal current, last_tick_ns
        seconds = (now_ns - last_tick_ns) / 1e9
        row_phase = "load" if now_ns <= load_end_ns + report_ns // 10 else "drain"
        row = interval_row((now_ns - start_ns) / 1e9, row_phase, current, totals, seconds, await sampler.sample())
        rows.append(row)
        display.print(line(row))
        current = Interval()
        last_tick_ns = now_ns

    while True:
        await asyncio.sleep(0.1)
        read_reports()
        now = time.monotonic_ns()
        elapsed = (now - start_ns) / 1e9
        if now >= start_ns + tick * report_ns + int(READ_GRACE_S * 1e9):
            await emit(start_ns + tick * report_ns)
            tick += 1
        if interrupted.is_set() and not abort.is_set():
            display.print("interrupted: stopping the producers, then the consumers")
            interrupted_at = time.monotonic_ns()
            abort.set()
            drain_deadline = time.monotonic()
        if phase == "load" and producers_left == 0:
            phase = "drain"
            drain_deadline = min(drain_deadline or float("inf"), time.monotonic() + cfg.drain)
        if phase == "drain" and stop_sent_at is None:
            c = totals.counters
            expected = c["accepted"] * cfg.fanout
            if verifier is not None:  # done when every accepted message was acked, by every group
                done = False
                if time.monotonic() - settled_checked >= 0.5:
                    settled_checked = time.monotonic()
                    done = verifier.settled()
            else:
                done = cfg.consumers == 0 or (c["popped"] >= expected and c["acked"] >= expected)
            if done or time.monotonic() >= drain_deadline:
                stop.set()
                stop_sent_at = time.monotonic()
        c = totals.counters
        display.update(elapsed, phase, f"in {c['accepted']:,} out {c['acked']:,}")
        if stop_sent_at is not None and (consumers_left == 0 or time.monotonic() - stop_sent_at > 60):
            read_reports()
            now = time.monotonic_ns()
            if any(current.counters[key] for key in ("offered", "accepted", "popped", "acked", "push_err",
                                                     "pop_err", "ack_err")):
                await emit(now)
            final = final_figures(cfg, rows, totals, (now - start_ns) / 1e9)
            if verifier is not None:
                final["verify"] = verifier.results()
            if interrupted.is_set():
                final["interrupted"] = True
                final["duration_s"] = min(cfg.duration, (interrupted_at - start_ns) / 1e9)
            return rows, final

