"""The ``consumer_groups`` family over the members of a deployment of several databases: the
answers a single database holding the same partitions would give (docs/shards.md, "Routes over
members").

A group's cursors live with their partitions, on each partition's home; its subscription to a
queue is on every member, with one start (:meth:`ShardedConsumerGroups.subscribe_everywhere`,
which the first pop of a group on a queue in a process runs, so that a member where the group
has not popped yet still starts it where the others do). So:

- the summaries and the pages of partitions ask every member and merge: counts and lags add up,
  the oldest unconsumed message is the oldest of any member, a page is the single database's
  page, by queue then partition name;
- seek, delete and subscription changes run on every member, each atomic there. They are not
  atomic over members: when one member fails the call raises its failure (a 503) and what the
  others did stays done. Each of them can be sent again to the same end, which is what the
  client does with a 503.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from reginamq.store import Store
from reginamq.store.database import Row
from reginamq.store.merging import earliest, latest, on_every, on_reached

T = TypeVar("T")
_SUMMED = ("partitions", "cursors", "leased", "partitions_with_lag", "total_lag")


class ShardedConsumerGroups:
    def __init__(self, stores: list[Store]):
        self._stores = stores

    async def summaries(self, group: str | None, queue: str | None) -> list[dict[str, Any]]:
        merged: dict[tuple[str, str], dict[str, Any]] = {}
        for rows in await on_reached(self._stores, lambda store: store.consumer_groups.summaries(group, queue)):
            for row in rows:
                key = (row["group_name"], row["queue_name"])
                if key not in merged:
                    merged[key] = dict(row)
                    continue
                into = merged[key]
                for column in _SUMMED:
                    into[column] += row[column]
                for column in ("subscription_mode", "subscription_from", "subscribed_at"):
                    into[column] = into[column] if into[column] is not None else row[column]
                into["oldest_pending_at"] = earliest((into["oldest_pending_at"], row["oldest_pending_at"]))
                into["max_time_lag"] = latest((into["max_time_lag"], row["max_time_lag"]))
                into["conflation"] = bool(into["conflation"]) or bool(row["conflation"])
        return [merged[key] for key in sorted(merged)]

    async def partition_pages(self, group: str, queue: str | None, limit: int, offset: int) -> list[Row]:
        pages = await on_reached(self._stores,
                               lambda store: store.consumer_groups.partition_pages(group, queue, limit + offset, 0))
        rows = sorted((row for page in pages for row in page), key=lambda row: (row["queue_name"],
                                                                                row["partition_name"]))
        per_queue: dict[str, list[Row]] = {}
        for row in rows:
            per_queue.setdefault(row["queue_name"], []).append(row)
        return [row for name in sorted(per_queue) for row in per_queue[name][offset:offset + limit]]

    async def reads_queue(self, queue_id: int, group: str) -> bool:
        return any(await on_every(self._stores, lambda store: store.consumer_groups.reads_queue(queue_id, group)))

    async def conflates(self, queue_id: int, group: str) -> bool:
        return any(await on_every(self._stores, lambda store: store.consumer_groups.conflates(queue_id, group)))

    async def delete(self, group: str, queue: str | None, delete_metadata: bool) -> dict[str, Any]:
        rows = await on_every(self._stores, lambda store: store.consumer_groups.delete(group, queue, delete_metadata))
        # cursors are each on one member; a subscription is on every member: counted once
        return {"cursors": _sum_known(row["cursors"] for row in rows), "subscriptions": rows[0]["subscriptions"]}

    async def seek(self, group: str, queue: str, to_end: bool, at: datetime | None) -> dict[str, Any]:
        rows = await on_every(self._stores, lambda store: store.consumer_groups.seek(group, queue, to_end, at))
        updated = [row["updated"] for row in rows if row["updated"] is not None]
        reading = [count for count in updated if count >= 0]
        return {"updated": None if not updated else sum(reading) if reading else -1,
                "created": _sum_known(row["created"] for row in rows)}

    async def subscribe(self, group: str, queue: str | None, mode: str, start: datetime | None) -> list[Row]:
        answers = await on_every(self._stores, lambda store: store.consumer_groups.subscribe(group, queue, mode, start))
        return max(answers, key=len)

    async def subscribe_everywhere(self, queue_id: int, group: str, mode: str, start: datetime | None,
                                   conflation: bool | None) -> None:
        """``group``'s subscription to queue ``queue_id`` on every member, as the catalog holds
        it: registered there first (with ``mode``, ``start``, ``conflation`` unless it is
        registered already), then copied to every member that lacks it."""
        catalog = self._stores[0].consumer_groups
        await catalog.register([queue_id], group, mode, start, conflation)
        stored = await catalog.subscription(queue_id, group)
        if stored is None:  # the queue was deleted meanwhile
            return
        await on_every(self._stores, lambda store: store.consumer_groups.register([queue_id], group, *stored))



def _sum_known(values) -> int | None:
    """The sum of the values that are not None; None when all are."""
    known = [value for value in values if value is not None]
    return sum(known) if known else None
