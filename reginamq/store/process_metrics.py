"""The processes' own metrics (rq_process_metrics, 013_process_metrics.sql): a row a minute per
broker process, written only by that process, and the two answers Queen's process analytics
read from them, rendered as JSON by PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from reginamq.store.database import Family

WRITE_SQL = """
INSERT INTO rq_process_metrics VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17,
                                       $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28)
ON CONFLICT (bucket, hostname, port, pid) DO UPDATE SET
    sample_count = EXCLUDED.sample_count, system = EXCLUDED.system, push_messages = EXCLUDED.push_messages,
    pop_messages = EXCLUDED.pop_messages, ack_messages = EXCLUDED.ack_messages,
    push_requests = EXCLUDED.push_requests, pop_requests = EXCLUDED.pop_requests,
    ack_requests = EXCLUDED.ack_requests, requests = EXCLUDED.requests, ack_failed = EXCLUDED.ack_failed,
    dead_lettered = EXCLUDED.dead_lettered, db_errors = EXCLUDED.db_errors,
    loop_lag_avg_ms = EXCLUDED.loop_lag_avg_ms, loop_lag_max_ms = EXCLUDED.loop_lag_max_ms,
    idle_connections_avg = EXCLUDED.idle_connections_avg, idle_connections_min = EXCLUDED.idle_connections_min,
    connections_max = EXCLUDED.connections_max, in_flight_avg = EXCLUDED.in_flight_avg,
    in_flight_max = EXCLUDED.in_flight_max, parked_max = EXCLUDED.parked_max, lag_count = EXCLUDED.lag_count,
    lag_sum_ms = EXCLUDED.lag_sum_ms, lag_max_ms = EXCLUDED.lag_max_ms, queues = EXCLUDED.queues
"""
SYSTEM_SQL = "SELECT rq_system_metrics($1, $2, $3, $4)::text"
WORKER_SQL = "SELECT rq_worker_metrics($1, $2, $3, $4)::text"
PURGE_SQL = "SELECT rq_process_metrics_purge_step($1, $2)"
TRAFFIC_COUNTS_SQL = "SELECT * FROM rq_traffic_counts($1)"


class ProcessMetrics(Family):
    async def write(self, rows: Sequence[Sequence[Any]]) -> None:
        """Writes each row (every column of rq_process_metrics, in table order), replacing the
        row of the same minute, host, port and process."""
        await self._db.executemany(WRITE_SQL, rows)

    async def system(self, since: datetime, until: datetime, hostname: str | None, pid: int | None) -> str:
        """Queen's system-metrics answer as JSON text: a series per process, a point a minute,
        oldest first, for the minutes from ``since`` to ``until`` (of one host and one process
        when named)."""
        return await self._db.fetchval(SYSTEM_SQL, since, until, hostname, pid)

    async def workers(self, since: datetime, until: datetime, hostname: str | None, pid: int | None) -> str:
        """Queen's worker-metrics answer as JSON text: throughput and health summed into buckets
        that widen with the range, newest first, over the same rows as :meth:`system`."""
        return await self._db.fetchval(WORKER_SQL, since, until, hostname, pid)

    async def purge_step(self, limit: int, before: datetime) -> int:
        """Deletes at most ``limit`` rows of minutes before ``before``; answers how many."""
        return await self._db.fetchval(PURGE_SQL, limit, before)

    async def traffic_counts(self, since: datetime) -> dict[str, int]:
        """What every process counted from the minute of ``since`` on: push requests
        (``pushes``), pop attempts that asked the database (``pop_queries``) and those that found
        nothing (``empty_queries``), push announcements heard (``push_notices``: by every process)
        and the parked pops they woke (``woken_by_push``), ack requests (``ack_requests``) and the
        rq_ack calls that applied them (``ack_calls``: fewer when acks were fused)."""
        return dict(await self._db.fetchrow(TRAFFIC_COUNTS_SQL, since))
