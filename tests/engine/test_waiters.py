"""The wake-up path itself: a push's NOTIFY resolves a parked future in another connection.

The HTTP long-poll tests cannot tell a wake-up from a back-off re-check; this one can, since
nothing here re-checks: the future resolves only if the notification arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import types
import uuid

import asyncpg
import msgspec

from reginamq.engine import hot_partitions, push, queues
from reginamq.engine.autopilot import Autopilot
from reginamq.engine.encryption import Sealer
from reginamq.engine.hot_partitions import HotPartitions
from reginamq.engine.lease_watcher import LeaseWatcher
from reginamq.engine.meter import Meter
from reginamq.engine.pop import FillWaits, GroupPolicies, PopRequest, SweepPositions, pop
from reginamq.engine.waiters import Waiters
from reginamq.store import Store
from reginamq.store.database import Database
from tests.conftest import connection, let_a_long_poll_park, opened_store


async def wait_listening(waiters: Waiters) -> None:
    for _ in range(100):
        if waiters.listening:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the listener never connected")


async def push_one(database_url: str, queue: str, partitions: tuple[str, ...] = ("Default",)) -> None:
    """One push of a message to each of ``partitions``."""
    prepared = push.prepare([push.PushItem(queue=queue, partition=partition, payload=msgspec.Raw(b"1"))
                             for partition in partitions])
    async with opened_store(database_url) as store:
        await push.write(store, prepared, Sealer())


@contextlib.asynccontextmanager
async def listening(waiters: Waiters, database_url: str):
    """``waiters`` listening through a store of their own until the block ends (then stopped)."""
    async with opened_store(database_url) as store:
        await waiters.listen(store)
        try:
            yield store
        finally:
            await waiters.stop()


def process_state() -> tuple[HotPartitions, FillWaits, Waiters]:
    """A broker process's hints, fill waits and waiters, wired as engine/broker.py wires them."""
    hot, fill_waits = HotPartitions(), FillWaits()
    return hot, fill_waits, Waiters(on_config_change=fill_waits.forget, hot=hot)


def queue_mode_long_poll(queue: str, batch: int, timeout_ms: int) -> PopRequest:
    return PopRequest(queue=queue, partition=None, namespace=None, task=None, group="__QUEUE_MODE__",
                      batch=batch, partitions=1, auto_ack=True, wait=True, timeout_ms=timeout_ms,
                      lease_seconds=60, subscription_mode="all", subscription_from=None)


async def a_push_elsewhere_reaches_a_parked_poll(broker, request: PopRequest, database_url: str) -> int:
    """Park a long poll of ``request``'s queue, push one message from another store: the
    messages the poll got."""
    popping = asyncio.create_task(pop(broker, dataclasses.replace(request, timeout_ms=10_000)))
    await let_a_long_poll_park()
    assert not popping.done()
    await push_one(database_url, request.queue)
    return sum(len(row[5]) for row in (await asyncio.wait_for(popping, 5)).rows)


def engine_broker(waiters: Waiters, store: Store, hot: HotPartitions, fill_waits: FillWaits):
    """The per-process state pop() borrows from the broker (engine/broker.py), without HTTP."""
    return types.SimpleNamespace(waiters=waiters, store=store, sweeps=SweepPositions(), hot=hot,
                                 fill_waits=fill_waits, sealer=Sealer(), meter=Meter(),
                                 policies=GroupPolicies(), autopilot=Autopilot())


@contextlib.asynccontextmanager
async def past_the_first_pops(waiters: Waiters, hot: HotPartitions, fill_waits: FillWaits, database_url: str,
                              request: PopRequest):
    """A broker whose reader of ``request``'s queue has taken a first message and swept once: from
    here on, a long poll of that queue has nothing in sight."""
    async with listening(waiters, database_url) as store:
        broker = engine_broker(waiters, store, hot, fill_waits)
        await wait_listening(waiters)
        await push_one(database_url, request.queue)
        assert len((await pop(broker, request)).rows) == 1  # the reader's first pop looks everything up
        assert (await pop(broker, request)).rows == []  # its sweep found work: this one sweeps on
        yield broker


async def test_a_push_wakes_the_waiters_of_its_queue_and_only_those(database_url):
    waiters = Waiters()
    async with listening(waiters, database_url):
        await wait_listening(waiters)
        queue, other = f"w-{uuid.uuid4().hex[:8]}", f"w-{uuid.uuid4().hex[:8]}"
        mine, theirs, anyone = waiters.park(queue, "g"), waiters.park(other, "g"), waiters.park(None, "g")
        await push_one(database_url, queue)
        assert await asyncio.wait_for(mine, 5) is True
        assert await asyncio.wait_for(anyone, 5) is True  # discovery pops wake on any queue
        await asyncio.sleep(0.3)
        assert not theirs.done()
        waiters.close()
        assert theirs.result() is False  # shutting down answers everyone, empty


async def test_a_push_wakes_one_parked_pop_of_each_consumer_group(database_url):
    """Every group reads every message, so each needs its own wake-up; within a group, one
    (the longest waiting) suffices, it wakes the next if it leaves work behind. The meter hears
    how many pops the push woke."""
    woken: list[int] = []
    waiters = Waiters(on_push_wake=lambda pops, _heard: woken.append(pops))
    async with listening(waiters, database_url):
        await wait_listening(waiters)
        queue = f"w-{uuid.uuid4().hex[:8]}"
        first = {group: waiters.park(queue, group) for group in ("g1", "g2", "g3")}
        second = {group: waiters.park(queue, group) for group in ("g1", "g2", "g3")}
        await push_one(database_url, queue)
        assert await asyncio.wait_for(asyncio.gather(*first.values()), 5) == [True] * 3
        assert woken == [3]
        await asyncio.sleep(0.3)
        assert not any(future.done() for future in second.values())
        assert waiters.wake(queue, "g2") == 1  # a pop of g2 that took all it could wakes g2's next only
        assert woken == [3]  # that wake-up is a pop's, not a push's
        assert second["g2"].result() is True
        assert not second["g1"].done() and not second["g3"].done()


async def test_a_push_wakes_as_many_pops_as_its_partitions_need_in_each_group(database_url):
    """A push to three partitions wakes three one-partition pops of a group, not one (the rest
    would wait for a chain of wake-ups) and not all (the others would find nothing); a pop that
    may claim two partitions counts for two."""
    woken: list[int] = []
    waiters = Waiters(on_push_wake=lambda pops, _heard: woken.append(pops))
    async with listening(waiters, database_url):
        await wait_listening(waiters)
        queue = f"w-{uuid.uuid4().hex[:8]}"
        narrow = [waiters.park(queue, "narrow") for _ in range(5)]
        wide = [waiters.park(queue, "wide", 2) for _ in range(3)]
        await push_one(database_url, queue, ("p1", "p2", "p3"))
        assert await asyncio.wait_for(asyncio.gather(*narrow[:3], *wide[:2]), 5) == [True] * 5
        assert woken == [5]
        await asyncio.sleep(0.3)
        assert not any(future.done() for future in narrow[3:] + wide[2:])


async def test_the_pushing_process_wakes_its_own_pops_and_the_others_only_the_groups_it_could_not_serve(database_url):
    """Two broker processes on one database. The one that pushed wakes its own parked pops
    before it announces and names the groups it served in full; the other leaves those groups
    parked (they would find nothing) and wakes the rest: a group parked only there, and one
    whose pop here is bound to a named partition (it may not take what the push wrote)."""
    here_woken: list[tuple[int, bool]] = []
    here, there = Waiters(on_push_wake=lambda pops, heard: here_woken.append((pops, heard))), Waiters()
    queue = f"w-{uuid.uuid4().hex[:8]}"
    async with listening(here, database_url), listening(there, database_url) as store:
        await wait_listening(here)
        await wait_listening(there)
        served_here = here.park(queue, "served")
        left_there = there.park(queue, "served")
        only_there = there.park(queue, "elsewhere")
        bound_here = here.park(queue, "bound", bound=True)
        bound_there = there.park(queue, "bound")
        prepared = push.prepare([push.PushItem(queue=queue, partition="p1", payload=msgspec.Raw(b"1"))])
        store.messages.announce_through(here.wake_before_announcing)
        await push.execute(store, prepared, Sealer())
        assert served_here.done() and bound_here.done()  # at once, before the notice went out
        assert here_woken[0] == (2, False)  # woken here, counted as no announcement heard
        assert await asyncio.wait_for(asyncio.gather(only_there, bound_there), 5) == [True, True]
        assert await there.sync(store) is True  # it has heard the push's notice
        assert not left_there.done()
        assert await here.sync(store) is True  # the pusher hears its own notice and wakes nothing more
        assert here_woken == [(2, False), (0, True)]


async def test_a_push_hands_its_partitions_to_the_readers_of_its_queue(database_url):
    hot = HotPartitions()
    waiters = Waiters(hot=hot)
    async with listening(waiters, database_url):
        await wait_listening(waiters)
        queue = f"w-{uuid.uuid4().hex[:8]}"
        assert hot.take(queue, "g", 1)[0] == []  # the reader registers with its first pop
        parked = waiters.park(queue, "g")
        await push_one(database_url, queue)
        assert await asyncio.wait_for(parked, 5) is True
        async with connection(database_url) as conn:
            partition_id = await conn.fetchval(
                "SELECT p.id::text FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1", queue)
        assert hot.take(queue, "g", 1)[0] == [partition_id]
        assert hot.take(queue, "other", 1)[0] == []  # a reader that registered later saw no push


async def test_a_pop_the_pushing_process_wakes_finds_the_partitions_it_was_woken_for(database_url):
    """The pusher wakes its own pops before its notice goes out, so the partitions must be
    hints by then (a woken pop with nothing to ask would wait out its back-off); hearing its
    own notice back must not hand them out a second time."""
    hot = HotPartitions()
    here = Waiters(hot=hot)
    queue = f"w-{uuid.uuid4().hex[:8]}"
    async with listening(here, database_url) as store:
        await wait_listening(here)
        assert hot.take(queue, "g", 1)[0] == []  # the reader registers with its first pop
        parked = here.park(queue, "g")
        store.messages.announce_through(here.wake_before_announcing)
        await push.execute(store, push.prepare([push.PushItem(queue=queue, payload=msgspec.Raw(b"1"))]), Sealer())
        assert parked.done()
        [partition_id] = hot.take(queue, "g", 1)[0]
        assert await here.sync(store) is True  # the own notice is back
        assert hot.take(queue, "g", 1)[0] == []
        await push_one(database_url, queue)  # another process's push to the same partition
        assert await here.sync(store) is True
        assert hot.take(queue, "g", 1)[0] == [partition_id]


async def test_concurrent_syncs_share_one_notification_and_a_later_one_sends_its_own(database_url):
    """Every pop of a burst needs to know it heard all pushes committed before it; one
    notification sent after they all asked proves that for all of them."""
    waiters = Waiters()
    observer = await asyncpg.connect(database_url)
    seen: list[str] = []
    await observer.add_listener("rq_sync", lambda _c, _p, _ch, token: seen.append(token))
    try:
        # The store's pool is opened beforehand (no connect inside the timeout), with two
        # connections, as the broker's: a round's answer can be heard before its own statement
        # has returned on its connection.
        async with listening(waiters, database_url) as store:
            await wait_listening(waiters)
            assert await asyncio.gather(*(waiters.sync(store) for _ in range(50))) == [True] * 50
            assert await waiters.sync(store) is True
            await observer.execute("SELECT 1")  # hear what was committed before
            for _ in range(50):
                if len(seen) >= 2:
                    break
                await asyncio.sleep(0.02)
            assert len(seen) == 2
    finally:
        await observer.close()


async def test_a_sync_caller_that_gives_up_leaves_the_others_of_its_round_answered(database_url):
    """A pop cancelled while it waits for its round (its client hung up, the broker stops)
    must not cancel the round its neighbours wait on."""
    waiters = Waiters()
    async with listening(waiters, database_url) as store:
        await wait_listening(waiters)
        callers = [asyncio.ensure_future(waiters.sync(store)) for _ in range(3)]
        await asyncio.sleep(0)  # all three have joined the round
        callers[1].cancel()
        results = await asyncio.gather(*callers, return_exceptions=True)
        assert results[0] is True and results[2] is True
        assert isinstance(results[1], asyncio.CancelledError)
        assert await waiters.sync(store) is True  # a later round is not blocked by the cancelled call


async def test_an_expired_lease_becomes_a_hint_for_its_reader_and_wakes_a_pop(database_url):
    """A lease that runs out announces nothing; the watcher is how a waiting reader hears."""
    hot = HotPartitions()
    waiters = Waiters(hot=hot)
    queue = f"w-{uuid.uuid4().hex[:8]}"
    await push_one(database_url, queue)
    async with connection(database_url) as conn:
        partition_id = await conn.fetchval(
            "SELECT p.id::text FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1", queue)
        # the message leased and the lease run out a second ago
        await conn.execute(
            "INSERT INTO rq_consumers (partition_id, consumer_group, committed, span_start, span_end, lease_id,"
            " lease_expires_at) VALUES ($1, '__QUEUE_MODE__', -1, 0, 0, gen_random_uuid(),"
            " now() - interval '1 second')", uuid.UUID(partition_id))
    async with opened_store(database_url) as store:
        watcher = LeaseWatcher(store, hot, waiters)
        assert await watcher.look() == 0  # no reader in this process: nothing to hand
        assert hot.take(queue, "__QUEUE_MODE__", 1)[0] == []  # the reader registers
        other_group = waiters.park(queue, "g")
        parked = waiters.park(queue, "__QUEUE_MODE__")
        assert await watcher.look() == 1
    assert parked.done() and parked.result() is True
    assert not other_group.done()  # the lease was the queue-mode reader's: only its pop is woken
    assert hot.take(queue, "__QUEUE_MODE__", 1)[0] == [partition_id]


async def test_a_pop_hears_a_configure_committed_elsewhere_before_it_takes_the_fill_wait(database_url):
    """Another node sets minPopWaitTime while this process is busy (its event loop blocked,
    so the notification waits unread in the listener's socket); the next pop here must still
    apply it, not the option list it cached a moment ago."""
    hot, fill_waits, waiters = process_state()
    queue = f"w-{uuid.uuid4().hex[:8]}"
    request = queue_mode_long_poll(queue, batch=3, timeout_ms=30_000)
    async with listening(waiters, database_url) as store:
        broker = engine_broker(waiters, store, hot, fill_waits)
        await wait_listening(waiters)
        await push_one(database_url, queue)
        assert await fill_waits.seconds(store, request) == 0  # read and cached: no fill wait yet

        def configure_elsewhere() -> None:
            async def configure() -> None:
                database = Database(database_url, 1)
                await database.open()
                try:
                    await queues.configure(Store(database),
                                           queues.ConfigureBody(queue=queue, options={"minPopWaitTime": 60_000}))
                finally:
                    await database.close()
            asyncio.run(configure())

        elsewhere = threading.Thread(target=configure_elsewhere)
        elsewhere.start()
        elsewhere.join()  # blocks this loop: the configure's notification is not heard yet
        popping = asyncio.create_task(pop(broker, request))
        await let_a_long_poll_park()
        assert not popping.done()  # one message of three: it waits for the batch to fill
        await push_one(database_url, queue)
        await push_one(database_url, queue)
        assert sum(len(row[5]) for row in (await asyncio.wait_for(popping, 10)).rows) == 3


async def test_an_idle_long_poll_parks_without_a_sync_round_and_a_push_elsewhere_still_reaches_it(
        database_url, monkeypatch):
    """A long poll whose reader holds no hints, with no look-up or sweep due, has nothing to ask:
    it parks without a sync round (a notification on its way wakes it anyway). A pop that
    answers at once still hears everything first, and a push made elsewhere reaches the parked
    poll."""
    monkeypatch.setattr(hot_partitions, "CATCH_UP_SECONDS", 0.0)  # the reader is past its catch-up
    hot, fill_waits, waiters = process_state()
    queue = f"w-{uuid.uuid4().hex[:8]}"
    request = queue_mode_long_poll(queue, batch=10, timeout_ms=200)
    observer = await asyncpg.connect(database_url)
    rounds: list[str] = []
    await observer.add_listener("rq_sync", lambda _c, _p, _ch, token: rounds.append(token))

    async def rounds_so_far() -> int:
        await observer.execute("SELECT 1")  # hear what was committed before
        return len(rounds)

    try:
        async with past_the_first_pops(waiters, hot, fill_waits, database_url, request) as broker:
            before = await rounds_so_far()
            assert before >= 1
            assert (await pop(broker, request)).rows == []  # nothing in sight
            assert await rounds_so_far() == before
            assert (await pop(broker, dataclasses.replace(request, wait=False))).rows == []
            assert await rounds_so_far() == before + 1
            assert await a_push_elsewhere_reaches_a_parked_poll(broker, request, database_url) == 1
    finally:
        await observer.close()


async def test_a_long_poll_of_a_queue_that_does_not_exist_yet_rests_and_gets_its_first_message(
        database_url, monkeypatch):
    """A consumer started before its queue exists asks the database once, then rests (no query
    at each re-check) until a push creates the queue, whose message reaches it at once."""
    monkeypatch.setattr(hot_partitions, "CATCH_UP_SECONDS", 0.0)  # the reader is past its catch-up
    hot, fill_waits, waiters = process_state()
    queue = f"w-{uuid.uuid4().hex[:8]}"
    request = dataclasses.replace(queue_mode_long_poll(queue, batch=10, timeout_ms=800), group="late",
                                  auto_ack=False)
    async with listening(waiters, database_url) as store:
        broker = engine_broker(waiters, store, hot, fill_waits)
        await wait_listening(waiters)
        assert (await pop(broker, request)).rows == []  # re-checks at 0.1, 0.2 and 0.4 s of its 0.8
        assert broker.meter.pop_queries == 1
        assert await a_push_elsewhere_reaches_a_parked_poll(broker, request, database_url) == 1


async def test_an_idle_long_poll_parks_once_and_a_recheck_finds_work_whose_wake_up_was_lost(
        database_url, monkeypatch):
    """An idle long poll's re-checks run as timers: one that finds nothing to ask leaves the pop
    parked (it parks once however many re-checks its wait holds); one that finds a hint wakes it,
    so work whose wake-up was lost is still delivered on the back-off, not at the time-out."""
    monkeypatch.setattr(hot_partitions, "CATCH_UP_SECONDS", 0.0)  # the reader is past its catch-up
    hot, fill_waits, waiters = process_state()
    queue = f"w-{uuid.uuid4().hex[:8]}"
    request = queue_mode_long_poll(queue, batch=10, timeout_ms=10_000)
    parks = 0
    park = waiters.park

    def counted_park(*args, **kwargs):
        nonlocal parks
        parks += 1
        return park(*args, **kwargs)

    monkeypatch.setattr(waiters, "park", counted_park)
    async with past_the_first_pops(waiters, hot, fill_waits, database_url, request) as broker:
        counts = []
        for timeout_ms in (300, 1_500):  # re-checks at 0.1 and 0.3 s, or at 0.1, 0.3, 0.7 and 1.5 s
            parks = 0
            started = asyncio.get_running_loop().time()
            assert (await pop(broker, dataclasses.replace(request, timeout_ms=timeout_ms))).rows == []
            assert asyncio.get_running_loop().time() - started >= timeout_ms / 1000 - 0.05  # it waited
            counts.append(parks)
        assert counts[0] == counts[1] <= 2  # the longer wait's re-checks parked it no more often

        monkeypatch.setattr(waiters, "wake", lambda *_args, **_kwargs: 0)  # the push's wake-up is lost
        popping = asyncio.create_task(pop(broker, request))
        await let_a_long_poll_park()
        await push_one(database_url, queue)  # heard: a hint for the reader, but nobody is woken
        got = await asyncio.wait_for(popping, 5)  # a re-check (at most a second apart) finds the hint
        assert sum(len(row[5]) for row in got.rows) == 1
