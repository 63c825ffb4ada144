"""Forming and checking a deployment's member databases (store/members.py): new databases form
one deployment, whatever order and however many brokers at once; databases that do not make
up exactly one deployment are refused with a message that says why."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.members import (
    FORMING_TRANSACTIONS,
    MAX_MEMBERS,
    MembershipMismatch,
    check_deployment,
    home_of,
    join_up,
)
from reginamq.store.two_phase import transaction_name
from tests.engine.helpers import leave_prepared, member_databases, opened


async def own_ids(urls: list[str]) -> list:
    async with opened(urls) as databases:
        return [(await Store(database).membership.state()).id for database in databases]


async def test_new_databases_form_one_deployment_in_the_order_given(database_url):
    async with member_databases(database_url, 3) as urls, opened(urls) as databases:
        members = (await join_up(databases)).members
        ids = await own_ids(urls)
        assert [member.id for member in members] == ids
        assert [member.ordinal for member in members] == [0, 1, 2]
        assert [member.database for member in members] == databases
        for database in databases:
            assert (await Store(database).membership.state()).members == ids
        # another broker, given the same databases in another order, finds the same deployment
        # and serves them in their ordinal order
        reordered = [urls[2], urls[0], urls[1]]
        assert await check_deployment(reordered) == urls


async def test_brokers_forming_at_once_form_one_deployment(database_url):
    async with member_databases(database_url, 3) as urls:
        orders = [urls, urls[::-1], [urls[1], urls[2], urls[0]], urls]
        formed = await asyncio.gather(*(check_deployment(order) for order in orders))
        assert all(order == formed[0] for order in formed)
        assert sorted(formed[0]) == sorted(urls)
        async with opened(urls) as databases:
            lists = [(await Store(database).membership.state()).members for database in databases]
        assert lists == [await own_ids(formed[0])] * 3


async def test_one_database_forms_a_deployment_of_one_and_keeps_it(database_url):
    async with member_databases(database_url, 1) as urls:
        assert await check_deployment(urls) == urls
        async with opened(urls) as [database]:
            assert (await Store(database).membership.state()).members == await own_ids(urls)
        assert await check_deployment(urls) == urls


async def test_a_database_in_no_deployment_waits_to_be_added(database_url):
    async with member_databases(database_url, 3) as urls:
        await check_deployment(urls[:2])
        # given first, it is still served after the members, and nothing is written into it
        assert await check_deployment([urls[2], urls[1], urls[0]]) == urls
        async with opened(urls[2:]) as [waiting]:
            assert (await Store(waiting).membership.state()).members == []


async def test_a_member_left_out_is_refused(database_url):
    async with member_databases(database_url, 3) as urls:
        await check_deployment(urls)
        with pytest.raises(MembershipMismatch, match="has 3 member databases and 2 were given"):
            await check_deployment(urls[:2])


async def test_members_of_two_deployments_are_refused(database_url):
    async with member_databases(database_url, 4) as urls:
        await check_deployment(urls[:2])
        await check_deployment(urls[2:])
        with pytest.raises(MembershipMismatch, match="is not a member of the deployment"):
            await check_deployment(urls)


async def test_one_database_given_twice_is_refused(database_url):
    async with member_databases(database_url, 2) as urls:
        twice = urls[0].replace("postgresql://", "postgres://")
        with pytest.raises(MembershipMismatch, match="are the same database"):
            await check_deployment([urls[0], urls[1], twice])
        async with opened(urls) as databases:
            for database in databases:
                assert (await Store(database).membership.state()).members == [], "nothing was formed"


async def new_partition_ids(database: Database, count: int) -> list[uuid.UUID]:
    return [row[0] for row in await database.fetch("SELECT rq_new_partition_id() FROM generate_series(1, $1)", count)]


async def test_each_member_numbers_its_partitions_so_that_their_ids_tell_it(database_url):
    async with member_databases(database_url, 3) as urls, opened(urls) as databases:
        # the first database gave out numbers before the deployment was formed: those stay its
        before = await new_partition_ids(databases[0], 5)
        deployment = await join_up(databases)
        assert deployment.numbers_from % MAX_MEMBERS == 0 and deployment.numbers_from > 5
        assert [home_of(partition, deployment.numbers_from) for partition in before] == [0] * 5
        for member in deployment.members:
            made = await new_partition_ids(member.database, 50)
            assert len(set(made)) == 50
            assert {home_of(partition, deployment.numbers_from) for partition in made} == {member.ordinal}
        # an id made before ids carried numbers is the catalog's
        assert home_of(uuid.uuid4(), deployment.numbers_from) == 0


async def leave_forming_prepared(urls: list[str], ids: list[uuid.UUID], gid: uuid.UUID, numbers_from: int) -> list[int]:
    """What a broker killed while forming leaves: the list prepared in every database, keyed in
    id order as formers key them. Returns the databases' indexes in that order."""
    order = sorted(range(len(urls)), key=lambda index: ids[index])
    for key, index in enumerate(order):
        await leave_prepared(urls[index], transaction_name(gid, key, FORMING_TRANSACTIONS),
                             "SELECT rq_form_members($1, $2)", ids, numbers_from)
    return order


async def test_a_forming_left_halfway_after_its_decision_is_finished_by_the_next_broker(database_url):
    async with member_databases(database_url, 3) as urls, opened(urls) as databases:
        ids = await own_ids(urls)
        gid = uuid.uuid4()
        order = await leave_forming_prepared(urls, ids, gid, 8192)
        await databases[order[0]].fetchval("SELECT rq_decide($1, 'commit', $2)", gid, FORMING_TRANSACTIONS)
        await databases[order[1]].execute(f"COMMIT PREPARED '{transaction_name(gid, 1, FORMING_TRANSACTIONS)}'")
        deployment = await join_up(databases, in_doubt_after=0)
        assert [member.id for member in deployment.members] == ids
        assert deployment.numbers_from == 8192
        for database in databases:
            assert (await Store(database).membership.state()).members == ids


async def test_a_forming_left_halfway_before_its_decision_is_rolled_back_and_formed_anew(database_url):
    async with member_databases(database_url, 3) as urls, opened(urls) as databases:
        ids = await own_ids(urls)
        await leave_forming_prepared(urls, ids[::-1], uuid.uuid4(), 8192)
        deployment = await join_up(databases, in_doubt_after=0)
        assert [member.id for member in deployment.members] == ids, "formed anew, in the order given"
        assert deployment.numbers_from == MAX_MEMBERS
