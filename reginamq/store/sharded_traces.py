"""The ``traces`` family over the members of a deployment of several databases: the same calls
and answers as :class:`~reginamq.store.traces.Traces`, each routed to the members that hold
what it names (docs/shards.md, "Routes over members").

A trace lives on the home of the partition its message address names (the message need not
exist), and its names with it:

- **Add**: that home, through ``members`` (its pool, or a unit's transaction on it).
  **For a message**: that home's pool.
- **By name**: every member's pool concurrently, merged by ``rq_traces_by_name``'s order
  (newest first, then trace id); a trace is on one member, so the totals add up
  (sharded_dead_letters.merged).
- **Names**: one name can be on several members, so a member's page says nothing of the
  name's rank over the deployment nor of how many names there are. Every member answers all
  its names (each member counts them all for its ``total`` anyway); they are added up per name
  (traces and messages: a message is on one member; last seen: the latest), ordered as
  ``rq_trace_names_page`` orders them and paged here. Names tied on their last use are ordered
  by code point, which is the database's order under the C collation (the embedded server's).
"""

from __future__ import annotations

from datetime import datetime

from reginamq.store.database import Row
from reginamq.store.homes import Homes
from reginamq.store.merging import EVERY_ROW, Order, Record, merged, on_reached, sorted_rows
from reginamq.store.routing import Members

BY_NAME_ORDER: Order = (("created_at", True), ("id", True))  # rq_traces_by_name
NAMES_ORDER: Order = (("last_seen", True), ("name", False))  # rq_trace_names_page
NAMES_COLUMNS = {"name": 0, "trace_count": 1, "message_count": 2, "last_seen": 3, "total": 4}


class ShardedTraces:
    def __init__(self, homes: Homes, members: Members):
        self._homes = homes
        self._members = members

    async def add(self, trace_id: str, partition_id: str, txid: str, group: str | None, event_type: str,
                  data: str, names: list[str]) -> datetime:
        home = self._homes.of_id(partition_id)
        return await (await self._members.store(home)).traces.add(trace_id, partition_id, txid, group, event_type,
                                                                  data, names)

    async def for_message(self, partition_id: str, txid: str, limit: int) -> list[Row]:
        home = self._homes.of_id(partition_id)
        return await self._homes.stores[home].traces.for_message(partition_id, txid, limit)

    async def by_name(self, name: str, since: datetime | None, until: datetime | None, limit: int,
                      offset: int) -> list[Row | Record]:
        return await merged(self._homes, lambda store, rows, skip: store.traces.by_name(name, since, until, rows, skip),
                            BY_NAME_ORDER, limit, offset)

    async def names(self, search: str | None, limit: int, offset: int) -> list[Record]:
        every = await on_reached(self._homes.stores, lambda store: store.traces.names(search, EVERY_ROW, 0))
        counted: dict[str, list] = {}  # name → [traces, messages, last seen]
        for row in (row for rows in every for row in rows):
            counts = counted.setdefault(row["name"], [0, 0, row["last_seen"]])
            counts[0] += row["trace_count"]
            counts[1] += row["message_count"]
            counts[2] = max(counts[2], row["last_seen"])
        rows = sorted_rows((Record(NAMES_COLUMNS, [name, *counts, len(counted)]) for name, counts in counted.items()),
                           NAMES_ORDER)
        return rows[offset:offset + limit]
