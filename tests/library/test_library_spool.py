"""The disk spool in the library: while its database is down, a push through the library is
answered ``buffered`` (fsynced to the spool, as a broker worker answers it), and once the
database is back the library replays it, in order, behind what was there before."""

from __future__ import annotations

import asyncio

from reginamq import Broker
from reginamq.library import Unavailable
from reginamq.store.embedded import EmbeddedPostgres
from tests.conftest import eventually, spool_dir


async def test_a_push_while_the_database_is_down_is_buffered_and_replayed_in_order(tmp_path, queue):
    server = EmbeddedPostgres(tmp_path / "pgdata")
    url = await asyncio.to_thread(server.start)
    try:
        async with Broker(url, environ={}, maintenance=False, process_metrics=False, spool_dir=spool_dir()) as broker:
            await broker.push(queue, ["before"])
            await asyncio.to_thread(server.stop, "immediate")
            during = await broker.push(queue, ["during-1", "during-2"])
            assert [result.status for result in during] == ["buffered", "buffered"]

            await asyncio.to_thread(server.start)
            seen: list[str] = []

            async def replayed() -> bool:
                try:
                    popped = await broker.pop(queue, batch=10)
                except Unavailable:
                    return False  # the pool has not reconnected yet
                seen.extend(message.data for message in popped.messages)
                if popped.messages:
                    await broker.ack(popped.messages)
                return len(seen) >= 3

            assert await eventually(replayed, 60, interval=0.2), seen
            assert seen == ["before", "during-1", "during-2"]
    finally:
        if server.started_here:
            server.stop(mode="immediate")
