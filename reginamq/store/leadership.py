"""Leader leases (rq_leader_leases; 007_maintenance.sql): one row per background loop that only
one process may run at a time, held by whoever keeps renewing it."""

from __future__ import annotations

from reginamq.store.database import Family

TAKE_SQL = "SELECT rq_take_leader_lease($1, $2, $3)"
RELEASE_SQL = "SELECT rq_release_leader_lease($1, $2)"


class Leadership(Family):
    async def take(self, name: str, holder: str, seconds: int) -> bool:
        """Takes or renews lease ``name`` for ``holder`` until ``seconds`` from now, atomically:
        True when it is free, expired or already ``holder``'s; False (nothing changed) while
        another holder's lease is live."""
        return bool(await self._db.fetchval(TAKE_SQL, name, holder, seconds))

    async def release(self, name: str, holder: str) -> bool:
        """Gives lease ``name`` back if ``holder`` holds it (True); another holder's lease, or none,
        is left as it is (False)."""
        return bool(await self._db.fetchval(RELEASE_SQL, name, holder))
