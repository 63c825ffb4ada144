"""Transactions over several member databases (store/two_phase.py): all commit or none does,
and whatever a coordinator leaves prepared is finished by the recovery as the one recorded
outcome says. The members are databases of their own on the session's PostgreSQL, and a
coordinator killed at a step is the state it leaves behind: transactions prepared on
connections that are gone, with or without an outcome recorded."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import asyncpg
import pytest

from reginamq.common.errors import Unavailable
from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.two_phase import TwoPhase, transaction_name
from tests.engine.helpers import leave_prepared, member_databases

HOLDER = "two-phase-test"


@contextlib.asynccontextmanager
async def members(database_url, count: int = 3):
    async with member_databases(database_url, count) as urls:
        databases = [Database(url, 4) for url in urls]
        for database in databases:
            await database.open()
        try:
            yield dict(enumerate(databases))
        finally:
            for database in databases:
                await database.close()


def writing(note: str):
    """A member's work: one row written through a store family (a leader lease named ``note``)."""
    async def work(store: Store) -> str:
        assert await store.leadership.take(note, HOLDER, 60)
        return note
    return work


async def notes(database: Database) -> list[str]:
    return [row["name"] for row in await database.fetch(
        "SELECT name FROM rq_leader_leases WHERE holder = $1 ORDER BY name", HOLDER)]


async def prepared_names(database: Database) -> list[str]:
    return [row["gid"] for row in await database.fetch(
        "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")]


async def decisions(catalog: Database) -> dict[uuid.UUID, str]:
    return {row["gid"]: row["outcome"] for row in await catalog.fetch("SELECT gid, outcome FROM rq_decisions")}


async def leave_lease_prepared(database: Database, gid: uuid.UUID, ordinal: int, note: str) -> None:
    """What a coordinator killed after its prepare on ``ordinal`` leaves there: the lease
    ``note`` taken in a prepared transaction whose connection is gone."""
    await leave_prepared(database.dsn, transaction_name(gid, ordinal), "SELECT rq_take_leader_lease($1, $2, 60)",
                         note, HOLDER)


async def nothing_left(databases: dict[int, Database]) -> None:
    """No member holds a note or a prepared transaction."""
    for database in databases.values():
        assert await notes(database) == []
        assert await prepared_names(database) == []


async def test_every_member_commits_and_nothing_is_left_prepared_or_recorded(database_url):
    async with members(database_url) as databases:
        results = await TwoPhase(databases).run({0: writing("a0"), 1: writing("a1"), 2: writing("a2")})
        assert results == {0: "a0", 1: "a1", 2: "a2"}
        for ordinal, database in databases.items():
            assert await notes(database) == [f"a{ordinal}"]
            assert await prepared_names(database) == []
        assert await decisions(databases[0]) == {}


async def test_a_work_that_raises_commits_nothing_anywhere(database_url):
    async def refuse(store: Store) -> None:
        raise ValueError("refused")

    async with members(database_url) as databases:
        with pytest.raises(ValueError, match="refused"):
            await TwoPhase(databases).run({0: writing("b0"), 1: writing("b1"), 2: refuse})
        await nothing_left(databases)
        assert await decisions(databases[0]) == {}


async def test_a_prepare_that_fails_rolls_back_the_members_already_prepared(database_url):
    async with members(database_url) as databases:
        # the same name already prepared on member 2 makes this transaction's prepare there fail
        coordinator = TwoPhase(databases)
        taken = uuid.uuid4()
        await leave_lease_prepared(databases[2], taken, 2, "squatter")
        original = uuid.uuid4
        try:
            uuid.uuid4 = lambda: taken
            with pytest.raises(asyncpg.DuplicateObjectError):
                await coordinator.run({0: writing("c0"), 1: writing("c1"), 2: writing("c2")})
        finally:
            uuid.uuid4 = original
        assert await notes(databases[0]) == [] and await notes(databases[1]) == []
        assert await prepared_names(databases[0]) == [] and await prepared_names(databases[1]) == []
        assert await prepared_names(databases[2]) == [transaction_name(taken, 2)]
        assert await TwoPhase(databases, in_doubt_after=0).recover() == 1
        assert await notes(databases[2]) == []


async def test_killed_before_its_decision_the_recovery_rolls_every_member_back(database_url):
    async with members(database_url) as databases:
        gid = uuid.uuid4()
        for ordinal in (0, 2):  # killed after preparing on 0 and 2, before 1
            await leave_lease_prepared(databases[ordinal], gid, ordinal, f"d{ordinal}")
        assert await TwoPhase(databases).recover() == 0, "young prepared transactions are left alone"
        assert await TwoPhase(databases, in_doubt_after=0).recover() == 2
        await nothing_left(databases)
        assert await decisions(databases[0]) == {gid: "abort"}


async def test_killed_after_its_decision_the_recovery_commits_every_member(database_url):
    async with members(database_url) as databases:
        gid = uuid.uuid4()
        for ordinal in databases:
            await leave_lease_prepared(databases[ordinal], gid, ordinal, f"e{ordinal}")
        assert await databases[0].fetchval("SELECT rq_decide($1, 'commit', 'rq')", gid) == "commit"
        # killed midway through its commits: member 1 committed already
        await databases[1].execute(f"COMMIT PREPARED '{transaction_name(gid, 1)}'")
        assert await TwoPhase(databases, in_doubt_after=0).recover() == 2
        for ordinal, database in databases.items():
            assert await notes(database) == [f"e{ordinal}"]
            assert await prepared_names(database) == []


class StalledCatalog(Database):
    """A catalog before which the coordinator stalls past the bound: the recovery runs just
    before the coordinator records its outcome."""

    recovery: TwoPhase

    async def fetchval(self, sql, *args):
        if "rq_decide" in sql and args[1] == "commit":
            assert await self.recovery.recover() == 2
        return await super().fetchval(sql, *args)


async def test_a_coordinator_that_stalled_past_the_bound_finds_abort_and_rolls_back(database_url):
    async with members(database_url) as databases:
        stalled = StalledCatalog(databases[0].dsn, 4)
        await stalled.open()
        try:
            everyone = {**databases, 0: stalled}
            stalled.recovery = TwoPhase(everyone, in_doubt_after=0)
            with pytest.raises(Unavailable, match="rolled back"):
                await TwoPhase(everyone).run({1: writing("s1"), 2: writing("s2")})
        finally:
            await stalled.close()
        await nothing_left(databases)


async def test_the_first_outcome_recorded_is_the_one_every_caller_reads(database_url):
    async with members(database_url, count=1) as databases:
        catalog = databases[0]
        aborted, committed = uuid.uuid4(), uuid.uuid4()
        assert await catalog.fetchval("SELECT rq_decide($1, 'abort', 'rq')", aborted) == "abort"
        assert await catalog.fetchval("SELECT rq_decide($1, 'commit', 'rq')", aborted) == "abort"
        assert await catalog.fetchval("SELECT rq_decide($1, 'commit', 'rq')", committed) == "commit"
        assert await catalog.fetchval("SELECT rq_decide($1, 'abort', 'rq')", committed) == "commit"
        racing = uuid.uuid4()
        outcomes = await asyncio.gather(*(catalog.fetchval("SELECT rq_decide($1, $2, 'rq')", racing, outcome)
                                          for outcome in ["commit", "abort"] * 8))
        assert len(set(outcomes)) == 1


async def test_recoveries_running_at_once_finish_each_transaction_once(database_url):
    async with members(database_url) as databases:
        gids = [uuid.uuid4() for _ in range(5)]
        for number, gid in enumerate(gids):
            for ordinal in databases:
                await leave_lease_prepared(databases[ordinal], gid, ordinal, f"f{number}-{ordinal}")
            if number % 2 == 0:
                await databases[0].fetchval("SELECT rq_decide($1, 'commit', 'rq')", gid)
        finished = await asyncio.gather(*(TwoPhase(databases, in_doubt_after=0).recover() for _ in range(3)))
        assert sum(finished) == len(gids) * len(databases)
        for ordinal, database in databases.items():
            assert await notes(database) == sorted(f"f{number}-{ordinal}" for number in (0, 2, 4))
            assert await prepared_names(database) == []


async def test_outcomes_are_forgotten_only_when_no_member_can_still_wait_for_them(database_url):
    async with members(database_url) as databases:
        old, waiting = uuid.uuid4(), uuid.uuid4()
        catalog = databases[0]
        await catalog.fetchval("SELECT rq_decide($1, 'commit', 'rq')", old)
        await catalog.fetchval("SELECT rq_decide($1, 'commit', 'rq')", waiting)
        await catalog.execute("UPDATE rq_decisions SET decided_at = now() - interval '2 days'")
        await leave_lease_prepared(databases[1], waiting, 1, "g1")
        away = Database("postgresql://nobody@127.0.0.1:1/none", 1)
        await away.open()
        try:
            # a member that cannot be reached may still hold either: nothing is forgotten
            assert await TwoPhase({**databases, 3: away}, in_doubt_after=3600).recover() == 0
            assert set(await decisions(catalog)) == {old, waiting}
        finally:
            await away.close()
        # every member answered: the outcome nobody waits for goes, the waited-for one stays
        assert await TwoPhase(databases, in_doubt_after=3600).recover() == 0
        assert set(await decisions(catalog)) == {waiting}
        assert await TwoPhase(databases, in_doubt_after=0).recover() == 1
        assert await notes(databases[1]) == ["g1"]


async def test_one_member_runs_as_a_plain_transaction(database_url):
    async with members(database_url, count=2) as databases:
        assert await TwoPhase(databases).run({1: writing("h1")}) == {1: "h1"}
        assert await notes(databases[1]) == ["h1"]
        assert await decisions(databases[0]) == {}


async def test_a_member_that_is_away_leaves_nothing_committed(database_url):
    async with members(database_url, count=2) as databases:
        away = Database("postgresql://nobody@127.0.0.1:1/none", 1)
        await away.open()
        try:
            with pytest.raises(Unavailable):
                await TwoPhase({**databases, 2: away}).run({0: writing("i0"), 1: writing("i1"), 2: writing("i2")})
        finally:
            await away.close()
        await nothing_left(databases)


async def test_a_deadlock_in_a_members_work_is_retried_whole(database_url):
    attempts = []

    async def deadlocked_once(store: Store) -> str:
        attempts.append(1)
        assert await store.leadership.take(f"j2-{len(attempts)}", HOLDER, 60)
        if len(attempts) == 1:
            raise asyncpg.DeadlockDetectedError("deadlock detected")
        return "j2"

    async with members(database_url) as databases:
        assert await TwoPhase(databases).run({0: writing("j0"), 2: deadlocked_once}) == {0: "j0", 2: "j2"}
        assert len(attempts) == 2
        assert await notes(databases[0]) == ["j0"]
        assert await notes(databases[2]) == ["j2-2"], "the first attempt left nothing"
        for database in databases.values():
            assert await prepared_names(database) == []


async def test_a_unit_joins_members_as_it_uses_them_and_commits_one_member_without_preparing(database_url):
    async with members(database_url) as databases:
        coordinator = TwoPhase(databases)

        async def on_one(joined) -> list[str]:
            store = await joined.store(1)
            assert await store.leadership.take("k1", HOLDER, 60)
            return await prepared_names(databases[1])  # seen from outside, meanwhile

        assert await coordinator.atomically(on_one) == []
        assert await notes(databases[1]) == ["k1"]
        assert await decisions(databases[0]) == {}, "one member: no outcome to record"

        async def on_two_then_refused(joined) -> None:
            assert await (await joined.store(2)).leadership.take("k2", HOLDER, 60)
            assert await (await joined.store(0)).leadership.take("k0", HOLDER, 60)
            raise RuntimeError("refused")

        with pytest.raises(RuntimeError):
            await coordinator.atomically(on_two_then_refused)
        assert await notes(databases[0]) == [] and await notes(databases[2]) == []


async def test_units_that_wait_on_each_other_across_members_are_rolled_back_and_retried(database_url):
    async with members(database_url) as databases:
        coordinator = TwoPhase(databases)
        first_taken = {0: asyncio.Event(), 1: asyncio.Event()}
        attempts: list[int] = []

        def unit(mine: int, theirs: int):
            async def work(joined) -> None:
                attempts.append(mine)
                if attempts.count(mine) > 1:  # tried again: in ordinal order, which can only wait
                    mine_now, theirs_now = 0, 1
                else:
                    mine_now, theirs_now = mine, theirs
                assert await (await joined.store(mine_now)).leadership.take(f"m{mine_now}", HOLDER, 60)
                first_taken[mine].set()
                await first_taken[theirs].wait()
                # the first time, each waits for the other's lock on the other database: only the
                # bound ends it
                assert await (await joined.store(theirs_now)).leadership.take(f"m{theirs_now}", HOLDER, 60)
            return work

        await asyncio.wait_for(asyncio.gather(coordinator.atomically(unit(0, 1)), coordinator.atomically(unit(1, 0))),
                               timeout=60)
        assert len(attempts) >= 3, "a unit was rolled back and tried again"
        assert await notes(databases[0]) == ["m0"] and await notes(databases[1]) == ["m1"]
        for database in databases.values():
            assert await prepared_names(database) == []
