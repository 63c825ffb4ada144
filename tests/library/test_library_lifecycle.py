"""Start and stop of an in-process broker: close answers parked polls at once and ends
consumers, calls after close are refused, ``maintenance=False`` runs no elected loop while a
broker with maintenance takes them and hands them back when it stops, start failures are one
StartError, and with no URL the broker runs the embedded PostgreSQL in its data folder, which
the last of its users stops, be it a library broker or `reginamq serve`. A pop cancelled while
its statement runs hands back what the statement leased; a closed broker leaves no task behind."""

from __future__ import annotations

import asyncio
import signal

import asyncpg
import httpx
import pytest

from reginamq import Broker
from reginamq.library import BrokerClosed, StartError
from reginamq.maintenance.leader import ElectedLoop
from tests.conftest import create_database, eventually, free_port, spool_dir
from tests.serve.test_serve import serve_embedded


def own_broker(url: str, **options) -> Broker:
    return Broker(url, environ={}, spool_dir=spool_dir(), **{"maintenance": False, "process_metrics": False, **options})


async def parked(broker: Broker, count: int) -> None:
    async def there():
        return broker._engine is not None and broker._engine.waiters.parked >= count
    assert await eventually(there, 10), "the long polls did not park"


@pytest.fixture(scope="module")
def quiet_database(database_url):
    """A database of its own, where no other broker runs elected loops."""
    return create_database(database_url, "library")


async def test_close_answers_parked_polls_and_ends_consumers(database_url, queue):
    broker = own_broker(database_url)
    await broker.start()
    seen = []

    async def consume():
        async with broker.consume(queue, batch=1) as messages:
            async for message in messages:
                seen.append(message.data)

    poll = asyncio.create_task(broker.pop(queue, wait=True, timeout_ms=600_000))
    consumer = asyncio.create_task(consume())
    await parked(broker, 2)
    await broker.close()
    assert not (await poll).messages  # answered empty at once, not after ten minutes
    await consumer
    assert seen == []
    with pytest.raises(BrokerClosed) as refused:
        await broker.push(queue, [1])
    assert refused.value.status == 503
    await broker.close()  # a second close is a no-op


async def test_elected_loops_run_only_with_maintenance(quiet_database):
    async def holders() -> set[str]:
        conn = await asyncpg.connect(quiet_database)
        try:
            return {row[0] for row in await conn.fetch("SELECT holder FROM rq_leader_leases")}
        finally:
            await conn.close()

    async with own_broker(quiet_database, maintenance_interval=0.1) as without:
        await without.push("q-quiet", [1])
        assert (await without.pop("q-quiet", auto_ack=True)).messages
        async with own_broker(quiet_database, maintenance=True, maintenance_interval=0.1) as with_loops:
            assert with_loops._runtime is not None and with_loops._runtime._maintenance is not None
            theirs = {loop._holder for loop in with_loops._runtime._maintenance._loops
                      if isinstance(loop, ElectedLoop)}
            assert await eventually(lambda: _holding(holders, theirs), 20)
            assert await holders() <= theirs, "the broker without maintenance took an elected loop"
        assert not (await holders()) & theirs, "a stopped broker kept its leases"


async def _holding(holders, theirs: set[str]) -> bool:
    return len(await holders() & theirs) >= 2  # retention and stats


async def test_start_failures_are_one_start_error(fresh_database):
    with pytest.raises(StartError) as refused:
        await own_broker(fresh_database, apply_schema=False).start()
    assert refused.value.error
    with pytest.raises(StartError, match="pool_size"):
        await own_broker(fresh_database, pool_size=0).start()


async def test_without_a_url_the_embedded_postgresql_runs_in_the_data_folder(tmp_path, queue):
    data_dir = tmp_path / "pgdata"
    first = Broker(data_dir=data_dir, environ={}, maintenance=False, spool_dir=spool_dir())
    second = Broker(data_dir=data_dir, environ={}, maintenance=False, spool_dir=spool_dir())
    async with first:
        await first.push(queue, ["embedded"])
        async with second:
            popped = await second.pop(queue)
            assert [message.data for message in popped.messages] == ["embedded"]
            await first.close()  # not the last user: the server stays up for the second
            assert (data_dir / "postmaster.pid").exists()
            await second.ack(popped.messages)
    assert not (data_dir / "postmaster.pid").exists()  # the last user stopped it


async def test_a_broker_process_and_the_library_share_one_embedded_server(tmp_path, queue):
    """A library broker joins the embedded server `reginamq serve` started in its data folder:
    serve stopping leaves the server up for the library, and the library, its last user, stops it."""
    data_dir, port = tmp_path / "pgdata", free_port()
    process = await asyncio.to_thread(serve_embedded, data_dir, port, "--workers", "1")
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            pushed = await http.post("/api/v1/push", json={"items": [{"queue": queue, "payload": "served"}]})
            assert pushed.status_code == 201, pushed.text
        library = Broker(data_dir=data_dir, environ={}, maintenance=False, spool_dir=spool_dir())
        await library.start()
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(process.wait, 60) == 0
    try:
        assert (data_dir / "postmaster.pid").exists(), "serve stopped a server the library still uses"
        popped = await library.pop(queue)
        assert [message.data for message in popped.messages] == ["served"]
        await library.ack(popped.messages)
    finally:
        await library.close()
    assert not (data_dir / "postmaster.pid").exists()  # the last user stopped it


def test_close_leaves_no_task_behind_on_a_plain_asyncio_loop(quiet_database, queue):
    """On an event loop of its own (asyncio's, not uvloop), a broker that ran everything it
    starts (elected loops, process metrics, a consumer renewing its lease, a parked poll) leaves
    no task of its own behind when it closes."""

    async def application() -> set[asyncio.Task]:
        broker = own_broker(quiet_database, maintenance=True, process_metrics=True, maintenance_interval=0.1)
        async with broker:
            await broker.push(queue, ["a", "b"])
            async with broker.consume(queue, batch=1, lease_seconds=2) as messages:
                async for message in messages:
                    await asyncio.sleep(0)  # let the renewer start beside the handler
                    if message.data == "b":
                        break
            poll = asyncio.create_task(broker.pop(queue, wait=True, timeout_ms=600_000))
            await parked(broker, 1)
        assert not (await poll).messages
        return asyncio.all_tasks() - {asyncio.current_task()}

    left = asyncio.run(application())
    assert not left, f"tasks left after close: {left}"


async def test_a_pop_cancelled_while_its_statement_runs_hands_back_what_it_leased(quiet_database, queue):
    """The statement is held behind a lock while its caller is cancelled; it runs to its end
    all the same, and the lease it took is handed back at once: the next pop gets the message
    (a second delivery attempt) instead of waiting out a 300-s lease."""
    async with own_broker(quiet_database) as broker:
        await broker.configure(queue, {"leaseTime": 300})
        await broker.push(queue, ["held"], partition="p")
        locker = await asyncpg.connect(quiet_database)
        try:
            locking = locker.transaction()
            await locking.start()
            await locker.execute("LOCK TABLE rq_consumers IN ACCESS EXCLUSIVE MODE")
            pop = asyncio.create_task(broker.pop(queue, partition="p"))

            async def waiting_on_the_lock() -> bool:
                return bool(await locker.fetchval(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"))

            assert await eventually(waiting_on_the_lock, 10), "the pop's statement did not reach the lock"
            pop.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pop
            await locking.rollback()
        finally:
            await locker.close()

        async def popped_again():
            return (await broker.pop(queue, partition="p")).messages

        again = await eventually(popped_again, 10)
        assert [(message.data, message.delivery_attempt) for message in again] == [("held", 2)]
        await broker.ack(again)
