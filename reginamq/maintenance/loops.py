"""The background loops of one process, started after its broker and stopped before it.

Retention, the stats refresh, the timer fire and (over several member databases) the recovery
of two-phase transactions are elected loops or take their rows with
``SKIP LOCKED``, so every process runs all of them and the database decides who acts; each
process also samples its own metrics. None of them answers a request, so none is on the
request path: they share only the broker's store and meter.

An application that embeds the broker (reginamq/library) may leave the database's upkeep to a
fleet of brokers on the same database (``elected=False``: no retention, stats, timers or
recovery here) and its process row to another (``metrics=False``); the member watch, this
process's own view of the deployment, always runs.
"""

from __future__ import annotations

from reginamq.common.periodic import Periodic
from reginamq.engine.broker import Broker
from reginamq.maintenance.member_watch import MemberWatch
from reginamq.maintenance.process_metrics import ProcessMetrics
from reginamq.maintenance.recovery import RecoveryLoop
from reginamq.maintenance.retention import RetentionLoop
from reginamq.maintenance.stats_refresh import StatsLoop
from reginamq.maintenance.timer_fire import TimerFire
from reginamq.store import Store
from reginamq.store.sharded import ShardedStore


class Maintenance:
    def __init__(self, broker: Broker, elected: bool = True, metrics: bool = True):
        settings = self._settings = broker.settings
        self._started = False
        self._elected = elected
        self._loops: list[Periodic] = []
        if metrics:
            self._loops.append(ProcessMetrics(broker, settings.maintenance_interval))
        if elected:
            self._loops.append(TimerFire(broker.store, broker.sealer))
        if isinstance(broker.store, ShardedStore):
            if elected:
                self._loops.append(RecoveryLoop(broker.store, settings.maintenance_interval))
            self._loops.append(MemberWatch(broker, settings.maintenance_interval, self._keep))
        # Retention and the stats refresh keep each member database's own partitions, each
        # elected on that member (docs/shards.md, "Maintenance").
        for store in broker.store.member_stores():
            self._keep(store)

    def _keep(self, store: Store) -> None:
        """Runs the retention and statistics loops of member ``store`` (started with the others,
        or at once for a member added while running), unless they are left to others."""
        if not self._elected:
            return
        settings = self._settings
        loops = [RetentionLoop(store, settings.maintenance_interval, settings.retention_parallelism,
                               settings.partition_idle_days), StatsLoop(store, settings.maintenance_interval)]
        self._loops += loops
        if self._started:
            for loop in loops:
                loop.start()

    async def start(self) -> None:
        self._started = True
        for loop in self._loops:
            loop.start()

    async def stop(self) -> None:
        for loop in reversed(self._loops):
            await loop.stop()
