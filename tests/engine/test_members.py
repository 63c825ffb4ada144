"""Forming and checking a deployment's member databases (store/members.py): new databases form
one deployment, whatever order and however many brokers at once; databases that do not make
up exactly one deployment are refused with a message that says why."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.members import MembershipMismatch, check_deployment, join_up
from tests.engine.helpers import member_databases


@contextlib.asynccontextmanager
async def opened(urls: list[str]):
    databases = [Database(url, 4) for url in urls]
    for database in databases:
        await database.open()
    try:
        yield databases
    finally:
        for database in databases:
            await database.close()


async def own_ids(urls: list[str]) -> list:
    async with opened(urls) as databases:
        return [(await Store(database).membership.state())[0] for database in databases]


async def test_new_databases_form_one_deployment_in_the_order_given(database_url):
    async with member_databases(database_url, 3) as urls, opened(urls) as databases:
        members = await join_up(databases)
        ids = await own_ids(urls)
        assert [member.id for member in members] == ids
        assert [member.ordinal for member in members] == [0, 1, 2]
        assert [member.database for member in members] == databases
        for database in databases:
            assert (await Store(database).membership.state())[1] == ids
        # another broker, given the same databases in another order, finds the same deployment
        reordered = [urls[2], urls[0], urls[1]]
        assert await check_deployment(reordered) == ids


async def test_brokers_forming_at_once_form_one_deployment(database_url):
    async with member_databases(database_url, 3) as urls:
        orders = [urls, urls[::-1], [urls[1], urls[2], urls[0]], urls]
        formed = await asyncio.gather(*(check_deployment(order) for order in orders))
        assert all(ids == formed[0] for ids in formed)
        assert sorted(formed[0]) == sorted(await own_ids(urls))
        async with opened(urls) as databases:
            lists = [(await Store(database).membership.state())[1] for database in databases]
        assert lists == [formed[0]] * 3


async def test_one_database_forms_a_deployment_of_one_and_keeps_it(database_url):
    async with member_databases(database_url, 1) as urls:
        first = await check_deployment(urls)
        assert first == await own_ids(urls)
        assert await check_deployment(urls) == first


async def test_a_database_outside_the_deployment_is_refused(database_url):
    async with member_databases(database_url, 3) as urls:
        await check_deployment(urls[:2])
        with pytest.raises(MembershipMismatch, match="is not a member of the deployment"):
            await check_deployment(urls)


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
                assert (await Store(database).membership.state())[1] == [], "nothing was formed"
