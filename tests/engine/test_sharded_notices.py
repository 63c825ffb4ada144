"""Wake-ups over three member databases (store/sharded_notices.py): a process listening through
the deployment's store hears a push committed on any member, and its sync is answered only once
every member has echoed it; a long poll's sync goes to the catalog alone."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace

import asyncpg

from reginamq.engine import pop as pops
from reginamq.engine.waiters import Waiters
from reginamq.store.database import Database
from reginamq.store.members import Deployment, place
from reginamq.store.notices import CHANNEL, SYNC_CHANNEL
from reginamq.store.sharded import ShardedStore
from tests.conftest import let_a_long_poll_park
from tests.engine.helpers import push, sharded
from tests.engine.test_waiters import engine_broker, process_state, queue_mode_long_poll


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


@contextlib.asynccontextmanager
async def sync_tokens_by_member(deployment: Deployment) -> AsyncIterator:
    """Each member's ``rq_sync`` notifications as an observer there hears them; the callable it
    yields sends a last token on every member and answers, once every observer heard it, the
    tokens each member carried before it (by ordinal)."""
    heard: list[list[str]] = [[] for _ in deployment.members]
    observers = []
    for ordinal, member in enumerate(deployment.members):
        observer = await asyncpg.connect(member.database.dsn)
        await observer.add_listener(SYNC_CHANNEL, lambda _c, _p, _ch, token, at=ordinal: heard[at].append(token))
        observers.append(observer)

    async def tokens_so_far() -> list[list[str]]:
        last = f"last-{sum(map(len, heard))}"
        for observer in observers:
            await observer.execute("SELECT pg_notify($1, $2)", SYNC_CHANNEL, last)
        async with asyncio.timeout(30):
            while not all(last in tokens for tokens in heard):
                await asyncio.sleep(0.01)
        carried = [[token for token in tokens if not token.startswith("last-")] for tokens in heard]
        for tokens in heard:
            tokens.clear()
        return carried

    try:
        yield tokens_so_far
    finally:
        for observer in observers:
            await observer.close()


async def test_a_catalog_only_notice_goes_out_on_the_catalog_and_is_heard_with_its_echo(database_url):
    async with sharded(database_url) as (deployment, store), sync_tokens_by_member(deployment) as tokens_so_far:
        heard: list[str] = []
        listeners = await store.notices.listen({SYNC_CHANNEL: heard.append}, lambda: None)
        try:
            await store.notices.notify(SYNC_CHANNEL, ["catalog"], lambda: None, catalog_only=True)
            await store.notices.notify(SYNC_CHANNEL, ["everywhere"], lambda: None)
            async with asyncio.timeout(30):
                while "everywhere" not in heard:
                    await asyncio.sleep(0.01)
            assert heard == ["catalog", "everywhere"]  # each once, in the order sent
            assert await tokens_so_far() == [["catalog", "everywhere"], ["everywhere"], ["everywhere"]]
        finally:
            await listeners.close()


async def test_a_long_poll_hears_the_catalog_alone_and_a_pop_that_answers_at_once_every_member(database_url):
    """A long poll's sync round is one notification, on the catalog; a pop without a wait still
    hears every member. A push on another member still reaches the long poll: its announcement
    wakes it once parked."""
    async with sharded(database_url) as (deployment, store), sync_tokens_by_member(deployment) as tokens_so_far:
        ids = [member.id for member in deployment.members]
        queue = next(f"lp{n}" for n in range(100) if place(f"lp{n}", "Default", ids) == 2)
        await push(store.messages, [(queue, "Default", "first")])
        hot, fill_waits, waiters = process_state()
        await waiters.listen(store)
        try:
            await until_listening(waiters)
            broker = engine_broker(waiters, store, hot, fill_waits)
            request = queue_mode_long_poll(queue, batch=10, timeout_ms=10_000)
            await tokens_so_far()
            assert len((await pops.pop(broker, request)).rows) == 1  # its first pop looks it all up
            assert [len(tokens) for tokens in await tokens_so_far()] == [1, 0, 0]

            await push(store.messages, [(queue, "Default", "second")])
            assert len((await pops.pop(broker, replace(request, wait=False))).rows) == 1
            assert [len(tokens) for tokens in await tokens_so_far()] == [1, 1, 1]

            popping = asyncio.create_task(pops.pop(broker, request))
            await let_a_long_poll_park()
            assert not popping.done()
            await push(store.messages, [(queue, "Default", "third")])  # on member 2
            assert len((await asyncio.wait_for(popping, 10)).rows) == 1
        finally:
            await waiters.stop()


async def test_a_catalog_sync_joins_a_whole_round_gathering_and_a_whole_sync_never_joins_a_catalog_one(database_url):
    async with sharded(database_url) as (deployment, store), sync_tokens_by_member(deployment) as tokens_so_far:
        waiters = Waiters()
        await waiters.listen(store)
        try:
            await until_listening(waiters)
            await tokens_so_far()
            assert await asyncio.gather(waiters.sync(store), waiters.sync(store, catalog_only=True)) == [True, True]
            assert [len(tokens) for tokens in await tokens_so_far()] == [1, 1, 1]  # one round covered both
            assert await asyncio.gather(waiters.sync(store, catalog_only=True), waiters.sync(store)) == [True, True]
            assert [len(tokens) for tokens in await tokens_so_far()] == [2, 1, 1]  # the catalog's, then a whole one
        finally:
            await waiters.stop()
