"""The per-process broker: its settings, database pool and waiters, and how it talks to the database.

Every database call of a request goes through :meth:`Broker.run`, the one place that decides
what a database failure means for the client: a deadlock or serialization failure is retried
(the statement rolled back as a whole, so a retry is safe), a lost or refused connection is a
503 the client may retry, bad data PostgreSQL still caught is a 400. It is also where a process
notices that its database went away and came back, and says so once each way (:class:`Reachability`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg

from reginamq.config import Settings
from reginamq.engine.autopilot import Autopilot
from reginamq.engine.errors import BadRequest, Unavailable
from reginamq.engine.expiries import LeaseWatcher
from reginamq.engine.fusion import PushFusion
from reginamq.engine.hotlist import HotPartitions
from reginamq.engine.pop import FillWaits, GroupPolicies, SweepPositions
from reginamq.engine.sealing import Sealer
from reginamq.engine.spool import Spool
from reginamq.engine.waiters import Waiters
from reginamq.maintenance.process_metrics import Meter, ProcessMetrics
from reginamq.maintenance.retention import RetentionLoop
from reginamq.maintenance.stats import StatsLoop
from reginamq.maintenance.timer_fire import TimerFire
from reginamq.store.database import create_pool

log = logging.getLogger("reginamq.broker")

RETRIES = 3
# The connection itself may be unusable after these: it is terminated, never reused.
_BROKEN_CONNECTION = (OSError, asyncpg.InterfaceError, asyncpg.InternalClientError,
                      asyncpg.PostgresConnectionError, asyncpg.AdminShutdownError)
# The database cannot take this request now (a 503 the client may retry; a push is spooled).
_UNAVAILABLE = (
    *_BROKEN_CONNECTION,
    asyncio.TimeoutError,
    asyncpg.CannotConnectNowError,
    asyncpg.QueryCanceledError,
    asyncpg.TooManyConnectionsError,
    asyncpg.InsufficientResourcesError,  # includes a full disk
    asyncpg.ReadOnlySQLTransactionError,  # a standby, or a database switched to read-only
)
_RETRYABLE = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)
# asyncpg's pool logs each failed attempt to reopen its minimum of connections, with a traceback.
_POOL_RECONNECT = "Failed to restore the pool connection floor"


class Reachability:
    """Whether this process reaches its database, logged once a change: a warning when it goes
    (with the first error), and one when a call succeeds again (how long it was away and how
    many requests were answered 503 meanwhile). Every request that fails in between only counts."""

    def __init__(self) -> None:
        self.lost_at: float | None = None
        self.refused = 0

    def lost(self, error: BaseException | None) -> None:
        if self.lost_at is not None:
            return
        self.lost_at, self.refused = time.monotonic(), 0
        log.warning("database unavailable in process %d (%s): requests that need it are answered 503 and "
                    "pushes are spooled on disk until it is back", os.getpid(),
                    (str(error) or type(error).__name__) if error is not None else "no connection")

    def back(self) -> None:
        if self.lost_at is None:
            return
        log.warning("database available again in process %d after %.1f s; %d request(s) were answered 503 "
                    "meanwhile", os.getpid(), time.monotonic() - self.lost_at, self.refused)
        self.lost_at = None

    def refuse(self) -> None:
        """A request was answered 503."""
        if self.lost_at is not None:
            self.refused += 1


class _PoolReconnects(logging.Filter):
    """Turns asyncpg's warning for each failed reconnect of the pool into news of the outage."""

    def __init__(self, reachability: Reachability):
        super().__init__()
        self._reachability = reachability

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(_POOL_RECONNECT):
            return True
        self._reachability.lost(record.exc_info[1] if record.exc_info else None)
        return False


class Broker:
    def __init__(self, settings: Settings):
        self.settings = settings
        self.hot = HotPartitions()
        self.policies = GroupPolicies()
        self.autopilot = Autopilot()
        self.waiters = Waiters(on_config_change=self._forget_options, hot=self.hot,
                               on_queue_change=self.policies.forget)
        self.lease_watcher = LeaseWatcher(self.run, self.hot, self.waiters)
        self.pool: asyncpg.Pool | None = None
        self.sealer = Sealer.from_settings(settings)
        self.spool = Spool(settings.resolved_spool_dir(), self.run, self.sealer)
        self.pushes = PushFusion(self.run, self.sealer, self.spool, settings.push_flush_spacing_ms / 1000)
        self.sweeps = SweepPositions()
        self.fill_waits = FillWaits()
        self.retention = RetentionLoop(self.run, settings.maintenance_interval,
                                       settings.retention_parallelism, settings.partition_idle_days)
        self.stats_loop = StatsLoop(self.run, settings.maintenance_interval)
        self.meter = Meter()
        self.process_metrics = ProcessMetrics(self, settings.maintenance_interval)
        self.timer_fire = TimerFire(self.run, self.sealer)
        self.reachability = Reachability()
        self._pool_reconnects = _PoolReconnects(self.reachability)

    def _forget_options(self) -> None:
        """A queue was configured somewhere: re-read the options (and namespaces) cached per process."""
        self.fill_waits.forget()
        self.sealer.forget()
        self.hot.forget_directory()
        self.policies.forget()

    async def start(self) -> None:
        dsn = self.settings.database_url
        if not dsn:
            raise RuntimeError("no database URL: start through `reginamq serve`")
        logging.getLogger("asyncpg.pool").addFilter(self._pool_reconnects)
        # Parallel retention workers of the elected process take connections of their own.
        size = self.settings.pool_size + self.settings.retention_parallelism - 1
        try:
            self.pool = await create_pool(dsn, size)
        except _UNAVAILABLE as error:
            # A worker (re)started while the database is away serves all the same (spooling pushes,
            # answering 503): its connections open once the database answers again.
            self.reachability.lost(error)
            self.pool = await create_pool(dsn, size, warm=0)
        if not self.sealer.has_key:
            encrypted = frozenset()
            with contextlib.suppress(Unavailable):  # the database may be away: the spool copes
                encrypted = await self.run(self.sealer.encrypted_queues)
            if encrypted:
                log.warning("no encryption key (REGINAMQ_ENCRYPTION_KEY): pushes and pops of the encrypted "
                            "queue(s) %s will be refused by this broker", ", ".join(sorted(encrypted)[:20]))
        self.spool.start()
        await self.waiters.listen(dsn)
        self.lease_watcher.start()
        self.retention.start()
        self.stats_loop.start()
        self.process_metrics.start()
        self.timer_fire.start()

    async def stop(self) -> None:
        await self.timer_fire.stop()
        await self.retention.stop()
        await self.stats_loop.stop()
        await self.process_metrics.stop()
        await self.lease_watcher.stop()
        await self.waiters.stop()
        await self.spool.stop()
        if self.pool is not None:
            await self.pool.close()
        logging.getLogger("asyncpg.pool").removeFilter(self._pool_reconnects)

    async def run(self, call: Callable[[asyncpg.Connection], Awaitable[Any]]) -> Any:
        if self.pool is None:
            raise Unavailable("the broker is not connected to its database")
        for attempt in range(RETRIES):
            try:
                async with self.pool.acquire(timeout=10) as conn:
                    try:
                        result = await call(conn)
                    except _BROKEN_CONNECTION:
                        conn.terminate()  # never hand a connection in an unknown state to the next request
                        raise
                if self.reachability.lost_at is not None:
                    self.reachability.back()
                return result
            except _RETRYABLE:
                if attempt == RETRIES - 1:
                    raise Unavailable("the database kept aborting this request; retry") from None
                await asyncio.sleep(0.01 * (attempt + 1))
            except _UNAVAILABLE as error:
                self.reachability.lost(error)
                raise Unavailable("database unavailable") from error
            except asyncpg.DataError as error:
                raise BadRequest(f"invalid value: {error}") from error
        raise AssertionError("unreachable")

    async def healthy(self) -> bool:
        try:
            await self.run(lambda conn: conn.fetchval("SELECT 1"))
            return True
        except Unavailable:
            return False
