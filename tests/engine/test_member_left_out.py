"""The operator's reads over several member databases while one is out of reach
(store/merging.py, ``on_reached``; docs/shards.md, "Failure of one member"): listings and counts
answer from the members reached, as one database holding their rows would, and name the member
they left out; writes that must reach every member, and a read no member answers, still fail."""

from __future__ import annotations

from dataclasses import replace

import pytest

from reginamq.common.errors import Unavailable
from reginamq.engine.partial import members_left_out
from reginamq.store.database import Database
from reginamq.store.members import Deployment
from reginamq.store.sharded import ShardedStore
from tests.engine.helpers import push, sharded


async def without(deployment: Deployment, ordinals: set[int]) -> ShardedStore:
    """A store of ``deployment`` whose members ``ordinals`` cannot be reached."""
    away = Database("postgresql://127.0.0.1:1/nowhere", 1)
    down = Deployment([replace(member, database=away) if member.ordinal in ordinals else member
                       for member in deployment.members], deployment.numbers_from)
    crippled = ShardedStore([member.database for member in down.members])
    await crippled.join(down)
    return crippled


async def test_listings_answer_from_the_members_reached_and_name_the_one_left_out(database_url):
    async with sharded(database_url) as (deployment, store):
        names = [f"p{n}" for n in range(30)]
        await push(store.messages, [("left", name, name) for name in names])
        reached = set()
        for member in deployment.members[:2]:
            reached |= {row[0] for row in await member.database.fetch(
                "SELECT p.name FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = 'left'")}
        assert 0 < len(reached) < len(names)
        crippled = await without(deployment, {2})
        with members_left_out() as left_out:
            assert await crippled.resources.partition_count("left", None) == len(reached)
            page = await crippled.resources.partition_page("left", None, 100, 0)
            assert {row["name"] for row in page} == reached
            assert (await crippled.resources.queue("left"))["partitions"] == len(reached)
            assert (await crippled.resources.overview())["partitions"] >= len(reached)
            assert [row["queue_name"] for row in await crippled.statistics.queues("left")] == ["left"]
            assert await crippled.dead_letters.page("left", None, None, None, None, 10, 0) == []
        assert left_out == {2}
        with pytest.raises(Unavailable):
            await crippled.consumer_groups.seek("g", "left", True, None)
        with members_left_out() as left_out:
            assert await store.resources.partition_count("left", None) == len(names)
        assert left_out == set()


async def test_a_listing_no_member_answers_is_unavailable(database_url):
    async with sharded(database_url) as (deployment, _):
        crippled = await without(deployment, {0, 1, 2})
        with pytest.raises(Unavailable):
            await crippled.resources.partition_count(None, None)
