"""The stats loop: refreshes the statistics tables and forgets what no route needs any more.

Every ``interval`` seconds (or less often, when a refresh takes more than a fifth of the
time) each broker process asks for the ``stats`` lease (a row of its own in
``rq_leader_leases``, independent of retention); the holder runs one refresh
(``rq_stats_refresh``: counter deltas and gauges into the current 10-second bucket), then
bounded purge steps (store/housekeeping.py): tombstones of deleted messages no pop can reach
any more, the processes' metrics rows older than a week (process_metrics.py), key/value rows
past their expiry (readers already treat them as absent), ephemeral rings empty and idle for
ten minutes (engine/ephemeral.py), and traces older than ``REGINAMQ_TRACE_RETENTION_DAYS``
(7 by default; 0 keeps them forever).

Each round also gives the tables pushes and pops plan against their first planner
statistics as soon as they hold ``NEW_TABLE_ROWS`` rows (``rq_analyze_new_tables``): on a new
database the plans made while they were nearly empty would otherwise stay until autovacuum's
first ANALYZE, and cost more with every partition created meanwhile.

A full pass recounts the gauges over every partition and cursor, so it costs time with the
partitions (a PostgreSQL backend busy all that time); an incremental refresh reads only the
notes of what moved. So the loop runs a full pass only when full passes take at most
``FULL_PASS_SHARE`` of the time -- nearly always on a small database, where one is quick --
and at least every ``FULL_PASS_EVERY_SECONDS``, to correct the gauges for what moves a read
position without a note (a seek, a group deleted, retention).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from reginamq.engine import analytics, ephemeral
from reginamq.maintenance import leader, process_metrics

STEP_ROWS = 10_000
MAX_STEPS = 10
FULL_PASS_SHARE = 0.01
FULL_PASS_EVERY_SECONDS = 600.0
NEW_TABLE_ROWS = 1_000


def full_pass_due(since: float | None, took: float | None) -> bool:
    """Whether the next refresh is a full pass, given the seconds since the last one started
    and how long it took (None before the first)."""
    if since is None or took is None:
        return True
    return since >= min(took / FULL_PASS_SHARE, FULL_PASS_EVERY_SECONDS)


def trace_retention_days() -> float:
    try:
        return float(os.environ.get("REGINAMQ_TRACE_RETENTION_DAYS", "7"))
    except ValueError:
        return 7.0


class StatsLoop(leader.ElectedLoop):
    LEASE_NAME = "stats"
    MAX_DUTY_CYCLE = 0.2

    async def round(self) -> dict[str, int]:
        store = self._store
        analysed = await store.housekeeping.analyze_new_tables(NEW_TABLE_ROWS)
        full = full_pass_due(*await analytics.last_full_pass(store))
        totals = {"queues": await analytics.refresh(store, full), "tombstones": 0, "traces": 0,
                  "processMetrics": 0, "expiredKeys": 0, "idleRings": 0, "analysed": analysed}
        metrics_before = datetime.now(UTC) - timedelta(days=process_metrics.KEEP_DAYS)
        steps = [("tombstones", store.housekeeping.purge_tombstones),
                 ("processMetrics", lambda rows: store.process_metrics.purge_step(rows, metrics_before)),
                 ("expiredKeys", store.housekeeping.purge_expired_keys),
                 ("idleRings", lambda rows: store.housekeeping.collect_idle_rings(rows, ephemeral.IDLE_SECONDS))]
        days = trace_retention_days()
        if days > 0:
            traces_before = datetime.now(UTC) - timedelta(days=days)
            steps.append(("traces", lambda rows: store.housekeeping.purge_traces(rows, traces_before)))
        for key, step in steps:
            for _ in range(MAX_STEPS):
                deleted = await step(STEP_ROWS)
                totals[key] += deleted
                if deleted < STEP_ROWS:
                    break
        return totals
