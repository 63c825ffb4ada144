"""Retention's bounded steps (007_maintenance.sql): the due walks in creation order, the sweep
over a range of partition ids, the idle-partition cleanup and the purges behind them.

Every step is one statement and one short transaction, deletes at most what its bounds allow
and counts what its DELETE removed in ``rq_retention_totals`` under the worker that ran it, so
nothing is counted twice even when the retention lease changes hands mid-step; the caller keeps
the position each step answers and starts the next step there.
"""

from __future__ import annotations

import datetime
import uuid

from reginamq.store.database import Family, Row

PERIODS_SQL = "SELECT rq_retention_periods()"
DUE_SQL = "SELECT * FROM rq_retention_due_step($1, $2, $3, $4, $5, $6)"
STEP_SQL = "SELECT * FROM rq_retention_step($1, $2, $3, $4, $5, $6)"
IDLE_SQL = "SELECT * FROM rq_idle_partitions_step($1, $2, $3, $4, $5)"
DEDUP_SQL = "SELECT rq_dedup_purge_step($1)"
TOTALS_PURGE_SQL = "SELECT rq_retention_totals_purge()"


class Retention(Family):
    async def periods(self) -> list[int]:
        """The retention periods in use (the queues' retentionSeconds, maxWaitTimeSeconds and
        completedRetentionSeconds above 0), in seconds, distinct, ascending; empty for none."""
        return await self._db.fetchval(PERIODS_SQL)

    async def due_step(self, period: int, at: datetime.datetime, partition: uuid.UUID, base: int, window: int,
                       worker: int) -> Row:
        """One step of the due walk of ``period``: the next ``window`` segments in creation order
        after the position (``at``, ``partition``, ``base``) that were created more than
        ``period`` seconds ago; each that goes for its own queue's rules takes its partition's
        older segments with it, one that stays is passed. The row: ``segments``, ``messages``,
        ``evicted`` (deleted unconsumed), ``candidates`` (fewer than ``window``: the walk caught
        up) and the next position (``next_at``, ``next_partition``, ``next_base``)."""
        row = await self._db.fetchrow(DUE_SQL, period, at, partition, base, window, worker)
        assert row is not None  # the function answers one row on every path
        return row

    async def sweep_step(self, start: uuid.UUID, end: uuid.UUID | None, window: int, limit: int, worker: int,
                         grace: float) -> Row:
        """One step of the sweep of the id range [``start``, ``end``): of the next ``window``
        partitions that hold segments, deletes what is due, oldest first per partition and at
        most ``limit`` segments, leaving the partitions whose oldest segment fell due less than
        ``grace`` seconds ago to the due walks. The row: ``segments``, ``messages``, ``evicted``,
        ``next_from`` (NULL: the range is done) and ``overdue`` (seconds the oldest segment it
        deleted was overdue)."""
        row = await self._db.fetchrow(STEP_SQL, start, end, window, limit, worker, grace)
        assert row is not None  # the function answers one row on every path
        return row

    async def idle_step(self, start: uuid.UUID, end: uuid.UUID | None, window: int, idle_seconds: float,
                        worker: int) -> Row:
        """One step of the idle-partition cleanup of the id range [``start``, ``end``): of the
        next ``window`` partitions, deletes those empty, unleased, without a live deduplication
        key or a dead letter, and not written for ``idle_seconds``, with their cursors; a
        partition a push holds is skipped. The row: ``partitions`` (deleted) and ``next_from``
        (NULL: the range is done)."""
        row = await self._db.fetchrow(IDLE_SQL, start, end, window, idle_seconds, worker)
        assert row is not None  # the function answers one row on every path
        return row

    async def purge_dedup(self, limit: int) -> int:
        """Deletes up to ``limit`` deduplication keys whose window has passed, the oldest first;
        answers how many (fewer than ``limit``: none is left)."""
        return await self._db.fetchval(DEDUP_SQL, limit)

    async def purge_totals(self) -> int:
        """Forgets the retention counters of deleted queues; answers how many rows went."""
        return await self._db.fetchval(TOTALS_PURGE_SQL)
