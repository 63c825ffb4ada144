"""Statistics (012_stats.sql): the refresh that books what moved, and the figures it leaves.

Counters and gauges are read from tables a refresh writes, so every process and node reads
the same figures; a read is as fresh as the last refresh (:meth:`Statistics.refreshed_at`).

A refresh runs in a REPEATABLE READ transaction of its own: the notes it books and deletes and
the gauges it writes describe one instant, or notes committed meanwhile would be deleted
unbooked and the gauges an incremental refresh carries forward would drift. The refreshes'
table lock is its first statement, before any snapshot is taken (neither SET TRANSACTION nor
LOCK takes one), so its snapshot comes after the previous refresh committed instead of before
(which would fail it with a serialization error).
"""

from __future__ import annotations

from datetime import datetime

from reginamq.store.database import Database, Executor, Family, Row

REPEATABLE_READ_SQL = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
REFRESH_LOCK_SQL = "LOCK TABLE rq_stats_state IN EXCLUSIVE MODE"
BEGIN_REFRESH_SQL = f"{REPEATABLE_READ_SQL}; {REFRESH_LOCK_SQL}"
REFRESH_SQL = "SELECT rq_stats_refresh($1, $2, $3)"
FULL_PASS_SQL = ("SELECT extract(epoch FROM clock_timestamp() - full_at)::float8 AS since, full_seconds "
                 "FROM rq_stats_state WHERE id = 1")
QUEUES_SQL = "SELECT * FROM rq_stats_queues($1)"
SERIES_SQL = "SELECT * FROM rq_stats_series($1, $2, $3, $4)"
GROUPS_SQL = "SELECT * FROM rq_stats_groups_of($1)"
STATE_SQL = "SELECT refreshed_at FROM rq_stats_state WHERE id = 1"
RETENTION_SQL = "SELECT * FROM rq_retention_totals_of()"


class Statistics(Family):
    async def refresh(self, bucket_seconds: int, keep_seconds: int, full: bool) -> int:
        """Books the notes of what moved since the last refresh into the current
        ``bucket_seconds`` bucket and the totals, forgets buckets older than ``keep_seconds``,
        and, on a ``full`` pass (and always the first), recounts the gauges over every partition
        and cursor; answers the number of queues. Serialised with every other refresh, so no
        note is booked twice; a note committed after the refresh's snapshot stays for the next.
        Runs in a transaction of its own, so not inside :meth:`Store.atomically
        <reginamq.store.Store.atomically>`."""
        database = self._db
        if not isinstance(database, Database):
            raise RuntimeError("a statistics refresh runs in a transaction of its own, not inside another")

        async def unit(session: Executor) -> int:
            await session.execute(BEGIN_REFRESH_SQL)
            return await session.fetchval(REFRESH_SQL, bucket_seconds, keep_seconds, full)

        return await database.atomically(unit)

    async def last_full_pass(self) -> Row | None:
        """``since``, the seconds since the last full pass began, and ``full_seconds``, how long
        it took; ``None`` before the first refresh."""
        return await self._db.fetchrow(FULL_PASS_SQL)

    async def queues(self, queue: str | None) -> list[Row]:
        """Totals and gauges of every queue by name (or of ``queue``: ``[]`` when there is no
        such queue) as of the last refresh; zeros for a queue no refresh has seen yet."""
        return await self._db.fetch(QUEUES_SQL, queue)

    async def series(self, queue: str | None, since: datetime, until: datetime, interval: int) -> list[Row]:
        """The buckets between ``since`` and ``until`` folded into ``interval``-second steps, one
        row per (step, queue) that has any, by step then queue name; every queue, or ``queue``.
        Counters are summed over the step, gauges are the step's last."""
        return await self._db.fetch(SERIES_SQL, queue, since, until, interval)

    async def groups(self, queue: str | None) -> list[Row]:
        """Each consumer group's backlog and partitions behind, per queue (or on ``queue``), by
        queue then group name, as of the last full pass."""
        return await self._db.fetch(GROUPS_SQL, queue)

    async def refreshed_at(self) -> datetime | None:
        """When the last refresh ran; ``None`` before the first."""
        return await self._db.fetchval(STATE_SQL)

    async def retention_totals(self) -> list[Row]:
        """Per queue, by name, what retention has deleted: ``segments``, ``messages``,
        ``evicted`` (messages some reader had not consumed) and ``partitions``; queues it
        deleted nothing of are absent."""
        return await self._db.fetch(RETENTION_SQL)
