"""Consumer groups as operators see and steer them (009_groups.sql): where each group stands on
each queue it reads, and the seek, delete and subscription changes.

A group reads a queue when it has a durable subscription there (rq_consumer_groups) or any
cursor. Lags are worked out from the group's cursor, or where its subscription will seed one,
in the statement's snapshot. Each method is one statement, atomic on its own.
"""

from __future__ import annotations

from datetime import datetime

from reginamq.store.database import Family, Row

# The group of queue-mode pops (the SQL knows this name too): it has no subscription.
QUEUE_MODE = "__QUEUE_MODE__"

SUMMARIES_SQL = """
SELECT s.*, floor(extract(epoch FROM now() - s.oldest_pending_at))::bigint AS max_time_lag
FROM rq_grp_summaries($1, $2) s
"""
PARTITION_PAGES_SQL = """
SELECT x.*, floor(extract(epoch FROM now() - x.oldest_pending_at))::bigint AS time_lag,
       x.span_end IS NOT NULL AND x.lease_expires_at > now() AS lease_active
FROM rq_grp_partition_pages($1, $2, $3, $4) x
"""
READS_QUEUE_SQL = "SELECT rq_group_reads_queue($1, $2)"
CONFLATES_SQL = "SELECT conflation FROM rq_consumer_groups WHERE queue_id = $1 AND name = $2"
DELETE_SQL = "SELECT * FROM rq_grp_delete($1, $2, $3)"
SEEK_SQL = "SELECT * FROM rq_grp_seek($1, $2, $3, $4)"
SUBSCRIBE_SQL = "SELECT * FROM rq_grp_subscribe($1, $2, $3, $4)"
REGISTER_SQL = "SELECT registered FROM rq_register_group($1, $2, $3, $4, $5)"
SUBSCRIPTION_SQL = ("SELECT subscription_mode, subscription_from, conflation FROM rq_consumer_groups "
                    "WHERE queue_id = $1 AND name = $2")


class ConsumerGroups(Family):
    async def summaries(self, group: str | None, queue: str | None) -> list[Row]:
        """One row per (group, queue) read, by group then queue name, optionally one group and
        one queue: partitions, cursors, live leases, lag, the oldest unconsumed message's push
        time and its age in seconds (``max_time_lag``), and the subscription. Queue mode
        appears only when ``group`` names it. ``[]`` when nothing matches."""
        return await self._db.fetch(SUMMARIES_SQL, group, queue)

    async def partition_pages(self, group: str, queue: str | None, limit: int, offset: int) -> list[Row]:
        """A page of ``group``'s partitions in each queue it reads (or in ``queue``), ``limit``
        by name from ``offset`` on per queue: its cursor, position, lag, ``time_lag`` seconds and
        lease (``lease_active`` when live now)."""
        return await self._db.fetch(PARTITION_PAGES_SQL, group, queue, limit, offset)

    async def reads_queue(self, queue_id: int, group: str) -> bool:
        """Whether ``group`` has a durable subscription or any cursor on queue ``queue_id``."""
        return bool(await self._db.fetchval(READS_QUEUE_SQL, queue_id, group))

    async def conflates(self, queue_id: int, group: str) -> bool:
        """Whether ``group``'s subscription to queue ``queue_id`` conflates (one message a
        partition); ``False`` without a subscription."""
        return bool(await self._db.fetchval(CONFLATES_SQL, queue_id, group))

    async def delete(self, group: str, queue: str | None, delete_metadata: bool) -> Row:
        """Forgets ``group``'s cursors on ``queue`` (or on every queue) and, with
        ``delete_metadata``, its subscriptions, atomically; answers how many ``cursors`` and
        ``subscriptions`` went, both NULL when the named queue does not exist."""
        return await self._db.fetchrow(DELETE_SQL, group, queue, delete_metadata)

    async def seek(self, group: str, queue: str, to_end: bool, at: datetime | None) -> Row:
        """Moves every cursor of ``group`` on ``queue`` to the end of each partition (``to_end``)
        or to just before the first message pushed at or after ``at``, creating the cursors it
        lacks and clearing leases and retry state, atomically. Answers ``updated`` and
        ``created`` counts: ``updated`` NULL when the queue does not exist, -1 when the group
        does not read it (nothing changed)."""
        return await self._db.fetchrow(SEEK_SQL, group, queue, to_end, at)

    async def subscribe(self, group: str, queue: str | None, mode: str, start: datetime | None) -> list[Row]:
        """Sets ``group``'s subscription (``mode``, ``start``) on ``queue`` (created there when
        missing) or on every queue it is subscribed to, atomically; only cursors created later
        follow it. One row (``queue_name``) per subscription changed; ``[]`` when the queue does
        not exist or the group has no subscription."""
        return await self._db.fetch(SUBSCRIBE_SQL, group, queue, mode, start)

    async def register(self, queue_ids: list[int], group: str, mode: str, start: datetime | None,
                       conflation: bool | None) -> int:
        """``group``'s durable subscription on each of ``queue_ids`` it has none on yet, as its
        first pop there registers it (``start`` NULL with mode ``new``: from now); answers how
        many it registered."""
        return await self._db.fetchval(REGISTER_SQL, queue_ids, group, mode, start, conflation)

    async def subscription(self, queue_id: int, group: str) -> Row | None:
        """``(subscription_mode, subscription_from, conflation)`` of ``group`` on queue
        ``queue_id``; ``None`` without a subscription."""
        return await self._db.fetchrow(SUBSCRIPTION_SQL, queue_id, group)
