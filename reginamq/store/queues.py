"""Queues (rq_queues, 005_queues.sql): the row a configure reads and writes, and deletion.

A configure is a read-modify-write of one queue row: :meth:`Queues.lock` then
:meth:`Queues.upsert` and :meth:`Queues.announce`, in one :meth:`Store.atomically
<reginamq.store.Store.atomically>` unit. The lock order is the queue's name lock (an advisory
transaction lock on the name, so two first configures of a new name do not both insert), then
its row.
"""

from __future__ import annotations

from reginamq.store.database import Family, Row, Session
from reginamq.store.notices import CONFIG_CHANNEL, notify_with_commit

LOCK_NAME_SQL = "SELECT pg_advisory_xact_lock(hashtextextended($1, 7))"
CURRENT_SQL = "SELECT options, namespace, task FROM rq_queues WHERE name = $1 FOR UPDATE"
UPSERT_SQL = """
INSERT INTO rq_queues (id, name, namespace, task, options) OVERRIDING SYSTEM VALUE
VALUES (coalesce($5, nextval(pg_get_serial_sequence('rq_queues', 'id'))), $1, $2, $3, $4::jsonb)
ON CONFLICT (name) DO UPDATE
SET namespace = EXCLUDED.namespace, task = EXCLUDED.task, options = EXCLUDED.options, updated_at = now()
RETURNING id
"""
NUMBERS_PAST_SQL = ("SELECT setval(pg_get_serial_sequence('rq_queues', 'id'), (SELECT max(id) FROM rq_queues)) "
                    "WHERE EXISTS (SELECT 1 FROM rq_queues)")
DELETE_SQL = "SELECT rq_delete_queue($1)"
CHANGED_SQL = "SELECT pg_notify('rq_config', $1)"
OPTIONS_SQL = "SELECT options FROM rq_queues WHERE name = $1"


class Queues(Family):
    async def lock(self, queue: str) -> Row | None:
        """Locks the name ``queue`` and its row until the transaction ends, and answers the row's
        ``options`` (JSON text), ``namespace`` and ``task``; ``None`` when there is no such queue
        (the name stays locked, so no other configure creates it meanwhile). Only meaningful
        inside :meth:`Store.atomically <reginamq.store.Store.atomically>`: outside one the locks
        end with the call."""
        await self._db.execute(LOCK_NAME_SQL, queue)
        return await self._db.fetchrow(CURRENT_SQL, queue)

    async def upsert(self, queue: str, namespace: str | None, task: str | None, options: str,
                     queue_id: int | None = None) -> int:
        """Creates ``queue`` or overwrites its namespace, task and option set (``options``, JSON
        text of the complete set); answers the queue's id. A queue created gets ``queue_id``
        when given (the catalog's id of it, over several member databases), and this
        database's own numbering moves past it."""
        created_id = await self._db.fetchval(UPSERT_SQL, queue, namespace, task, options, queue_id)
        if queue_id is not None:
            await self._db.execute(NUMBERS_PAST_SQL)
        return created_id

    async def delete(self, queue: str) -> bool:
        """Deletes ``queue`` with its partitions, messages, cursors, groups, dead letters and
        deduplication keys, atomically; ``False`` when there is no such queue."""
        return bool(await self._db.fetchval(DELETE_SQL, queue))

    async def announce(self, queue: str) -> None:
        """Tells every broker process that ``queue`` was configured or deleted (the ``rq_config``
        channel), so each drops what it caches of it. Inside a transaction the notice is
        delivered when it commits, and not at all when it rolls back."""
        if isinstance(self._db, Session):
            await notify_with_commit(self._db, CONFIG_CHANNEL, [queue])
        else:
            await self._db.execute(CHANGED_SQL, queue)

    async def options(self, queue: str) -> str | None:
        """The stored option set of ``queue`` as JSON text; ``None`` when there is no such queue."""
        return await self._db.fetchval(OPTIONS_SQL, queue)
