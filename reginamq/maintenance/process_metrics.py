"""What this process did and what it cost, a row a minute: Queen's system and worker metrics.

Queen's admin API (``GET /api/v1/analytics/system-metrics`` and ``/worker-metrics``) reads
per-replica time series that every server process records about itself. Here each process
counts its requests and messages as it answers them (:class:`Meter`: a few integer additions a
request, nothing shared) and samples its gauges once a second (CPU, memory, database pool,
event-loop lag, requests in flight, parked long polls). Every ``interval`` seconds it rewrites
the current minute's row with the minute's totals so far (013_process_metrics.sql), and once
a minute is over it writes that minute's last figures and starts the next. Only the process
itself writes its rows, so nothing is elected and no process waits for another; a write that
meets an unavailable database is kept and made at the next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import socket
import time
from datetime import UTC, datetime

import orjson

from reginamq.common.errors import Unavailable
from reginamq.common.periodic import Periodic

SAMPLE_SECONDS = 1.0
KEEP_DAYS = 7
FINAL_WRITE_SECONDS = 2.0
MAX_WAITING_MINUTES = 60  # rows kept while the database is away; older ones are dropped
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_STARTED = time.monotonic()


class Gauge:
    """avg / min / max / last of one gauge over a minute's samples, as Queen keeps them."""

    __slots__ = ("count", "high", "last", "low", "total")

    def __init__(self) -> None:
        self.total, self.low, self.high, self.last, self.count = 0.0, None, 0.0, 0.0, 0

    def add(self, value: float) -> None:
        self.total += value
        self.low = value if self.low is None else min(self.low, value)
        self.high = max(self.high, value)
        self.last = value
        self.count += 1

    def average(self) -> float:
        return self.total / self.count if self.count else 0.0

    def as_json(self) -> dict:
        return {"avg": round(self.average(), 2), "min": self.low or 0, "max": self.high, "last": self.last}


def _memory() -> tuple[int, int]:
    """Resident and virtual bytes of this process."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            size, resident = statm.read().split()[:2]
        return int(resident) * _PAGE_BYTES, int(size) * _PAGE_BYTES
    except OSError:  # not Linux: the peak resident size is what there is
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak * 1024, 0


class ProcessMetrics(Periodic):
    """Samples once a second; writes the current minute's row every ``interval`` seconds."""

    GAUGES = ("cpu_user", "cpu_system", "rss", "virtual", "pool_size", "pool_idle", "pool_active", "loop_lag",
              "in_flight", "parked")

    def __init__(self, broker, interval: float):
        super().__init__(min(SAMPLE_SECONDS, interval), "process-metrics")
        self._broker = broker
        self._write_every = interval
        self._identity = (socket.gethostname(), broker.settings.port, os.getpid())
        self._minute = self._current_minute()
        self._gauges = {name: Gauge() for name in self.GAUGES}
        self._cpu = os.times()
        self._sampled_at = time.monotonic()
        self._due = self._sampled_at
        self._written_at = self._sampled_at
        self._waiting: dict[datetime, tuple] = {}  # rows not written yet, by minute

    @staticmethod
    def _current_minute() -> datetime:
        return datetime.now(UTC).replace(second=0, microsecond=0)

    def pause(self, busy: float) -> float:
        self._due = time.monotonic() + self._interval
        return self._interval

    async def tick(self) -> None:
        minute = self._current_minute()
        if minute != self._minute:
            self._waiting[self._minute] = self._row()
            self._minute = minute
            self._gauges = {name: Gauge() for name in self.GAUGES}
            self._broker.meter.reset()
        self._sample()
        if time.monotonic() - self._written_at >= self._write_every or self._waiting:
            self._waiting[self._minute] = self._row()
            await self.write()

    async def stop(self) -> None:
        """Stop sampling and write what this minute has so far, unless the database does not
        take it within ``FINAL_WRITE_SECONDS`` (away, or slow): a stop does not wait for figures."""
        await super().stop()
        self._waiting[self._minute] = self._row()
        with contextlib.suppress(Unavailable, TimeoutError):
            await asyncio.wait_for(self.write(), FINAL_WRITE_SECONDS)

    async def write(self) -> None:
        """Write the rows waiting, oldest first; those the database did not take wait for the next tick."""
        for minute in sorted(self._waiting)[:-MAX_WAITING_MINUTES]:
            del self._waiting[minute]
        rows = [self._waiting[minute] for minute in sorted(self._waiting)]
        await self._broker.store.process_metrics.write(rows)
        self._waiting.clear()
        self._written_at = time.monotonic()

    def _sample(self) -> None:
        now, cpu = time.monotonic(), os.times()
        wall = max(now - self._sampled_at, 1e-6)
        gauges = self._gauges
        # percent x 100 of one core, as Queen stores CPU
        gauges["cpu_user"].add(round((cpu.user - self._cpu.user) / wall * 10_000))
        gauges["cpu_system"].add(round((cpu.system - self._cpu.system) / wall * 10_000))
        self._cpu, self._sampled_at = cpu, now
        resident, virtual = _memory()
        gauges["rss"].add(resident)
        gauges["virtual"].add(virtual)
        size, idle, _ = self._broker.database.pool_sizes()
        gauges["pool_size"].add(size)
        gauges["pool_idle"].add(idle)
        gauges["pool_active"].add(size - idle)
        gauges["loop_lag"].add(max(0.0, now - self._due) * 1000)
        gauges["in_flight"].add(self._broker.meter.in_flight)
        gauges["parked"].add(self._broker.waiters.parked)

    def _row(self) -> tuple:
        meter, gauges = self._broker.meter, self._gauges
        system = {
            "cpu": {"user_us": gauges["cpu_user"].as_json(), "system_us": gauges["cpu_system"].as_json()},
            "memory": {"rss_bytes": gauges["rss"].as_json(), "virtual_bytes": gauges["virtual"].as_json()},
            "database": {"pool_size": gauges["pool_size"].as_json(), "pool_idle": gauges["pool_idle"].as_json(),
                         "pool_active": gauges["pool_active"].as_json()},
            "eventLoop": {"lag_ms": gauges["loop_lag"].as_json()},
            "requests": {"in_flight": gauges["in_flight"].as_json(), "parked_pops": gauges["parked"].as_json()},
            "pops": {"queries": meter.pop_queries, "empty_queries": meter.empty_queries,
                     "push_notices": meter.push_notices, "woken_by_push": meter.wakeups},
            "acks": {"calls": meter.ack_calls},
            "uptime_seconds": round(time.monotonic() - _STARTED),
        }
        hostname, port, pid = self._identity
        return (self._minute, hostname, port, pid, gauges["cpu_user"].count, orjson.dumps(system).decode(),
                meter.push_messages, meter.pop_messages, meter.ack_messages, meter.push_requests,
                meter.pop_requests, meter.ack_requests, meter.requests, meter.ack_failed, meter.dead_lettered,
                meter.db_errors, gauges["loop_lag"].average(), gauges["loop_lag"].high,
                gauges["pool_idle"].average(), int(gauges["pool_idle"].low or 0), int(gauges["pool_size"].high),
                gauges["in_flight"].average(), int(gauges["in_flight"].high), int(gauges["parked"].high),
                meter.lag_count, meter.lag_sum_ms, meter.lag_max_ms, orjson.dumps(meter.queues).decode())

