"""The background loops of one process, started after its broker and stopped before it.

Retention, the stats refresh, the timer fire and (over several member databases) the recovery
of two-phase transactions are elected loops or take their rows with
``SKIP LOCKED``, so every process runs all of them and the database decides who acts; each
process also samples its own metrics. None of them answers a request, so none is on the
request path: they share only the broker's store and meter.
"""

from __future__ import annotations

from reginamq.engine.broker import Broker
from reginamq.maintenance.process_metrics import ProcessMetrics
from reginamq.maintenance.recovery import RecoveryLoop
from reginamq.maintenance.retention import RetentionLoop
from reginamq.maintenance.stats_refresh import StatsLoop
from reginamq.maintenance.timer_fire import TimerFire
from reginamq.store.sharded import ShardedStore


class Maintenance:
    def __init__(self, broker: Broker):
        settings = broker.settings
        # Retention and the stats refresh keep each member database's own partitions, each
        # elected on that member (docs/shards.md, "Maintenance").
        members = broker.store.member_stores()
        self.retention = [RetentionLoop(store, settings.maintenance_interval, settings.retention_parallelism,
                                        settings.partition_idle_days) for store in members]
        self.stats_loop = [StatsLoop(store, settings.maintenance_interval) for store in members]
        self.process_metrics = ProcessMetrics(broker, settings.maintenance_interval)
        self.timer_fire = TimerFire(broker.store, broker.sealer)
        recovery = ([RecoveryLoop(broker.store, settings.maintenance_interval)]
                    if isinstance(broker.store, ShardedStore) else [])
        self._loops = (*self.retention, *self.stats_loop, self.process_metrics, self.timer_fire, *recovery)

    async def start(self) -> None:
        for loop in self._loops:
            loop.start()

    async def stop(self) -> None:
        for loop in reversed(self._loops):
            await loop.stop()
