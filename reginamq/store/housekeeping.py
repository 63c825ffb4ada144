"""Bounded clean-up steps over several tables, and the planner statistics of new tables: what
the elected stats loop (maintenance/stats_refresh.py) runs besides the refresh.

Each purge step deletes at most ``limit`` rows, in its own statement, and answers how many it
deleted: a caller repeats a step while it deletes a full ``limit``, so no step holds locks or
a backend for long however much there is to forget.
"""

from __future__ import annotations

from datetime import datetime

from reginamq.store.database import Family

ANALYZE_NEW_SQL = "SELECT rq_analyze_new_tables($1)"
TOMBSTONES_SQL = "SELECT rq_deleted_purge_step($1)"
EXPIRED_KEYS_SQL = "SELECT rq_kv_purge_step($1)"
IDLE_RINGS_SQL = "SELECT rq_eph_collect_step($1, $2)"
TRACES_SQL = "SELECT rq_traces_purge_step($2, $1)"


class Housekeeping(Family):
    async def analyze_new_tables(self, min_rows: int) -> int:
        """ANALYZEs the tables pushes and pops plan against that hold ``min_rows`` rows and were
        never analysed, so the plans made while they were nearly empty are replaced; answers how
        many tables it analysed."""
        return await self._db.fetchval(ANALYZE_NEW_SQL, min_rows)

    async def purge_tombstones(self, limit: int) -> int:
        """Forgets deleted messages' tombstones (rq_deleted) no pop can reach any more: before the
        first stored message, or of a deleted partition."""
        return await self._db.fetchval(TOMBSTONES_SQL, limit)

    async def purge_expired_keys(self, limit: int) -> int:
        """Deletes key/value rows past their expiry (readers already treat them as absent)."""
        return await self._db.fetchval(EXPIRED_KEYS_SQL, limit)

    async def collect_idle_rings(self, limit: int, idle_seconds: int) -> int:
        """Forgets ephemeral rings that hold nothing, lease nothing and had no push for
        ``idle_seconds``, with their groups' cursors; a ring named again starts anew."""
        return await self._db.fetchval(IDLE_RINGS_SQL, limit, idle_seconds)

    async def purge_traces(self, limit: int, before: datetime) -> int:
        """Deletes traces created before ``before``, the oldest first."""
        return await self._db.fetchval(TRACES_SQL, limit, before)
