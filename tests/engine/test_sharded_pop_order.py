"""Which members a wildcard pop over three member databases asks, and in what order
(store/sharded_messages.py, docs/shards.md "Routes over members"): a member is asked only when
the pop has something to look at there; the home of the oldest hint is asked first, so that a
member whose partitions are hinted less often than another's is served in hint order and never
starves; work that no hint names is found by the backlog sweep on whichever member holds it;
members that each have something to look at are asked together, the room split between them."""

from __future__ import annotations

import uuid
from collections import Counter

import orjson

from reginamq.engine import hot_partitions
from reginamq.engine import pop as pops
from reginamq.engine.hot_partitions import HotPartitions
from reginamq.engine.names import QUEUE_MODE
from reginamq.store.members import place
from reginamq.store.sharded import ShardedStore
from tests.engine.helpers import push, sharded
from tests.engine.test_waiters import engine_broker, process_state, wait_listening


class Counted:
    """A member's ``messages`` family that counts its pops."""

    def __init__(self, messages, ordinal: int, calls: Counter):
        self._messages, self._ordinal, self._calls = messages, ordinal, calls

    async def pop(self, *arguments):
        self._calls[self._ordinal] += 1
        return await self._messages.pop(*arguments)

    def __getattr__(self, name: str):
        return getattr(self._messages, name)


def counting(store: ShardedStore) -> Counter:
    """How many times the sharded pops call each member's ``messages.pop`` from now on (by ordinal)."""
    calls: Counter = Counter()
    pooled = store.messages._pooled
    pooled[:] = [Counted(messages, ordinal, calls) for ordinal, messages in enumerate(pooled)]
    return calls


async def wildcard(store: ShardedStore, queue: str, hints: list[str], *, scan: bool = False, sweep: bool = False,
                   partitions: int = 1, batch: int = 100, report: bool = False) -> tuple[list[str], list[str]]:
    """One wildcard pop of ``queue`` in queue mode, consumed at once; answers the partition ids
    it delivered from and the hints it handed back."""
    rows = await store.messages.pop(queue, None, None, None, QUEUE_MODE, batch, partitions, True, 30,
                                    str(uuid.uuid4()), "all", None, None, None, sweep, hints, None, scan, None, report)
    trailer = rows.pop() if rows and rows[-1][1] is None else None
    return [str(row[1]) for row in rows], [str(hint) for hint in (trailer[9] if trailer else [])]


def names_on(deployment, queue: str, count: int) -> dict[int, list[str]]:
    """``count`` partition names of ``queue`` that placement puts on each member."""
    ids = [member.id for member in deployment.members]
    on: dict[int, list[str]] = {ordinal: [] for ordinal in range(len(ids))}
    n = 0
    while min(len(names) for names in on.values()) < count:
        name = f"p{n}"
        if len(on[place(queue, name, ids)]) < count:
            on[place(queue, name, ids)].append(name)
        n += 1
    return on


async def ids_of(store: ShardedStore, queue: str, names: list[str]) -> dict[str, str]:
    listed = await store.homes.stores[0].directory.lookup([(queue, name) for name in names])
    return {name: str(listed[queue, name]) for name in names}


async def test_a_pop_asks_only_the_members_it_has_something_to_look_at(database_url):
    async with sharded(database_url) as (deployment, store):
        on = names_on(deployment, "a", 2)
        await push(store.messages, [("a", name, f"t-{name}") for names in on.values() for name in names])
        ids = await ids_of(store, "a", [name for names in on.values() for name in names])
        calls = counting(store)

        assert await wildcard(store, "a", []) == ([], [])
        assert calls == Counter(), "no hints, no look-up, no sweep, no policy to ask: no member is asked"

        delivered, _ = await wildcard(store, "a", [ids[on[2][0]]], partitions=3)
        assert delivered == [ids[on[2][0]]]
        assert calls == Counter({2: 1}), "only the member of the hint is asked, though the pop had room left"

        calls.clear()
        delivered, _ = await wildcard(store, "a", [], scan=True, partitions=10)
        assert sorted(delivered) == sorted(ids[name] for name in on[0] + on[1] + on[2][1:])
        assert calls == Counter({0: 1, 1: 1, 2: 1}), "a look-up of the recent writes asks every member"

        calls.clear()
        await wildcard(store, "a", [], report=True, partitions=10)
        assert sum(calls.values()) == 1, "the group's policy is asked of one member once it answers"


async def test_the_oldest_hint_is_checked_first_whichever_member_holds_it(database_url):
    async with sharded(database_url) as (deployment, store):
        on = names_on(deployment, "o", 3)
        await push(store.messages, [("o", name, f"t-{name}") for names in on.values() for name in names])
        ids = await ids_of(store, "o", [name for names in on.values() for name in names])
        oldest = ids[on[1][0]]
        busier = [ids[name] for name in on[0]]  # more hints, all younger
        delivered, handed_back = await wildcard(store, "o", [oldest, *busier])
        assert delivered == [oldest]
        assert sorted(handed_back) == sorted(busier), "the hints not reached stay hints"


async def test_a_member_hinted_less_often_is_not_starved_by_a_busier_one(database_url):
    """A reader whose hints come mostly from one member, faster than it pops: the other
    member's partition, hinted once, is delivered once its hint is the oldest, as on one
    database, instead of being handed back behind the busier member's hints on every pop."""
    async with sharded(database_url) as (deployment, store):
        on = names_on(deployment, "s", 40)
        hot = HotPartitions()
        hot.take("s", QUEUE_MODE, 1)  # the reader exists: pushes from now on hint it
        quiet = on[2][0]
        delivered_at: dict[str, int] = {}
        for round_ in range(30):
            pushed = on[0][(2 * round_) % 40], on[0][(2 * round_ + 1) % 40]  # two a round from the busy member
            if round_ == 3:
                pushed = (*pushed, quiet)
            await push(store.messages, [("s", name, f"t-{round_}-{name}") for name in pushed])
            hot.pushed("s", list((await ids_of(store, "s", list(pushed))).values()))
            hints, _since, _scan = hot.take("s", QUEUE_MODE, 1)
            delivered, handed_back = await wildcard(store, "s", hints)
            hot.give_back("s", QUEUE_MODE, handed_back)
            for partition_id in delivered:
                delivered_at.setdefault(partition_id, round_)
        quiet_id = (await ids_of(store, "s", [quiet]))[quiet]
        # a pop takes the 8 oldest hints and hands back those it did not reach, behind the
        # hints pushed meanwhile, as on one database: the quiet hint leads a pop's hints within
        # a few rounds, and that pop delivers it
        assert delivered_at.get(quiet_id, 30) <= 15, "the quiet member's partition waited behind the busy one's"


async def test_work_no_hint_names_is_found_by_the_sweep_on_any_member(database_url):
    async with sharded(database_url) as (deployment, store):
        on = names_on(deployment, "w", 3)
        items = [("w", name, f"t-{name}-{k}") for names in on.values() for name in names for k in range(2)]
        await push(store.messages, items)
        calls = counting(store)
        found: list[str] = []
        pops = 0
        while True:
            rows = await store.messages.pop("w", None, None, None, QUEUE_MODE, 100, 1, True, 30, str(uuid.uuid4()),
                                            "all", None, None, None, True, [], None, False, None, False)
            pops += 1
            trailer = rows.pop() if rows and rows[-1][1] is None else None
            found += [orjson.loads(b"{" + fragment + b"}")["transactionId"] for row in rows for fragment in row[5]]
            if not rows:
                assert trailer is not None and trailer[8] is False, "every member swept and found nothing"
                break
            assert pops <= 9, "each pop takes a partition"
        assert sorted(found) == sorted(txid for _, _, txid in items)
        assert all(calls[ordinal] >= 3 for ordinal in range(3)), "every member's sweep was asked in turn"


async def test_a_look_up_of_recent_writes_reaches_each_member_in_turn(database_url):
    """Work that no hint names on one member (written before the reader's hints began), while
    another member's partitions keep coming as hints: the reader's look-ups of the recent
    writes start at each member in turn, so one of the first three delivers it."""
    async with sharded(database_url) as (deployment, store):
        on = names_on(deployment, "r", 6)
        await push(store.messages, [("r", name, f"t-{name}") for name in on[0] + on[2][:1]])
        busy = await ids_of(store, "r", on[0])
        unhinted = (await ids_of(store, "r", on[2][:1]))[on[2][0]]
        delivered_at = None
        for attempt in range(6):
            delivered, _ = await wildcard(store, "r", [busy[on[0][attempt]]], scan=True)
            assert len(delivered) == 1
            if delivered == [unhinted]:
                delivered_at = attempt
                break
        assert delivered_at is not None and delivered_at < 3, "the member without hints waited behind the hinted one"


async def test_members_with_hints_are_asked_together_the_room_split_by_their_hints(database_url):
    """Three hinted partitions on one member and one on another, four messages in each, a pop
    of up to 8 messages: both members are asked at once, for 6 and 2 (in proportion to their
    hints, at least one each). Asked in turn, the first member would have filled the pop alone."""
    async with sharded(database_url) as (deployment, store):
        on = names_on(deployment, "t", 3)
        busy, quiet = on[0], on[1][:1]
        await push(store.messages, [("t", name, f"t-{name}-{k}") for name in busy + quiet for k in range(4)])
        ids = await ids_of(store, "t", busy + quiet)
        calls = counting(store)
        rows = await store.messages.pop("t", None, None, None, QUEUE_MODE, 8, 8, True, 30, str(uuid.uuid4()),
                                        "all", None, None, None, False, [ids[name] for name in busy + quiet],
                                        None, False, None, False)
        trailer = rows.pop()
        by_member = Counter(0 if str(row[1]) in {ids[name] for name in busy} else 1
                            for row in rows for _ in row[5])
        assert calls == Counter({0: 1, 1: 1}), "each member with hints is asked once"
        assert by_member == Counter({0: 6, 1: 2})
        assert [str(hint) for hint in trailer[9]] == [ids[busy[2]]], "the hint the busy member did not reach"

        calls.clear()
        delivered, handed_back = await wildcard(store, "t", [ids[busy[2]], ids[quiet[0]]], batch=1)
        assert delivered == [ids[busy[2]]] and handed_back == [ids[quiet[0]]]
        assert calls == Counter({0: 1}), "a pop of one message asks the members in turn, and stops when full"


async def test_a_pop_that_hands_hints_back_wakes_the_next_poller_of_its_group(database_url, monkeypatch):
    """Four hinted partitions on one member and one on another, a pop of up to 5 partitions:
    the busy member's share is less than 4, so it hands hints back although the pop is not
    full. The engine then wakes the group's next parked poller, as after a full pop, instead of
    leaving those partitions to the poller's next re-check. The reader is past its catch-up
    look-ups and its sweep rests, as a busy reader's mostly are: the pop asks for hints only."""
    monkeypatch.setattr(hot_partitions, "CATCH_UP_SECONDS", 0.0)
    monkeypatch.setattr(pops, "SWEEP_PAUSE", 600.0)
    async with sharded(database_url) as (deployment, store):
        hot, fill_waits, waiters = process_state()
        await waiters.listen(store)
        try:
            await wait_listening(waiters)
            broker = engine_broker(waiters, store, hot, fill_waits)
            request = pops.PopRequest(queue="h", partition=None, namespace=None, task=None, group=QUEUE_MODE,
                                      batch=100, partitions=5, auto_ack=True, wait=False, timeout_ms=0,
                                      lease_seconds=60, subscription_mode="all", subscription_from=None)
            on = names_on(deployment, "h", 4)
            await push(store.messages, [("h", on[2][0], "t-first")])
            assert len((await pops.pop(broker, request)).rows) == 1  # the reader's first pop looks it all up
            assert (await pops.pop(broker, request)).rows == []  # its sweep finds nothing more and rests
            await push(store.messages, [("h", name, f"t-{name}") for name in on[0] + on[1][:1]])
            for _ in range(100):
                if await waiters.sync(store) and hot.waiting("h", QUEUE_MODE) == 5:
                    break
            assert hot.waiting("h", QUEUE_MODE) == 5, "the push's notices became hints"
            next_poller = waiters.park("h", QUEUE_MODE)
            popped = await pops.pop(broker, request)
            delivered = len({row[1] for row in popped.rows})
            assert 0 < delivered < 5, "the busy member filled its share of the partitions: the pop is not full"
            assert hot.waiting("h", QUEUE_MODE) == 5 - delivered, "the hints handed back wait for the next poller"
            assert next_poller.done() and next_poller.result() is True
        finally:
            await waiters.stop()
