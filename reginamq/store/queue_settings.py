"""The queue options each broker process keeps a copy of (rq_queues, 005_queues.sql): small reads
of every queue's row, refreshed by their callers' caches when the options change (the
``rq_config`` notification, see notices.py) or when the copy ages out."""

from __future__ import annotations

from reginamq.store.database import Family, Row

ENCRYPTED_SQL = "SELECT name FROM rq_queues WHERE encryption_enabled"
FILL_WAITS_SQL = "SELECT name, min_pop_wait_ms FROM rq_queues WHERE min_pop_wait_ms > 0"
DIRECTORY_SQL = "SELECT name, namespace, task FROM rq_queues"
LEASE_TIMES_SQL = "SELECT name, lease_time FROM rq_queues"


class QueueSettings(Family):
    async def encrypted(self) -> frozenset[str]:
        """The names of the queues with ``encryptionEnabled``."""
        return frozenset(row[0] for row in await self._db.fetch(ENCRYPTED_SQL))

    async def fill_waits(self) -> dict[str, int]:
        """{queue name: minPopWaitTime in milliseconds} of the queues where it is set (above 0)."""
        return {row[0]: row[1] for row in await self._db.fetch(FILL_WAITS_SQL)}

    async def directory(self) -> list[Row]:
        """``(name, namespace, task)`` of every queue (namespace and task NULL where unset)."""
        return await self._db.fetch(DIRECTORY_SQL)

    async def lease_times(self) -> dict[str, int]:
        """{queue name: leaseTime in seconds} of every queue."""
        return {row[0]: row[1] for row in await self._db.fetch(LEASE_TIMES_SQL)}
