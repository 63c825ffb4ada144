"""Dead letters (rq_dlq, 006_dlq.sql): paging, replay and purge."""

from __future__ import annotations

from datetime import datetime

from reginamq.store.database import Family, Row

PAGE_SQL = "SELECT * FROM rq_dlq_page($1, $2, $3, $4, $5, $6, $7)"
REPLAY_SQL = ("SELECT message_offset, partition_id::text, transaction_id, queue_name, partition_name "
              "FROM rq_dlq_replay($1, $2)")
PURGE_SQL = "SELECT rq_dlq_purge($1, $2, $3)"


class DeadLetters(Family):
    async def page(self, queue: str, group: str | None, partition: str | None, since: datetime | None,
                   until: datetime | None, limit: int, offset: int) -> list[Row]:
        """The dead letters of ``queue`` (narrowed to a group, a partition, a time range), oldest
        failure first; each row carries ``total``, the size of the whole filtered set."""
        return await self._db.fetch(PAGE_SQL, queue, group, partition, since, until, limit, offset)

    async def replay(self, entry_id: str, new_id: str) -> Row | None:
        """Appends the dead letter as a new message ``new_id`` at the end of its partition and
        removes the entry, atomically. ``None`` for an unknown entry; ``message_offset`` is
        NULL when its partition is gone (nothing changed)."""
        return await self._db.fetchrow(REPLAY_SQL, entry_id, new_id)

    async def purge(self, queue: str, group: str | None, partition: str | None) -> int:
        """Deletes the matching dead letters; answers how many."""
        return await self._db.fetchval(PURGE_SQL, queue, group, partition)
