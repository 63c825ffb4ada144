"""A deployment of several member databases while its catalog is out of reach (docs/shards.md,
"Resolving a name" and "Failure of one member"): a broker that never looked a name up finds
the partitions the other members hold by asking them, and pushes and pops them there; a name
that none of them holds, which the catalog may hold or list, is refused as unavailable."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reginamq.common.errors import Unavailable
from reginamq.store.database import Database
from reginamq.store.members import Deployment, place
from reginamq.store.sharded import ShardedStore
from tests.engine.helpers import pop, push, sharded


async def test_names_held_by_the_members_still_reached_are_found_while_the_catalog_is_down(database_url):
    async with sharded(database_url) as (deployment, store):
        ids = [member.id for member in deployment.members]
        names = [f"p{n}" for n in range(40)]
        on = {ordinal: [name for name in names if place("c", name, ids) == ordinal] for ordinal in range(3)}
        await push(store.messages, [("c", name, f"first-{name}") for name in names])
        away = Database("postgresql://127.0.0.1:1/nowhere", 1)
        down = Deployment([replace(member, database=away) if member.ordinal == 0 else member
                           for member in deployment.members], deployment.numbers_from)
        fresh = ShardedStore([member.database for member in down.members])  # its cache is empty
        await fresh.join(down)

        assert await push(fresh.messages, [("c", name, f"second-{name}") for name in on[1] + on[2]]) == {}
        for ordinal in (1, 2):
            _, delivered, _ = await pop(fresh.messages, "c", on[ordinal][0])
            assert [txid for _, _, txid in delivered] == [f"{step}-{on[ordinal][0]}" for step in ("first", "second")]
        with pytest.raises(Unavailable):
            await push(fresh.messages, [("c", on[0][0], "second")])
        with pytest.raises(Unavailable):
            await pop(fresh.messages, "c", on[0][0])
        with pytest.raises(Unavailable):
            await push(fresh.messages, [("c", "never-named", "new")])
