"""The ``resources`` family over the members of a deployment of several databases: the same
calls and answers as :class:`~reginamq.store.resources.Resources`, the answers one database
holding all the members' rows would give (docs/shards.md, "Routes over members").

Every member holds the same queues, and each partition, with its cursors and dead letters,
lives on one member. So each call asks every member concurrently, on its pool (these calls
only read), and merges:

- what every member holds alike (the queues, their names, options, namespaces and tasks) is
  read from the catalog;
- what is per partition (partitions, messages, pending, in flight, dead letters, expired,
  backlogs) is summed, and the last write is the latest of the members';
- consumer groups are counted as the union of the (queue, group) subscriptions the members
  hold: a group is registered on each member it popped on, so adding the members' counts
  would count it once per member. The subscriptions are listed only when two members or more
  hold some, and then through :meth:`ConsumerGroups.summaries
  <reginamq.store.consumer_groups.ConsumerGroups.summaries>`, the one call that names them.

Pages keep the SQL's order. A page of queues is the same queues on every member, merged row by
row. A page of partitions (or of their depth) is spread: each member is asked for its first
``offset + limit`` rows, and the merged rows are sorted by the SQL's key and sliced, which is
the page one database gives. Names are compared by code point, which is PostgreSQL's ``COLLATE "C"`` order.

Merged rows are dicts (the callers read rows by column name), and so is every row answered, so
that a caller never sees which of the two it got.

As on one database, a page and its count are separate reads; so are the members' parts of one
answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from reginamq.store.database import Row
from reginamq.store.homes import Homes
from reginamq.store.merging import Merged, by_name, latest, on_reached, sums
from reginamq.store.routing import Members

T = TypeVar("T")
# Columns of the SQL's rows that are summed over members.
PARTITION_FIGURES = ("partitions", "messages", "pending")
QUEUE_FIGURES = (*PARTITION_FIGURES, "dlq", "expired")
OVERVIEW_FIGURES = (*PARTITION_FIGURES, "in_flight", "dlq")
DEPTH_FIGURES = ("partitions", "pending", "partitions_pending")


class ShardedResources:
    def __init__(self, homes: Homes, members: Members):
        # ``members`` is where writes go; this family only reads, on the members' pools.
        del members
        self._stores = homes.stores

    async def overview(self) -> Merged:
        rows = await on_reached(self._stores, lambda store: store.resources.overview())
        merged = dict(rows[0])  # the catalog's: queues, namespaces, tasks and ``at``
        merged.update(sums(rows, OVERVIEW_FIGURES))
        merged["last_write_at"] = latest(row["last_write_at"] for row in rows)
        if _held_by_several(rows, "subscriptions"):
            pairs = await self._subscriptions(None)
            merged["consumer_groups"] = len({group for _, group in pairs})
            merged["subscriptions"] = len(pairs)
        else:
            merged["consumer_groups"] = max(row["consumer_groups"] for row in rows)
            merged["subscriptions"] = max(row["subscriptions"] for row in rows)
        return merged

    async def queue_page(self, namespace: str | None, task: str | None, search: str | None, limit: int,
                         offset: int) -> list[Merged]:
        pages = await on_reached(self._stores,
                               lambda store: store.resources.queue_page(namespace, task, search, limit, offset))
        return list(await asyncio.gather(*(self._queue_row(rows) for rows in by_name(pages, "name"))))

    async def queue_count(self, namespace: str | None, task: str | None, search: str | None) -> int:
        return await self._stores[0].resources.queue_count(namespace, task, search)

    async def queue(self, queue: str) -> Merged | None:
        rows = await on_reached(self._stores, lambda store: store.resources.queue(queue))
        if rows[0] is None:
            return None
        return await self._queue_row([row for row in rows if row is not None])

    async def queue_exists(self, queue: str) -> bool:
        return await self._stores[0].resources.queue_exists(queue)

    async def queue_id(self, queue: str) -> int | None:
        return await self._stores[0].resources.queue_id(queue)

    async def partition_page(self, queue: str | None, search: str | None, limit: int, offset: int) -> list[Merged]:
        pages = await on_reached(self._stores,
                               lambda store: store.resources.partition_page(queue, search, offset + limit, 0))
        return _page(pages, lambda row: (row["queue_name"], row["name"]), limit, offset)

    async def partition_count(self, queue: str | None, search: str | None) -> int:
        return sum(await on_reached(self._stores, lambda store: store.resources.partition_count(queue, search)))

    async def groupings(self, by_task: bool) -> list[Merged]:
        answers = await on_reached(self._stores, lambda store: store.resources.groupings(by_task))
        merged = []
        for rows in by_name(answers, "name"):
            row = dict(rows[0])  # the catalog's: the queues
            row.update(sums(rows, PARTITION_FIGURES))
            merged.append(row)
        return merged

    async def depth_totals(self, queue_id: int, group: str | None) -> Merged:
        rows = await on_reached(self._stores, lambda store: store.resources.depth_totals(queue_id, group))
        return sums(rows, DEPTH_FIGURES)

    async def depth_page(self, queue_id: int, group: str | None, limit: int, offset: int) -> list[Merged]:
        pages = await on_reached(self._stores,
                               lambda store: store.resources.depth_page(queue_id, group, offset + limit, 0))
        return _page(pages, lambda row: (-row["pending"], row["partition_name"]), limit, offset)

    async def _queue_row(self, rows: list[Row]) -> Merged:
        """One queue's row over the members that answered it, the catalog's first."""
        merged = dict(rows[0])  # the catalog's: id, names, options, creation and update
        merged.update(sums(rows, QUEUE_FIGURES))
        merged["last_write_at"] = latest(row["last_write_at"] for row in rows)
        if _held_by_several(rows, "consumer_groups"):
            merged["consumer_groups"] = len(await self._subscriptions(merged["name"]))
        else:
            merged["consumer_groups"] = max(row["consumer_groups"] for row in rows)
        return merged

    async def _subscriptions(self, queue: str | None) -> set[tuple[str, str]]:
        """The (queue, group) pairs any member holds a subscription of, on ``queue`` or every
        queue (a group that only has cursors left is no subscription)."""
        answers = await on_reached(self._stores, lambda store: store.consumer_groups.summaries(None, queue))
        return {(row["queue_name"], row["group_name"]) for rows in answers for row in rows
                if row["subscription_mode"] is not None}


def _held_by_several(rows: Sequence[Row], column: str) -> bool:
    """Whether more than one member counts something in ``column``: only then may their counts
    overlap."""
    return sum(1 for row in rows if row[column]) > 1


def _page(answers: list[list[Row]], key: Callable[[Row], Any], limit: int, offset: int) -> list[Merged]:
    """Rows ``offset`` to ``offset + limit`` in ``key`` order of the members' first
    ``offset + limit`` rows each, which are the page one database would give."""
    ordered = sorted((row for rows in answers for row in rows), key=key)
    return [dict(row) for row in ordered[offset:offset + limit]]
