"""The ``message_admin`` family over the members of a deployment of several databases: the same
calls and answers as :class:`~reginamq.store.message_admin.MessageAdmin`, each routed to the
members that hold what it names (docs/shards.md, "Routes over members").

- **Page** of one partition: its home, whose page is the answer. Of a whole queue: every
  member's pool concurrently, merged by ``rq_messages_page``'s order (newest first, then
  partition id, then offset). A partition lives on one member, so the push time and the
  partition id tell the rows of different members apart, and the offset order within a
  partition is its home's (sharded_dead_letters.merged).
- **Get**: the home the partition id tells, on its pool. **Delete** and **retry**: that home,
  through ``members`` (its pool, or a unit's transaction on it). The message, its dead letters
  and its deduplication key are all on that home, so each stays one atomic statement.
"""

from __future__ import annotations

from datetime import datetime

from reginamq.store.database import Row
from reginamq.store.homes import Homes
from reginamq.store.merging import Order, Record, paged
from reginamq.store.routing import Members

# rq_messages_page's order but the offset, which its rows do not carry: a partition's rows keep
# their home's order
PAGE_ORDER: Order = (("created_at", True), ("partition_id", False))


class ShardedMessageAdmin:
    def __init__(self, homes: Homes, members: Members):
        self._homes = homes
        self._members = members

    async def page(self, queue: str, partition: str | None, group: str, status: str | None,
                   since: datetime | None, until: datetime | None, limit: int, offset: int) -> list[Row | Record]:
        return await paged(self._homes, queue, partition,
                           lambda store, rows, skip: store.message_admin.page(queue, partition, group, status, since,
                                                                              until, rows, skip),
                           PAGE_ORDER, limit, offset)

    async def get(self, partition_id: str, txid: str, group: str) -> Row | None:
        home = self._homes.of_id(partition_id)
        return await self._homes.stores[home].message_admin.get(partition_id, txid, group)

    async def delete(self, partition_id: str, txid: str) -> int:
        home = self._homes.of_id(partition_id)
        return await (await self._members.store(home)).message_admin.delete(partition_id, txid)

    async def retry(self, partition_id: str, txid: str, new_id: str) -> Row | None:
        home = self._homes.of_id(partition_id)
        return await (await self._members.store(home)).message_admin.retry(partition_id, txid, new_id)
