"""The partition directory on the catalog (store/directory.py): a name is listed once, by the
first claim, whatever claims race for it; and a name placed on a member, with an id that member
minted, is found on that member by its id alone (store/members.py)."""

from __future__ import annotations

import asyncio
import random
import uuid

from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.members import home_of, join_up, place
from tests.engine.helpers import member_databases, opened


async def test_the_first_claim_of_a_name_is_the_one_listed(database_url):
    async with member_databases(database_url, 1) as urls, opened(urls) as [catalog]:
        directory = Store(catalog).directory
        first = {("orders", f"c{n}"): uuid.uuid4() for n in range(3)}
        assert await directory.claim(first) == first
        later = {name: uuid.uuid4() for name in [("orders", "c1"), ("orders", "c9"), ("other", "c1")]}
        listed = await directory.claim(later)
        assert listed == {("orders", "c1"): first[("orders", "c1")], ("orders", "c9"): later[("orders", "c9")],
                          ("other", "c1"): later[("other", "c1")]}
        assert await directory.lookup([("orders", "c0"), ("orders", "c5"), ("other", "c1")]) == {
            ("orders", "c0"): first[("orders", "c0")], ("other", "c1"): later[("other", "c1")]}
        await directory.forget("orders")
        assert await directory.lookup(list(first)) == {}
        assert await directory.lookup([("other", "c1")]) == {("other", "c1"): later[("other", "c1")]}


async def test_racing_claims_agree_on_every_name_and_never_deadlock(database_url):
    async with member_databases(database_url, 1) as urls, opened(urls) as [catalog]:
        directory = Store(catalog).directory
        names = [("q", f"p{n}") for n in range(200)]

        async def claimant(seed: int):
            order = random.Random(seed).sample(names, len(names))
            return await directory.claim({name: uuid.uuid4() for name in order})

        answers = await asyncio.gather(*(claimant(seed) for seed in range(8)))
        assert all(answer == answers[0] for answer in answers)
        assert sorted(answers[0]) == sorted(names)


async def test_a_name_placed_and_minted_on_its_member_is_found_there_by_its_id(database_url):
    async with member_databases(database_url, 3) as urls, opened(urls) as databases:
        deployment = await join_up(databases)
        ids = [member.id for member in deployment.members]
        catalog: Database = deployment.members[0].database
        for n in range(60):
            name = ("orders", f"customer-{n}")
            home = place(*name, ids)
            minted = await deployment.members[home].database.fetchval("SELECT rq_new_partition_id()")
            listed = await Store(catalog).directory.claim({name: minted})
            assert home_of(listed[name], deployment.numbers_from) == home
        homes = {place("orders", f"customer-{n}", ids) for n in range(60)}
        assert homes == {0, 1, 2}
