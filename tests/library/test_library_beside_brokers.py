"""A library broker with its maintenance on, beside an HTTP broker on the same database: the
background work is elected between them as between brokers, so when the HTTP broker stops (its
loops hand their leases back) the library takes retention and statistics over and fires the
timers the HTTP broker was given."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid

import asyncpg
import httpx

from reginamq import Broker
from reginamq.maintenance.leader import ElectedLoop
from tests.conftest import create_database, eventually, spool_dir, stop_process
from tests.faults.helpers import start_broker_on
from tests.integration.helpers import post_operations


async def test_the_library_takes_the_elected_work_and_fires_timers_when_the_broker_stops(database_url, queue):
    url = await asyncio.to_thread(create_database, database_url, "beside")
    process, broker_url = await asyncio.to_thread(start_broker_on, url, None, 1)
    try:
        async with Broker(url, environ={}, maintenance=True, process_metrics=False, spool_dir=spool_dir(),
                          maintenance_interval=0.3) as library:
            async with httpx.AsyncClient(base_url=broker_url, timeout=30) as http:
                [scheduled] = await post_operations(http, "/api/v1/timers", [{
                    "op": "schedule", "queue": queue, "timerKey": "reminder", "delayMs": 1500,
                    "payload": base64.b64encode(json.dumps({"due": True}).encode()).decode(),
                    "txn": str(uuid.uuid4())}])
                assert scheduled["ok"] is True
            await asyncio.to_thread(stop_process, process)

            assert library._runtime is not None and library._runtime._maintenance is not None
            mine = {loop._holder for loop in library._runtime._maintenance._loops if isinstance(loop, ElectedLoop)}

            async def holding_both() -> bool:
                conn = await asyncpg.connect(url)
                try:
                    rows = await conn.fetch("SELECT name, holder FROM rq_leader_leases WHERE expires_at > now()")
                finally:
                    await conn.close()
                held = {row["name"] for row in rows if row["holder"] in mine}
                return {"retention", "stats"} <= held

            assert await eventually(holding_both, 20), "the library did not take the loops the broker handed back"

            async def fired():
                return (await library.pop(queue, batch=10, auto_ack=True)).messages

            messages = await eventually(fired, 20, interval=0.2)
            assert [(message.data, message.transaction_id) for message in messages] == [
                ({"due": True}, scheduled["txn"])]
    finally:
        await asyncio.to_thread(stop_process, process)
