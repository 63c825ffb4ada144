"""An elected loop that stops gives its lease back, so another process takes the loop over at
its next tick instead of after LEASE_SECONDS; it never gives back a lease it does not hold."""

from __future__ import annotations

import uuid

from reginamq.maintenance.leader import LEASE_SECONDS, ElectedLoop
from reginamq.store import Store
from tests.conftest import connection, eventually, opened_store


class Rounds(ElectedLoop):
    def __init__(self, store: Store, name: str):
        self.LEASE_NAME = name
        super().__init__(store, interval=0.05)

    async def round(self) -> dict[str, int]:
        return {}


async def holder(database_url: str, name: str) -> str | None:
    async with connection(database_url) as conn:
        return await conn.fetchval("SELECT holder FROM rq_leader_leases WHERE name = $1", name)


async def test_a_stopped_loop_gives_its_lease_back_and_another_takes_it_at_once(database_url):
    name = f"test-{uuid.uuid4().hex[:8]}"
    async with opened_store(database_url) as store:
        first, second = Rounds(store, name), Rounds(store, name)
        first.start()
        assert await eventually(lambda: _ran(first))
        second.start()
        await first.stop()
        assert await eventually(lambda: _ran(second), seconds=LEASE_SECONDS / 3)
        await second.stop()
        assert await holder(database_url, name) is None


async def test_a_loop_that_never_held_the_lease_leaves_the_holders_lease(database_url):
    name = f"test-{uuid.uuid4().hex[:8]}"
    async with opened_store(database_url) as store:
        assert await store.leadership.take(name, "elsewhere:1:x", LEASE_SECONDS)
        loop = Rounds(store, name)
        loop.start()
        await loop.stop()
        assert await holder(database_url, name) == "elsewhere:1:x"
        assert not await store.leadership.release(name, "someone-else")
        assert await store.leadership.release(name, "elsewhere:1:x")


async def _ran(loop: Rounds) -> bool:
    return loop.rounds > 0
