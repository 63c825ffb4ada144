"""The lease watcher: expired leases become hints, so no reader has to look for them.

A push and an ack that leaves data behind announce their partitions (waiters.py), but a lease
that runs out -- a consumer that crashed, or a span released by a retry and held back for the
queue's retryDelay -- announces nothing. Each broker process therefore asks, twice a second and
only while it has readers, for the expired leases of every queue (one query on the index of
spans in flight) and hands each to the readers of its (queue, group) as a hint, waking a
parked pop of that group. Idle readers then need no look-up of their own, which is what lets a
thousand queues with a consumer each wait without a query per consumer per second.
"""

from __future__ import annotations

from reginamq.common.periodic import Periodic
from reginamq.engine.hot_partitions import HotPartitions
from reginamq.engine.waiters import Waiters
from reginamq.store import Store

LOOK_SECONDS = 0.5
MAX_PER_LOOK = 10_000


class LeaseWatcher(Periodic):
    def __init__(self, store: Store, hot: HotPartitions, waiters: Waiters) -> None:
        super().__init__(LOOK_SECONDS, "lease_watcher")
        self._store, self._hot, self._waiters = store, hot, waiters

    async def tick(self) -> None:
        await self.look()

    async def look(self) -> int:
        """One look: hand the expired leases to the readers; how many reached a reader."""
        if not self._hot.has_readers():
            return 0
        rows = await self._store.messages.expired_leases(MAX_PER_LOOK)
        handed = 0
        for queue, group, partition_id in rows:
            if self._hot.lease_expired(queue, group, partition_id):
                handed += 1
                self._waiters.wake(queue, group)
        return handed
