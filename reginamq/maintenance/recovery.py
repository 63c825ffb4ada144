"""Finishing the two-phase transactions a broker left prepared on the member databases
(store/two_phase.py, docs/shards.md "Transactions across members"): one process, elected on the
catalog, looks every few seconds, and the first round runs as the process starts. A transaction
prepared longer ago than the bound is finished as its recorded outcome says, or rolled back
when none was recorded, so none stays in doubt longer than the bound and a round."""

from __future__ import annotations

from reginamq.maintenance import leader
from reginamq.store.sharded import ShardedStore


class RecoveryLoop(leader.ElectedLoop):
    LEASE_NAME = "two-phase-recovery"

    _store: ShardedStore

    async def round(self) -> dict[str, int]:
        return {"finished": await self._store.recover_transactions()}
