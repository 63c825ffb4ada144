"""Serving a member database added to a running deployment (`reginamq shards add`,
docs/shards.md "Adding a member"): every process looks at the catalog's member list every
maintenance round and, when a member was added whose database it was given, serves it: new
names are placed on it too, its partitions are reached, this process listens on it, and its
retention and statistics loops start. It also forgets the partition names a rebalance moved
since it last looked (store/rebalance.py), so that a pop or a seek of one of them by name finds
it on its new member. Nothing is elected: each process holds its own pools."""

from __future__ import annotations

from collections.abc import Callable

from reginamq.common.periodic import Periodic
from reginamq.engine.broker import Broker
from reginamq.store import Store
from reginamq.store.sharded import ShardedStore


class MemberWatch(Periodic):
    def __init__(self, broker: Broker, interval: float, on_added: Callable[[Store], None]):
        super().__init__(interval, "member-watch")
        self._broker = broker
        self._on_added = on_added

    async def tick(self) -> None:
        store = self._broker.store
        assert isinstance(store, ShardedStore)
        await store.homes.forget_moved()
        added = await store.grow()
        if not added:
            return
        for member in added:
            self._on_added(member)
        await self._broker.waiters.listen_again()
        self._log.info("serving %d added member database(s); %d in all", len(added), len(store.member_stores()))
