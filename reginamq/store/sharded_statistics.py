"""The ``statistics`` family over the members of a deployment of several databases: the same
calls and answers as :class:`~reginamq.store.statistics.Statistics`, the figures one database
holding all the members' rows would give (docs/shards.md, "Routes over members").

Each member counts what moved on its own partitions: its hot paths note it and its refresh books
it. So a refresh is run on every member (through ``members``, each a transaction of its own, as
on one database), and every read asks every member concurrently, on its pool, and merges:

- counters, depth, dead letters, partitions, expired and each group's backlog and partitions
  behind are summed per queue (and group);
- a queue's ``lag`` is its largest group backlog, so it is worked out again from the summed
  backlogs (:meth:`ShardedStatistics.groups`): the members' own lags are each one member's
  largest, and neither their sum nor their largest is the deployment's;
- a refresh's instants are the oldest member's: the figures are as fresh as that member's last
  refresh; ``None`` until every member has refreshed.

The series keeps only each member's lag per step, not per group, so its ``lag`` is the sum of
the members' lags: the deployment's when one group lags most on every member, more otherwise.
A member writes a step only when something of the queue moved there, so the gauges of a step
carry forward each member's last step within the window.

Rows are ordered as the SQL orders them, names by code point (PostgreSQL's ``COLLATE "C"``),
and answered as dicts (the callers read rows by column name).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from reginamq.store.database import Row
from reginamq.store.homes import Homes
from reginamq.store.merging import Merged, by_name, on_reached, sums
from reginamq.store.routing import Members

COUNTERS = ("pushed", "popped", "acked", "failed", "dead_lettered")
QUEUE_FIGURES = ("partitions", *COUNTERS, "depth", "dlq_depth", "expired")
GROUP_FIGURES = ("backlog", "partitions_behind")
RETENTION_FIGURES = ("segments", "messages", "evicted", "partitions")
STEP_GAUGES = ("depth", "lag", "dlq_depth")


class ShardedStatistics:
    def __init__(self, homes: Homes, members: Members):
        self._stores = homes.stores
        self._members = members

    async def refresh(self, bucket_seconds: int, keep_seconds: int, full: bool) -> int:
        """Refreshes every member concurrently; answers the number of queues (every member
        holds them all). When one member fails, the others' refreshes stand, and the first
        failure is raised once all have finished."""
        async def refresh_on(ordinal: int) -> int:
            store = await self._members.store(ordinal)
            return await store.statistics.refresh(bucket_seconds, keep_seconds, full)

        answers = await asyncio.gather(*(refresh_on(ordinal) for ordinal in range(len(self._stores))),
                                       return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException):
                raise answer
        return answers[0]

    async def last_full_pass(self) -> Merged | None:
        """The oldest member's full pass and the longest one's seconds (the members' passes
        run together)."""
        rows = await on_reached(self._stores, lambda store: store.statistics.last_full_pass())
        if None in rows:
            return None
        return {"since": max(row["since"] for row in rows),
                "full_seconds": max(row["full_seconds"] for row in rows)}

    async def queues(self, queue: str | None) -> list[Merged]:
        answers, groups = await asyncio.gather(on_reached(self._stores, lambda store: store.statistics.queues(queue)),
                                               self.groups(queue))
        lags: dict[str, int] = defaultdict(int)
        for group in groups:
            lags[group["queue_name"]] = max(lags[group["queue_name"]], group["backlog"])
        merged = []
        for rows in by_name(answers, "queue_name"):
            row = dict(rows[0])  # the catalog's: names and creation
            row.update(sums(rows, QUEUE_FIGURES))
            row["lag"] = lags[row["queue_name"]]
            row["refreshed_at"] = _oldest(member["refreshed_at"] for member in rows)
            merged.append(row)
        return merged

    async def series(self, queue: str | None, since: datetime, until: datetime, interval: int) -> list[Merged]:
        answers = await on_reached(self._stores, lambda store: store.statistics.series(queue, since, until, interval))
        steps: dict[tuple[datetime, str], dict[int, Row]] = defaultdict(dict)
        for ordinal, rows in enumerate(answers):
            for row in rows:
                steps[row["bucket"], row["queue_name"]][ordinal] = row
        last: dict[str, dict[int, Row]] = defaultdict(dict)  # queue → member → its last step so far
        merged = []
        for (bucket, queue_name), written in sorted(steps.items()):
            last[queue_name].update(written)
            merged.append({"queue_name": queue_name, "bucket": bucket, **sums(written.values(), COUNTERS),
                           **sums(last[queue_name].values(), STEP_GAUGES)})
        return merged

    async def groups(self, queue: str | None) -> list[Merged]:
        answers = await on_reached(self._stores, lambda store: store.statistics.groups(queue))
        merged: dict[tuple[str, str], Merged] = {}
        for rows in answers:
            for row in rows:
                key = (row["queue_name"], row["consumer_group"])
                if key in merged:
                    for column in GROUP_FIGURES:
                        merged[key][column] += row[column]
                else:
                    merged[key] = dict(row)
        return [merged[key] for key in sorted(merged)]

    async def refreshed_at(self) -> datetime | None:
        return _oldest(await on_reached(self._stores, lambda store: store.statistics.refreshed_at()))

    async def retention_totals(self) -> list[Merged]:
        answers = await on_reached(self._stores, lambda store: store.statistics.retention_totals())
        named: dict[str, list[Row]] = defaultdict(list)
        for rows in answers:
            for row in rows:
                named[row["queue_name"]].append(row)
        return [{"queue_name": name, **sums(named[name], RETENTION_FIGURES)} for name in sorted(named)]


def _oldest(instants: Iterable[datetime | None]) -> datetime | None:
    """The oldest of ``instants``; ``None`` when one is unknown (or there are none)."""
    instants = list(instants)
    return None if not instants or None in instants else min(instants)
