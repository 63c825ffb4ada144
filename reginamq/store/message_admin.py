"""Operator access to single messages (010_messages.sql): browse a page, read one, delete one,
retry one.

A message is addressed by its partition id and transactionId. Its status is relative to one
reader (the queue-mode cursor or a named group): ``dead``, ``completed``, ``leased`` or
``pending``. Payloads come back as the stored fragments, sealed ones still sealed. Each
method is one statement, atomic on its own.
"""

from __future__ import annotations

from datetime import datetime

from reginamq.store.database import Family, Row

PAGE_SQL = ("SELECT partition_id::text, partition_name, transaction_id, created_at, status, payload, total "
            "FROM rq_messages_page($1, $2, $3, $4, $5, $6, $7, $8)")
GET_SQL = ("SELECT queue_name, partition_name, created_at, status, payload, dead_groups "
           "FROM rq_message_get($1, $2, $3)")
DELETE_SQL = "SELECT rq_message_delete($1, $2)"
RETRY_SQL = ("SELECT message_offset, queue_name, partition_name, removed_dead_letters "
             "FROM rq_message_retry($1, $2, $3)")


class MessageAdmin(Family):
    async def page(self, queue: str, partition: str | None, group: str, status: str | None,
                   since: datetime | None, until: datetime | None, limit: int, offset: int) -> list[Row]:
        """A page of ``queue``'s messages, newest first, narrowed to a partition, a status for
        ``group`` and a push-time range. Each row is (partition id as text, partition name,
        transactionId, pushed at, status, stored fragment, ``total`` of the filtered set), in
        that order; ``[]`` past the end or for an unknown queue."""
        return await self._db.fetch(PAGE_SQL, queue, partition, group, status, since, until, limit, offset)

    async def get(self, partition_id: str, txid: str, group: str) -> Row | None:
        """The message (the newest one, should a transactionId repeat in the partition) with
        its status for ``group`` and ``dead_groups``, the readers it is dead-lettered for;
        ``None`` when there is no such live message."""
        return await self._db.fetchrow(GET_SQL, partition_id, txid, group)

    async def delete(self, partition_id: str, txid: str) -> int:
        """Tombstones every live message of the partition with this transactionId (offsets stay;
        the data, its dead letters and its deduplication key go), atomically; answers how many."""
        return await self._db.fetchval(DELETE_SQL, partition_id, txid)

    async def retry(self, partition_id: str, txid: str, new_id: str) -> Row | None:
        """Appends a copy of the message (same transactionId, traceId and data) to its partition
        as ``new_id`` and removes its dead letters, atomically. ``None`` (or a NULL
        ``message_offset``) when there is no such message or partition: nothing changed."""
        return await self._db.fetchrow(RETRY_SQL, partition_id, txid, new_id)
