"""Wake-ups over three member databases (store/sharded_notices.py): a process listening through
the deployment's store hears a push committed on any member, and its sync is answered only once
every member has echoed it."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from reginamq.engine.waiters import Waiters
from reginamq.store.database import Database
from reginamq.store.members import Deployment, place
from reginamq.store.notices import CHANNEL, SYNC_CHANNEL
from reginamq.store.sharded import ShardedStore
from tests.engine.helpers import push, sharded


async def until_listening(waiters: Waiters) -> None:
    async with asyncio.timeout(30):
        while not waiters.listening:
            await asyncio.sleep(0.05)


async def test_a_push_on_any_member_wakes_a_parked_pop_and_syncs_hear_every_member(database_url):
    async with sharded(database_url) as (deployment, store):
        ids = [member.id for member in deployment.members]
        on_member = {place("w", f"p{n}", ids): f"p{n}" for n in range(40)}
        await push(store.messages, [("w", on_member[ordinal], "first") for ordinal in range(3)])
        waiters = Waiters()
        await waiters.listen(store)
        try:
            await until_listening(waiters)
            for ordinal in range(3):
                parked = waiters.park("w", "g")
                await push(store.messages, [("w", on_member[ordinal], f"wake-{ordinal}")])
                assert await asyncio.wait_for(parked, timeout=30) is True
            assert await waiters.sync(store) is True
        finally:
            await waiters.stop()


async def test_a_notice_sent_on_every_member_is_heard_once_every_member_echoed_it(database_url):
    async with sharded(database_url) as (_deployment, store):
        heard: list[str] = []
        second = asyncio.Event()

        def hear(token: str) -> None:
            heard.append(token)
            if token == "second":
                second.set()

        listeners = await store.notices.listen({SYNC_CHANNEL: hear}, lambda: None)
        try:
            for token in ("first", "second"):
                await store.notices.notify(SYNC_CHANNEL, [token], lambda: None)
            await asyncio.wait_for(second.wait(), timeout=30)
            # each member delivers in commit order: every echo of "first" came before "second"'s
            assert heard == ["first", "second"]
        finally:
            await listeners.close()


async def test_a_push_over_every_member_is_announced_on_one_and_wakes_each_members_readers(database_url):
    async with sharded(database_url) as (deployment, store):
        ids = [member.id for member in deployment.members]
        # one queue a member: a parked pop of each is woken only by the notice of that member's write
        queue_on = {place(f"once{n}", "p", ids): f"once{n}" for n in range(40)}
        queues = [queue_on[ordinal] for ordinal in range(3)]
        await push(store.messages, [(queue, "p", "first") for queue in queues])
        heard: list[list[str]] = [[] for _ in range(3)]
        listeners = [await member.notices.listen({CHANNEL: heard[ordinal].append}, lambda: None)
                     for ordinal, member in enumerate(store.member_stores())]
        waiters = Waiters()
        await waiters.listen(store)
        try:
            await until_listening(waiters)
            parked = [waiters.park(queue, "g") for queue in queues]
            await push(store.messages, [(queue, "p", "wake") for queue in queues])
            assert await asyncio.wait_for(asyncio.gather(*parked), timeout=30) == [True] * 3
            assert await waiters.sync(store) is True
            # each partition's notice went out once, all of them on one member
            assert sorted(map(len, heard)) == [0, 0, 3], heard
            assert sorted(notice.split("\n")[0] for notice in max(heard, key=len)) == sorted(queues)
        finally:
            await waiters.stop()
            for listener in listeners:
                await listener.close()


async def test_a_member_out_of_reach_leaves_the_others_heard_and_no_sync_trusted(database_url):
    async with sharded(database_url) as (deployment, store):
        ids = [member.id for member in deployment.members]
        queue_on = {place(f"reach{n}", "p", ids): f"reach{n}" for n in range(40)}
        await push(store.messages, [(queue_on[0], "p", "first")])
        away = Database("postgresql://127.0.0.1:1/nowhere", 1)
        down = Deployment([replace(member, database=away) if member.ordinal == 2 else member
                           for member in deployment.members], deployment.numbers_from)
        crippled = ShardedStore([member.database for member in down.members])
        await crippled.join(down)
        waiters = Waiters()
        await waiters.listen(crippled)
        try:
            # a listening connection on member 0 that lasts (not one opened and dropped again)
            catalog = deployment.members[0].database
            async with asyncio.timeout(30):
                while not await catalog.fetchval(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND query LIKE 'LISTEN%' AND backend_start < now() - interval '1 second'"):
                    await asyncio.sleep(0.05)
            # the members it reaches are heard: a push on member 0 wakes the parked pop
            parked = waiters.park(queue_on[0], "g")
            await push(store.messages, [(queue_on[0], "p", "wake")])
            assert await asyncio.wait_for(parked, timeout=10) is True
            # no sync can tell that every member was heard
            assert waiters.listening is False
            assert await waiters.sync(crippled) is False
        finally:
            await waiters.stop()
