"""The ``streams`` family over the members of a deployment of several databases
(docs/shards.md, "What is spread, what is everywhere").

A streaming query's state rows belong to a source partition, so they live on its home, beside
its messages: a cycle's state changes, its source ack and (often) its sink pushes then commit
on one member, and in one two-phase unit when a sink partition lives elsewhere. The query's
registration is on every member, with the catalog's id, so each member's state rows refer to a
query it knows: it is registered on the catalog first, then on the other members. A
registration is not atomic over members; when one member fails it raises that failure (a 503)
and registering again completes it, as the client does.
"""

from __future__ import annotations

from reginamq.store.database import Row
from reginamq.store.homes import Homes
from reginamq.store.merging import everywhere
from reginamq.store.routing import Members


class ShardedStreams:
    def __init__(self, homes: Homes, members: Members):
        self._homes = homes
        self._members = members

    async def register(self, name: str, source: str, sink: str | None, config_hash: str, reset: bool) -> Row:
        stores = self._homes.stores
        row = await stores[0].streams.register(name, source, sink, config_hash, reset)
        if not row["conflict"]:
            await everywhere(store.streams.register(name, source, sink, config_hash, reset, row["query_id"])
                             for store in stores[1:])
        return row

    async def state(self, query_id: str, partition_id: str, keys: list[str], prefix: str | None,
                    ripe_at_or_before: int | None) -> list[Row]:
        home = self._homes.stores[self._homes.of_id(partition_id)]
        return await home.streams.state(query_id, partition_id, keys, prefix, ripe_at_or_before)

    async def apply(self, query_id: str, partition_id: str, deletes: list[bool], keys: list[str],
                    values: list[str | None]) -> str | None:
        home = await self._members.store(self._homes.of_id(partition_id))
        return await home.streams.apply(query_id, partition_id, deletes, keys, values)
