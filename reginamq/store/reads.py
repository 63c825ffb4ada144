"""Reads by offset and partition discovery (014_reads.sql): a partition's segments from an
offset on, and a queue's partitions in creation order. Neither takes a lease, moves a cursor or
writes anything: two readers asking the same question get the same answer."""

from __future__ import annotations

from datetime import datetime

from reginamq.store.database import Family, Row

FETCH_SQL = ("SELECT entry, found, high_watermark, log_start, base_offset, created_at, txids, payloads, deleted "
             "FROM rq_fetch($1, $2, $3, $4, $5)")
CHANGED_SQL = ("SELECT found, safe_time, id::text, name, last_offset, log_start, last_write_at, created_at "
               "FROM rq_partitions_changed($1, $2, $3, $4, $5)")


class Reads(Family):
    async def records(self, queues: list[str], partitions: list[str], offsets: list[int], budgets: list[int],
                    call_budget: int) -> list[Row]:
        """For each entry ``i`` (1-based ``entry``) of the parallel lists, in entry order: first a
        row of its partition's bounds (``base_offset`` NULL; ``found`` false for a queue or
        partition that does not exist, with nothing after it), then, when the offset is within
        the bounds, the segments holding its offsets from there on (``base_offset``,
        ``created_at``, ``txids``, ``payloads`` and the ``deleted`` offsets among them) while
        their stored size stays within the entry's budget and what ``call_budget`` has left; the
        first segment of an entry always, while the call has any budget left. One statement,
        one snapshot: the bounds and the records agree."""
        return await self._db.fetch(FETCH_SQL, queues, partitions, offsets, budgets, call_budget)

    async def changed(self, queue: str, since: datetime | None, after_created: datetime | None,
                      after_id: str | None, limit: int) -> list[Row]:
        """One page of ``queue``'s partitions written at or after ``since`` (all of them without
        it), in creation order after the cursor (``after_created``, ``after_id``): up to
        ``limit + 1`` rows, so the caller knows whether a next page exists. Never empty: every
        row carries ``found`` and ``safe_time`` (every write before it is in this answer); a
        queue that does not exist is one row with ``found`` false, and an empty page one row
        with ``id`` NULL."""
        return await self._db.fetch(CHANGED_SQL, queue, since, after_created, after_id, limit)
