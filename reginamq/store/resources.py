"""What is in the queues (008_resources.sql): overview, queues, partitions, groupings, depth.

Every figure is aggregate SQL over offsets, read in the statement's snapshot; anything that
lists partitions or queues is a page (``limit``, ``offset``), so no call brings a whole table
into the broker's memory. Each method is one statement; a page and its count are two, which
may see different instants.
"""

from __future__ import annotations

from reginamq.store.database import Family, Row

OVERVIEW_SQL = "SELECT *, now() AS at FROM rq_res_overview()"
QUEUE_PAGE_SQL = "SELECT * FROM rq_res_queue_page(NULL, $1, $2, $3, $4, $5)"
QUEUE_SQL = "SELECT * FROM rq_res_queue_page($1, NULL, NULL, NULL, 1, 0)"
QUEUE_COUNT_SQL = "SELECT rq_res_queue_count($1, $2, $3)"
QUEUE_EXISTS_SQL = "SELECT 1 FROM rq_queues WHERE name = $1"
QUEUE_ID_SQL = "SELECT id FROM rq_queues WHERE name = $1"
PARTITION_PAGE_SQL = "SELECT * FROM rq_res_partition_page($1, $2, $3, $4)"
PARTITION_COUNT_SQL = "SELECT rq_res_partition_count($1, $2)"
GROUPINGS_SQL = "SELECT * FROM rq_res_groupings($1)"
DEPTH_TOTALS_SQL = "SELECT * FROM rq_res_depth_totals($1, $2)"
DEPTH_PAGE_SQL = "SELECT * FROM rq_res_depth_page($1, $2, $3, $4)"


class Resources(Family):
    async def overview(self) -> Row:
        """The whole system in one row: counts of queues, partitions, namespaces, tasks, groups and
        subscriptions, messages stored, pending, in flight and dead-lettered, the last write, and
        the database's ``now()`` as ``at``. Always one row (zeros on an empty database)."""
        return await self._db.fetchrow(OVERVIEW_SQL)

    async def queue_page(self, namespace: str | None, task: str | None, search: str | None, limit: int,
                         offset: int) -> list[Row]:
        """A page of queues by name (narrowed to a namespace, a task, names starting with
        ``search``), each with its partition aggregates; ``[]`` past the end."""
        return await self._db.fetch(QUEUE_PAGE_SQL, namespace, task, search, limit, offset)

    async def queue_count(self, namespace: str | None, task: str | None, search: str | None) -> int:
        """How many queues :meth:`queue_page` pages over with the same filters."""
        return await self._db.fetchval(QUEUE_COUNT_SQL, namespace, task, search)

    async def queue(self, queue: str) -> Row | None:
        """The row :meth:`queue_page` has for ``queue``; ``None`` when there is no such queue."""
        return await self._db.fetchrow(QUEUE_SQL, queue)

    async def queue_exists(self, queue: str) -> bool:
        return bool(await self._db.fetchval(QUEUE_EXISTS_SQL, queue))

    async def queue_id(self, queue: str) -> int | None:
        """The id of ``queue``; ``None`` when there is no such queue."""
        return await self._db.fetchval(QUEUE_ID_SQL, queue)

    async def partition_page(self, queue: str | None, search: str | None, limit: int, offset: int) -> list[Row]:
        """A page of partitions (of ``queue``, or of every queue), by queue name then partition
        name, narrowed to names starting with ``search``; ``[]`` past the end or for an unknown
        queue."""
        return await self._db.fetch(PARTITION_PAGE_SQL, queue, search, limit, offset)

    async def partition_count(self, queue: str | None, search: str | None) -> int:
        """How many partitions :meth:`partition_page` pages over with the same filters."""
        return await self._db.fetchval(PARTITION_COUNT_SQL, queue, search)

    async def groupings(self, by_task: bool) -> list[Row]:
        """Every namespace (or task) in use, by name, with its queue and partition aggregates."""
        return await self._db.fetch(GROUPINGS_SQL, by_task)

    async def depth_totals(self, queue_id: int, group: str | None) -> Row:
        """The backlog of queue ``queue_id`` for ``group`` (``None``: the worst cursor of each
        partition): ``partitions``, ``pending`` messages, ``partitions_pending``. One row."""
        return await self._db.fetchrow(DEPTH_TOTALS_SQL, queue_id, group)

    async def depth_page(self, queue_id: int, group: str | None, limit: int, offset: int) -> list[Row]:
        """A page of the partitions of :meth:`depth_totals`, the largest backlog first."""
        return await self._db.fetch(DEPTH_PAGE_SQL, queue_id, group, limit, offset)
