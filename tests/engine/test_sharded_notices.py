"""Wake-ups over three member databases (store/sharded_notices.py): a process listening through
the deployment's store hears a push committed on any member, and its sync is answered only once
every member has echoed it."""

from __future__ import annotations

import asyncio

from reginamq.engine.waiters import Waiters
from reginamq.store.members import place
from reginamq.store.notices import SYNC_CHANNEL
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
