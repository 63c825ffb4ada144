"""What the run costs: CPU cores of the broker, of PostgreSQL and of the load generator itself,
the broker's resident memory and the database size, sampled once per report interval.

CPU is attributed by process tree, so the three figures do not overlap:

* broker: the ``reginamq serve`` process and all its descendants (granian workers), minus any
  PostgreSQL process;
* PostgreSQL: the postmaster whose command line names the broker's data folder and all its
  children (backends, WAL writer, autovacuum...) — or, for an external broker (``--url``), every
  process named ``postgres`` on the machine;
* generator: this bench process and its descendants (producer and consumer processes), minus
  the broker tree (an own broker is our child) and PostgreSQL.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import psutil

from reginamq.store import Store
from reginamq.store.database import Session

POSTGRES_NAMES = ("postgres", "postmaster")
CPU_PRESSURE = Path("/proc/pressure/cpu")  # Linux pressure stall information


def is_postgres(proc: psutil.Process) -> bool:
    try:
        return proc.name() in POSTGRES_NAMES or proc.name().startswith("pg_")
    except psutil.Error:
        return False


def tree(root_pid: int) -> list[psutil.Process]:
    """A process and all its descendants (empty if it is gone)."""
    try:
        root = psutil.Process(root_pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def broker_tree(root_pid: int) -> list[psutil.Process]:
    return [p for p in tree(root_pid) if not is_postgres(p)]


def all_postgres() -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["name"]) if p.info["name"] in POSTGRES_NAMES]


def postgres_of(data_dir: str) -> Callable[[], list[psutil.Process]]:
    """The processes of the PostgreSQL server whose postmaster runs on ``data_dir``."""
    found: dict = {}

    def finder() -> list[psutil.Process]:
        pid = found.get("pid")
        if pid is None or not psutil.pid_exists(pid):
            found.pop("pid", None)
            for proc in psutil.process_iter(["name", "cmdline"]):
                if proc.info["name"] in POSTGRES_NAMES and data_dir in " ".join(proc.info["cmdline"] or ()):
                    found["pid"] = proc.pid
                    break
            else:
                return []
        return tree(found["pid"])

    return finder


def listening_broker(url: str) -> int | None:
    """The top ``reginamq`` process listening on the URL's port, for an external broker on this machine."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1", "0.0.0.0"):
        return None
    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            proc = psutil.Process(conn.pid)
            with contextlib.suppress(psutil.Error):
                while (parent := proc.parent()) is not None and "reginamq" in " ".join(parent.cmdline()):
                    proc = parent
            return proc.pid
    return None


def process_clock() -> float:
    """Now, on the clock of psutil's process start times: the boot time plus the time since
    boot. The wall clock drifts from it, so on the wall clock a process started just after a
    sample could look older than the sample, and the backends a load opens in its first second
    would go uncounted for the whole first interval."""
    return psutil.boot_time() + time.clock_gettime(time.CLOCK_BOOTTIME)


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) one process has used so far: for a benchmark that times a
    single backend's work between two readings."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


class CpuMeter:
    """CPU cores used by a changing set of processes between two samples.

    A process seen for the first time counts from its start if it started after the previous
    sample, otherwise from now (its earlier CPU belongs to earlier intervals we did not watch).

    A process that ends between two samples counts too: its parent, once it reaps it, holds its
    CPU in its children's times (the postmaster reaps its autovacuum workers and backends), so
    every watched process's children's times are counted, less what an ended process had been
    counted for already. Watching only the live processes would lose the work of PostgreSQL's
    autovacuum workers, which start, vacuum a table and end within an interval.
    """

    def __init__(self, finder: Callable[[], list[psutil.Process]]):
        self.finder = finder
        # pid -> (its own CPU, its ended children's CPU, its parent's pid) at the previous sample
        self.last: dict[int, tuple[float, float, int]] = {}
        self.last_time: float | None = None  # process_clock(): compared with processes' start times
        self.last_tick: float | None = None  # monotonic: the interval's length, immune to clock steps
        self.busiest = 0.0

    def sample(self) -> tuple[float, float, list[psutil.Process]]:
        """``(cores, resident bytes, processes)`` since the previous sample."""
        now, tick = process_clock(), time.monotonic()
        spent = 0.0
        rss = 0.0
        current: dict[int, tuple[float, float, int]] = {}
        busiest = 0.0
        procs = self.finder()
        elapsed = (tick - self.last_tick) if self.last_tick else 0.0
        for proc in procs:
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    used = times.user + times.system
                    reaped = times.children_user + times.children_system
                    rss += proc.memory_info().rss
                    created = proc.create_time()
                    parent = proc.ppid()
            except psutil.Error:
                continue
            current[proc.pid] = (used, reaped, parent)
            previous = self.last.get(proc.pid)
            if previous is not None:
                own = used - previous[0]
                delta = own + reaped - previous[1]
            elif self.last_time is not None and created >= self.last_time - 0.02:  # start times are in ticks
                own, delta = used, used + reaped
            else:
                own = delta = 0.0
            spent += max(0.0, delta)
            if elapsed > 0:
                busiest = max(busiest, own / elapsed)
        for pid, (used, reaped, parent) in self.last.items():
            if pid not in current and parent in current:
                spent -= used + reaped  # its parent's children's times now hold all of it
        self.last = current
        self.last_time, self.last_tick = now, tick
        self.busiest = busiest
        return (max(0.0, spent) / elapsed if elapsed > 0 else 0.0), rss, procs


class CpuPressure:
    """The share of wall time in which at least one runnable task on the machine waited for a
    core (the ``some`` line of Linux's pressure stall information), between two samples.

    Broker, PostgreSQL and generator share the machine: when tasks wait for a core much of the
    time, a run's tail latency is scheduling, not a stall in the broker. None where the kernel
    does not report it.
    """

    def __init__(self, source: Path = CPU_PRESSURE):
        self.source = source
        self.last: tuple[float, float] | None = None

    def _total_seconds(self) -> float | None:
        try:
            for line in self.source.read_text().splitlines():
                if line.startswith("some "):
                    return int(line.rsplit("total=", 1)[1]) / 1e6
        except (OSError, ValueError, IndexError):
            pass
        return None

    def sample(self) -> float | None:
        total, now = self._total_seconds(), time.monotonic()
        previous, self.last = self.last, (None if total is None else (total, now))
        if total is None or previous is None or now <= previous[1]:
            return None
        return min(1.0, max(0.0, (total - previous[0]) / (now - previous[1])))


class SystemSampler:
    """The three CPU meters, the machine's CPU pressure, the broker's memory and the database
    size, sampled together."""

    def __init__(self, broker_finder, postgres_finder, database_url: str | None,
                 postgres_scope: str, broker_scope: str):
        self.broker = CpuMeter(broker_finder) if broker_finder else None
        self.postgres = CpuMeter(postgres_finder)
        self.generator = CpuMeter(self._generator_processes)
        self.pressure = CpuPressure()
        self.database_url = database_url
        self.postgres_scope = postgres_scope
        self.broker_scope = broker_scope
        self._excluded: set[int] = set()
        self._conn = None

    def _generator_processes(self) -> list[psutil.Process]:
        return [p for p in tree(psutil.Process().pid) if p.pid not in self._excluded and not is_postgres(p)]

    async def sample(self) -> dict:
        broker_cores = broker_rss = None
        if self.broker is not None:
            broker_cores, rss, procs = self.broker.sample()
            broker_rss = rss
            self._excluded = {p.pid for p in procs}
        pg_cores, _, pg_procs = self.postgres.sample()
        self._excluded |= {p.pid for p in pg_procs}
        gen_cores, _, _ = self.generator.sample()
        return {"cpu_broker": broker_cores, "cpu_pg": pg_cores, "cpu_gen": gen_cores,
                "cpu_gen_busiest": self.generator.busiest, "cpu_wait": self.pressure.sample(),
                "broker_rss_mb": None if broker_rss is None else broker_rss / 1e6,
                "db_mb": await self.database_mb()}

    async def database_mb(self) -> float | None:
        if not self.database_url:
            return None
        try:
            if self._conn is None or self._conn.is_closed():
                self._conn = await asyncpg.connect(self.database_url, timeout=5)
            size = await self._conn.fetchval("SELECT pg_database_size(current_database())", timeout=5)
            return size / 1e6
        except Exception:
            self._conn = None
            return None

    async def broker_traffic(self, since: float) -> dict:
        """What the broker's processes counted since ``since`` (a wall-clock instant, whole
        minutes: the process metrics keep a row a minute, see maintenance/process_metrics.py):
        push requests, pop attempts that asked the database and those that found nothing, the
        pops a push's announcement woke, ack requests and rq_ack calls. Empty without the
        database."""
        if not self.database_url:
            return {}
        try:
            if self._conn is None or self._conn.is_closed():
                self._conn = await asyncpg.connect(self.database_url, timeout=5)
            return await Store(Session(self._conn)).process_metrics.traffic_counts(
                datetime.fromtimestamp(since, UTC))
        except Exception:
            self._conn = None
            return {}

    async def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None
