"""The broker of one process: its settings, its store (database pool included), and the
per-process state the message plane shares (waiters, hints, cached options, the push and ack
fusions, the spool, the lease watcher, the meter), started and stopped together.

Everything here can be dropped: the truth is in the database, so a process that dies loses
only parked long polls and hints. What a database failure means for a client is decided in the
store (store/database.py), not here. The background loops that keep the database in shape
(maintenance/) run beside the broker and are started by the process (reginamq/process.py).
"""

from __future__ import annotations

import contextlib
import logging

from reginamq.common.errors import Unavailable
from reginamq.config import Settings
from reginamq.engine.ack_fusion import AckFusion
from reginamq.engine.autopilot import Autopilot
from reginamq.engine.encryption import Sealer
from reginamq.engine.hot_partitions import HotPartitions
from reginamq.engine.lease_watcher import LeaseWatcher
from reginamq.engine.meter import Meter
from reginamq.engine.pop import FillWaits, GroupPolicies, SweepPositions
from reginamq.engine.push_fusion import PushFusion
from reginamq.engine.spool import Spool
from reginamq.engine.waiters import Waiters
from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.sharded import ShardedStore

log = logging.getLogger("reginamq.broker")


class Broker:
    def __init__(self, settings: Settings):
        self.settings = settings
        # Parallel retention workers of the elected process take connections of their own.
        size = settings.pool_size + settings.retention_parallelism - 1
        self.databases = [Database(url, size) for url in settings.database_urls or [""]]
        self.database = self.databases[0]
        # several member databases (docs/shards.md): the same families, routed over them
        self.store = Store(self.database) if len(self.databases) == 1 else ShardedStore(self.databases)
        self.hot = HotPartitions()
        self.policies = GroupPolicies()
        self.autopilot = Autopilot()
        self.meter = Meter()
        self.waiters = Waiters(on_config_change=self._forget_options, hot=self.hot,
                               on_queue_change=self.policies.forget, on_push_wake=self.meter.woke)
        # this process wakes its own parked pops before its pushes and acks announce (waiters.py)
        self.store.messages.announce_through(self.waiters.wake_before_announcing)
        self.lease_watcher = LeaseWatcher(self.store, self.hot, self.waiters)
        self.sealer = Sealer.from_settings(settings)
        self.spool = Spool(settings.resolved_spool_dir(), self.store, self.sealer)
        self.acks = AckFusion(self.store, self.meter)
        self.pushes = PushFusion(self.store, self.sealer, self.spool, settings.push_flush_spacing_ms / 1000)
        self.sweeps = SweepPositions()
        self.fill_waits = FillWaits()

    def _forget_options(self) -> None:
        """A queue was configured somewhere: re-read the options (and namespaces) cached per process."""
        self.fill_waits.forget()
        self.sealer.forget()
        self.hot.forget_directory()
        self.policies.forget()

    async def start(self) -> None:
        if not self.settings.database_url:
            raise RuntimeError("no database URL: start through `reginamq serve`")
        for database in self.databases:
            await database.open()
        if isinstance(self.store, ShardedStore):
            await self.store.join()
        if not self.sealer.has_key:
            encrypted = frozenset()
            with contextlib.suppress(Unavailable):  # the database may be away: the spool copes
                encrypted = await self.sealer.encrypted_queues(self.store)
            if encrypted:
                log.warning("no encryption key (REGINAMQ_ENCRYPTION_KEY): pushes and pops of the encrypted "
                            "queue(s) %s will be refused by this broker", ", ".join(sorted(encrypted)[:20]))
        self.spool.start()
        await self.waiters.listen(self.store)
        self.lease_watcher.start()

    async def stop(self) -> None:
        await self.lease_watcher.stop()
        await self.waiters.stop()
        await self.spool.stop()
        for database in self.databases:
            await database.close()

    async def healthy(self) -> bool:
        return all([await database.healthy() for database in self.databases])
