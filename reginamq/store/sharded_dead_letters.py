"""The ``dead_letters`` family over the members of a deployment of several databases: the same
calls and answers as :class:`~reginamq.store.dead_letters.DeadLetters`, each routed to the
members that hold what it names (docs/shards.md, "Routes over members").

A dead letter lives with its partition, on the partition's home:

- **Page** of one partition: its home, whose page is the answer. Of a whole queue: every
  member's pool concurrently, merged (:func:`merged`).
- **Replay**: an entry id does not tell its member, so every member is asked at once. Only the
  one holding the entry changes anything (an unknown id is a read and nothing else there), and
  its answer is the answer, even when another member could not be reached: entry ids are
  unique, so the unreachable one cannot hold it too.
- **Purge** of one partition: its home. Of a whole queue: every member concurrently, the counts
  added up; when a member fails, the others' purges stand and the failure is raised (purging
  again is safe).

Pages are merged by :func:`~reginamq.store.merging.paged`.

Writes go through ``members`` (each member's pool, or a unit's transaction on it); reads use
the pools, so a transaction joins only the members its writes touch.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from reginamq.store.database import Row
from reginamq.store.homes import Homes
from reginamq.store.merging import Order, Record, everywhere, paged, settled
from reginamq.store.routing import Members

PAGE_ORDER: Order = (("failed_at", True), ("id", False))  # rq_dlq_page


class ShardedDeadLetters:
    def __init__(self, homes: Homes, members: Members):
        self._homes = homes
        self._members = members

    async def page(self, queue: str, group: str | None, partition: str | None, since: datetime | None,
                   until: datetime | None, limit: int, offset: int) -> list[Row | Record]:
        return await paged(self._homes, queue, partition,
                           lambda store, rows, skip: store.dead_letters.page(queue, group, partition, since, until,
                                                                             rows, skip),
                           PAGE_ORDER, limit, offset)

    async def replay(self, entry_id: str, new_id: str) -> Row | None:
        async def replay_on(ordinal: int) -> Row | None:
            return await (await self._members.store(ordinal)).dead_letters.replay(entry_id, new_id)

        answers = await asyncio.gather(*(replay_on(ordinal) for ordinal in range(len(self._homes.stores))),
                                       return_exceptions=True)
        found = [answer for answer in answers if answer is not None and not isinstance(answer, BaseException)]
        if found:
            return found[0]
        settled(answers)
        return None

    async def purge(self, queue: str, group: str | None, partition: str | None) -> int:
        if partition is not None:
            home = await self._homes.of_name(queue, partition)
            return await (await self._members.store(home)).dead_letters.purge(queue, group, partition)

        async def purge_on(ordinal: int) -> int:
            return await (await self._members.store(ordinal)).dead_letters.purge(queue, group, None)

        return sum(await everywhere(purge_on(ordinal) for ordinal in range(len(self._homes.stores))))
