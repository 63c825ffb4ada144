"""The ``reads`` family over the members of a deployment of several databases: the same calls and
answers as :class:`~reginamq.store.reads.Reads`, each routed to the members that hold what it
names (docs/shards.md, "Routes over members"). Both calls only read, on the members' pools, so
a family over a unit's transactions (``members``) reads as one over the pools does.

- **Records**: the entries are grouped by the home of their (queue, partition), each home is
  asked once for its entries, concurrently, and the rows are put back in the caller's entry
  order, ``entry`` numbering the caller's entries. An entry's bounds and records come from one
  statement on its home, so they agree, as on one database. A member cannot know what the
  others' entries used of ``call_budget``, so each home has all of it for its own entries: an
  entry may be answered segments that one database would have left out once earlier entries
  had spent the call's budget. The caller holds the whole call to its budget by its own count
  (engine/reads.py).
- **Changed**: every member's pool concurrently, each answering up to ``limit + 1`` rows after
  the cursor in creation order, merged by (created at, id), the first ``limit + 1`` kept.
  ``safe_time`` is the earliest of the members' (every write before it is in every member's
  answer). The queue is found when every member holds it (a queue is created and deleted on
  every member in one transaction).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from reginamq.store.database import Row
from reginamq.store.homes import Homes
from reginamq.store.merging import Order, Record, everywhere, replaced, sorted_rows
from reginamq.store.routing import Members

CHANGED_ORDER: Order = (("created_at", False), ("id", False))  # rq_partitions_changed


class ShardedReads:
    def __init__(self, homes: Homes, members: Members):
        del members  # see the module header
        self._homes = homes

    async def records(self, queues: list[str], partitions: list[str], offsets: list[int], budgets: list[int],
                      call_budget: int) -> list[Row | Record]:
        names = list(zip(queues, partitions, strict=True))
        await self._homes.listed(names)  # one look-up of the names not known yet
        entries: dict[int, list[int]] = defaultdict(list)  # home → its entries, 0-based, in order
        for entry, name in enumerate(names):
            entries[await self._homes.of_name(*name)].append(entry)

        async def records_on(home: int, mine: list[int]) -> list[Record]:
            rows = await self._homes.stores[home].reads.records(
                [queues[entry] for entry in mine], [partitions[entry] for entry in mine],
                [offsets[entry] for entry in mine], [budgets[entry] for entry in mine], call_budget)
            return [replaced(row, entry=mine[row["entry"] - 1] + 1) for row in rows]

        answered = await everywhere(records_on(home, mine) for home, mine in entries.items())
        return sorted_rows((row for rows in answered for row in rows), (("entry", False),))

    async def changed(self, queue: str, since: datetime | None, after_created: datetime | None,
                      after_id: str | None, limit: int) -> list[Row | Record]:
        answers = await everywhere(store.reads.changed(queue, since, after_created, after_id, limit)
                                   for store in self._homes.stores)
        safe_time = min(rows[0]["safe_time"] for rows in answers)
        lacking = [rows[0] for rows in answers if not rows[0]["found"]]
        if lacking:
            return [replaced(lacking[0], safe_time=safe_time)]
        found = sorted_rows((row for rows in answers for row in rows if row["id"] is not None), CHANGED_ORDER)
        return [replaced(row, safe_time=safe_time) for row in found[:limit + 1] or answers[0]]
