"""The retention loop: keeps the database from growing.

Every ``interval`` seconds each broker process asks for the maintenance lease; the holder
deletes, in bounded steps, the segments no reader needs any more (``rq_retention_step``) and
the deduplication keys whose window has passed (``rq_dedup_purge_step``). Bounded steps keep
each transaction short, so pushes and pops never queue behind a long delete.
"""

from __future__ import annotations

import logging
import time

from reginamq.maintenance import leader

log = logging.getLogger("reginamq.retention")

STEP_ROWS = 1_000
DEDUP_STEP_ROWS = 10_000
MAX_SECONDS_PER_ROUND = 4.0


class RetentionLoop(leader.ElectedLoop):
    LEASE_NAME = "retention"

    async def round(self) -> dict[str, int]:
        """Run the steps until there is nothing left to do or the round's time is up."""
        deadline = time.monotonic() + MAX_SECONDS_PER_ROUND
        totals = {"segments": 0, "dedup_keys": 0}
        for key, sql, limit in (("segments", "SELECT rq_retention_step($1)", STEP_ROWS),
                                ("dedup_keys", "SELECT rq_dedup_purge_step($1)", DEDUP_STEP_ROWS)):
            while time.monotonic() < deadline:
                deleted = await self._run(lambda conn, sql=sql, limit=limit: conn.fetchval(sql, limit))
                totals[key] += deleted
                if deleted < limit:
                    break
        if any(totals.values()):
            log.debug("retention round: %s", totals)
        return totals
