"""The operator families over three member databases (store/sharded_dead_letters.py,
sharded_message_admin.py, sharded_traces.py, sharded_reads.py): the same data, written in the
same order into one database and into a deployment of three members, gets the same answer from
every call (ids and instants aside, which each database mints), and every write changes the
one member that holds what it names and no other."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import asyncpg
import uuid_utils

from reginamq.engine import queues
from reginamq.engine.names import QUEUE_MODE
from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.members import Deployment
from reginamq.store.routing import Pooled
from reginamq.store.sharded_dead_letters import ShardedDeadLetters
from reginamq.store.sharded_message_admin import ShardedMessageAdmin
from reginamq.store.sharded_reads import ShardedReads
from reginamq.store.sharded_traces import ShardedTraces
from reginamq.store.two_phase import TwoPhase
from tests.engine.helpers import columns, member_databases, opened, pop, sharded

QUEUE, OTHER = "ops", "ops-other"
PARTITIONS = [f"p{n:02}" for n in range(36)]
GROUP = "g1"


@dataclass(frozen=True)
class Id:
    """An argument standing for partition ``partition``'s id in each database."""

    partition: str


@dataclass
class Twins:
    """One database and a deployment of three, holding the same data."""

    single: Store
    database: Database  # the single one's
    fleet: SimpleNamespace  # the deployment's families, under the store's names
    deployment: Deployment
    ids: tuple[dict[str, str], dict[str, str]]  # partition name → id, in the single database and in the fleet

    async def both(self, family: str, method: str, *args: Any) -> tuple[Any, Any]:
        """``family.method(*args)`` on the single database, then on the deployment, each with its
        own partition ids for the :class:`Id` arguments."""
        answers = []
        for target, ids in ((self.single, self.ids[0]), (self.fleet, self.ids[1])):
            mine = [ids[arg.partition] if isinstance(arg, Id) else arg for arg in args]
            answers.append(await getattr(getattr(target, family), method)(*mine))
        return answers[0], answers[1]

    async def per_member(self, sql: str, *args: Any) -> list[Any]:
        return [await member.database.fetchval(sql, *args) for member in self.deployment.members]

    async def execute_everywhere(self, sql: str, *args: Any) -> None:
        for database in (self.database, *(member.database for member in self.deployment.members)):
            await database.execute(sql, *args)

    def home(self, partition: str) -> int:
        return self.fleet.homes.of_id(self.ids[1][partition])


def fleet_of(store, members) -> SimpleNamespace:
    return SimpleNamespace(messages=store.messages, homes=store.homes,
                           dead_letters=ShardedDeadLetters(store.homes, members),
                           message_admin=ShardedMessageAdmin(store.homes, members),
                           traces=ShardedTraces(store.homes, members), reads=ShardedReads(store.homes, members))


async def fail(messages, queue: str, partition: str, group: str, status: str) -> str:
    """Pops the next message of ``partition`` for ``group`` and acks it ``status``; its transactionId."""
    lease_id, delivered, _ = await pop(messages, queue, partition, batch=1, group=group)
    (partition_id, _, txid), = delivered
    rows = await messages.ack([group], [partition_id], [txid], [lease_id], [status], [f"boom {txid}"])
    assert rows[0][1], rows
    return txid


@contextlib.asynccontextmanager
async def twins(database_url: str) -> AsyncIterator[Twins]:
    async with sharded(database_url) as (deployment, store), member_databases(database_url, 1) as urls, \
            opened(urls) as (database,):
        pair = Twins(Store(database), database, fleet_of(store, Pooled(store.homes.stores)), deployment, ({}, {}))
        for target in (pair.single, store):
            await queues.configure(target, queues.ConfigureBody(
                queue=QUEUE, options={"retryLimit": 0, "deadLetterQueue": True}))
        # one push per partition, one after another: every partition's messages have their own
        # push time, in the same order in both
        for partition in [*PARTITIONS, "x0", "x1"]:
            queue = QUEUE if partition.startswith("p") else OTHER
            await pair.both("messages", "push",
                            *columns([(queue, partition, f"{partition}-t{k}") for k in range(4)]))
        for side, target in zip(pair.ids, (pair.single, store), strict=True):
            rows = await target.messages.partition_ids([QUEUE] * len(PARTITIONS), PARTITIONS)
            side.update({PARTITIONS[position - 1]: str(partition_id) for position, partition_id in rows})
        # every ack its own statement, so every dead letter its own failure time, in the same order in both
        for number, partition in enumerate(PARTITIONS):
            for target in (pair.single, store):
                await fail(target.messages, QUEUE, partition, QUEUE_MODE, "failed")
                if number % 3 == 0:
                    await fail(target.messages, QUEUE, partition, GROUP, "dlq")
                    await fail(target.messages, QUEUE, partition, GROUP, "dlq")
                if number % 5 == 0:  # t1 leased
                    await pop(target.messages, QUEUE, partition, batch=1)
                elif number % 5 == 1:  # t1 completed
                    await fail(target.messages, QUEUE, partition, QUEUE_MODE, "completed")
        for number, partition in enumerate(PARTITIONS):
            names = ["all", f"order-{number}", "EVEN" if number % 2 == 0 else "odd"]
            for event in range(1 + number % 3):
                await pair.both("traces", "add", str(uuid_utils.uuid7()), Id(partition), f"{partition}-t0", None,
                                f"event-{event}", f'{{"step": {event}}}', names[:1 + event])
        assert {pair.home(partition) for partition in PARTITIONS} == {0, 1, 2}
        yield pair


def dead_letters(rows) -> list[tuple]:
    return [(row["transaction_id"], row["queue_name"], row["partition_name"], row["consumer_group"],
             row["error_message"], row["retry_count"], bytes(row["payload"]), row["total"]) for row in rows]


async def test_dead_letter_pages_purges_and_replays_answer_as_one_database(database_url):
    async with twins(database_url) as pair:
        everything = await pair.both("dead_letters", "page", QUEUE, None, None, None, None, 1000, 0)
        assert len(everything[0]) == 36 + 2 * 12
        assert dead_letters(everything[1]) == dead_letters(everything[0])
        # the failure times of the same rows in each, for a range filter that selects the same rows
        until = [rows[20]["failed_at"] for rows in everything]
        since = [rows[45]["failed_at"] for rows in everything]
        for group, partition, limit, offset in [(None, None, 10, 0), (None, None, 7, 23), (None, None, 9, 55),
                                                (None, None, 5, 60), (None, None, 5, 500), (GROUP, None, 5, 3),
                                                (QUEUE_MODE, None, 100, 30), (None, "p03", 2, 1),
                                                (GROUP, "p04", 10, 0), (None, "nope", 10, 0)]:
            pages = await pair.both("dead_letters", "page", QUEUE, group, partition, None, None, limit, offset)
            assert dead_letters(pages[1]) == dead_letters(pages[0]), (group, partition, limit, offset)
        ranged = [await target.dead_letters.page(QUEUE, None, None, since[side], until[side], 8, 3)
                  for side, target in enumerate((pair.single, pair.fleet))]
        assert len(ranged[0]) == 8 and ranged[0][0]["total"] == 26
        assert dead_letters(ranged[1]) == dead_letters(ranged[0])
        assert await pair.both("dead_letters", "page", OTHER, None, None, None, None, 10, 0) == ([], [])

        # replay: the entry's home only, as one database answers
        entries = [{(row["partition_name"], row["consumer_group"]): row for row in rows} for rows in everything]
        chosen = [entries[side]["p07", QUEUE_MODE] for side in (0, 1)]
        home = pair.home("p07")
        held = await pair.per_member("SELECT count(*) FROM rq_dlq")
        offsets = await pair.per_member("SELECT coalesce(sum(last_offset), 0) FROM rq_partitions")
        new_id = str(uuid_utils.uuid7())
        replayed = [await target.dead_letters.replay(str(entry["id"]), new_id)
                    for target, entry in zip((pair.single, pair.fleet), chosen, strict=True)]
        assert (replayed[1][0], *replayed[1][2:]) == (replayed[0][0], *replayed[0][2:])
        assert replayed[1]["message_offset"] == 4 and str(replayed[1]["partition_id"]) == pair.ids[1]["p07"]
        assert await pair.per_member("SELECT count(*) FROM rq_dlq") == [
            count - (ordinal == home) for ordinal, count in enumerate(held)]
        assert await pair.per_member("SELECT coalesce(sum(last_offset), 0) FROM rq_partitions") == [
            count + (ordinal == home) for ordinal, count in enumerate(offsets)]
        assert await pair.fleet.dead_letters.replay(str(chosen[1]["id"]), str(uuid_utils.uuid7())) is None
        assert await pair.fleet.dead_letters.replay(str(uuid.uuid4()), str(uuid_utils.uuid7())) is None

        # purge of one partition: its home only; of a group over the queue: every member
        home = pair.home("p09")
        held = await pair.per_member("SELECT count(*) FROM rq_dlq")
        purged = await pair.both("dead_letters", "purge", QUEUE, None, "p09")
        assert purged == (3, 3)
        assert await pair.per_member("SELECT count(*) FROM rq_dlq") == [
            count - 3 * (ordinal == home) for ordinal, count in enumerate(held)]
        purged = await pair.both("dead_letters", "purge", QUEUE, GROUP, None)
        assert purged == (2 * 11, 2 * 11)
        assert await pair.per_member("SELECT count(*) FROM rq_dlq WHERE consumer_group = $1", GROUP) == [0, 0, 0]
        after = await pair.both("dead_letters", "page", QUEUE, None, None, None, None, 1000, 0)
        assert len(after[0]) == 34 and dead_letters(after[1]) == dead_letters(after[0])


def messages(rows) -> list[tuple]:
    return [(row[1], row[2], row[4], bytes(row[5]), row[6]) for row in rows]


async def test_message_pages_and_single_messages_answer_as_one_database(database_url):
    async with twins(database_url) as pair:
        for group in (QUEUE_MODE, GROUP):
            for status in (None, "pending", "leased", "completed", "dead"):
                everything = await pair.both("message_admin", "page", QUEUE, None, group, status, None, None,
                                             1000, 0)
                assert everything[0] or group == GROUP, status
                assert messages(everything[1]) == messages(everything[0]), (group, status)
        everything = await pair.both("message_admin", "page", QUEUE, None, QUEUE_MODE, None, None, None,
                                     1000, 0)
        assert len(everything[0]) == 36 * 4
        until = [rows[30][3] for rows in everything]
        since = [rows[100][3] for rows in everything]
        for partition, status, limit, offset in [(None, None, 10, 0), (None, None, 13, 27), (None, "pending", 6, 41),
                                                 (None, None, 10, 140), (None, None, 10, 144),
                                                 ("p05", None, 3, 1), ("nope", None, 10, 0)]:
            pages = await pair.both("message_admin", "page", QUEUE, partition, QUEUE_MODE, status, None,
                                    None, limit, offset)
            assert messages(pages[1]) == messages(pages[0]), (partition, status, limit, offset)
        ranged = [await target.message_admin.page(QUEUE, None, QUEUE_MODE, None, since[side], until[side], 9, 4)
                  for side, target in enumerate((pair.single, pair.fleet))]
        assert len(ranged[0]) == 9 and messages(ranged[1]) == messages(ranged[0])

        def gotten(row) -> tuple | None:
            return None if row is None else (row[0], row[1], row[3], bytes(row[4]), row[5])

        for partition, txid, group in [("p00", "p00-t0", QUEUE_MODE), ("p00", "p00-t1", QUEUE_MODE),
                                       ("p03", "p03-t0", GROUP), ("p12", "p12-t3", GROUP), ("p12", "nope", GROUP)]:
            found = await pair.both("message_admin", "get", Id(partition), txid, group)
            assert gotten(found[1]) == gotten(found[0]), (partition, txid, group)
        assert await pair.fleet.message_admin.get(str(uuid.uuid4()), "p00-t0", QUEUE_MODE) is None

        # delete and retry: the partition's home only
        home = pair.home("p05")
        deleted = await pair.per_member("SELECT count(*) FROM rq_deleted")
        assert await pair.both("message_admin", "delete", Id("p05"), "p05-t2") == (1, 1)
        assert await pair.per_member("SELECT count(*) FROM rq_deleted") == [
            count + (ordinal == home) for ordinal, count in enumerate(deleted)]
        assert await pair.both("message_admin", "get", Id("p05"), "p05-t2", QUEUE_MODE) == (None, None)
        home = pair.home("p06")
        held = await pair.per_member("SELECT count(*) FROM rq_dlq")
        new_id = str(uuid_utils.uuid7())
        retried = await pair.both("message_admin", "retry", Id("p06"), "p06-t0", new_id)
        assert tuple(retried[1]) == tuple(retried[0]) == (4, QUEUE, "p06", 2)
        assert await pair.per_member("SELECT count(*) FROM rq_dlq") == [
            count - 2 * (ordinal == home) for ordinal, count in enumerate(held)]
        assert await pair.both("message_admin", "retry", Id("p06"), "nope", new_id) == (None, None)
        after = await pair.both("message_admin", "page", QUEUE, None, GROUP, None, None, None, 1000, 0)
        assert len(after[0]) == 36 * 4 and messages(after[1]) == messages(after[0])


async def test_writes_inside_a_unit_join_only_the_home_and_roll_back_with_it(database_url):
    async with twins(database_url) as pair:
        coordinator = TwoPhase({member.ordinal: member.database for member in pair.deployment.members})
        deleted = await pair.per_member("SELECT count(*) FROM rq_deleted")

        class Undone(Exception):
            pass

        async def delete_then_fail(joined) -> None:
            assert await fleet_of(pair.fleet, joined).message_admin.delete(pair.ids[1]["p10"], "p10-t3") == 1
            raise Undone

        with contextlib.suppress(Undone):
            await coordinator.atomically(delete_then_fail)
        assert await pair.per_member("SELECT count(*) FROM rq_deleted") == deleted

        async def delete_and_purge(joined) -> int:
            family = fleet_of(pair.fleet, joined)
            await family.message_admin.delete(pair.ids[1]["p10"], "p10-t3")
            return await family.dead_letters.purge(QUEUE, None, None)

        assert await coordinator.atomically(delete_and_purge) == 36 + 2 * 12
        assert await pair.per_member("SELECT count(*) FROM rq_deleted") == [
            count + (ordinal == pair.home("p10")) for ordinal, count in enumerate(deleted)]
        assert await pair.per_member("SELECT count(*) FROM rq_dlq") == [0, 0, 0]


def traces(rows) -> list[tuple]:
    return [(str(row["id"]), row["transaction_id"], row["consumer_group"], row["event_type"], row["data"],
             list(row["trace_names"]), row["queue_name"], row["partition_name"]) for row in rows]


async def test_traces_answer_as_one_database(database_url):
    async with twins(database_url) as pair:
        for partition, limit in [("p00", 10), ("p02", 3), ("p02", 2), ("p35", 10)]:
            found = await pair.both("traces", "for_message", Id(partition), f"{partition}-t0", limit)
            assert found[0] and traces(found[1]) == traces(found[0])
        assert await pair.fleet.traces.for_message(str(uuid.uuid4()), "p00-t0", 10) == []
        for name, limit, offset in [("all", 1000, 0), ("all", 10, 0), ("all", 11, 37), ("all", 10, 70),
                                    ("all", 10, 72), ("EVEN", 4, 2), ("order-7", 10, 0), ("nope", 10, 0)]:
            pages = await pair.both("traces", "by_name", name, None, None, limit, offset)
            assert traces(pages[1]) == traces(pages[0]), (name, limit, offset)
            assert [row["total"] for row in pages[1]] == [row["total"] for row in pages[0]]
        everything = await pair.both("traces", "by_name", "all", None, None, 1000, 0)
        assert len(everything[0]) == 72
        until, since = [rows[10]["created_at"] for rows in everything], [rows[50]["created_at"] for rows in everything]
        ranged = [await target.traces.by_name("all", since[side], until[side], 7, 2)
                  for side, target in enumerate((pair.single, pair.fleet))]
        assert ranged[0][0]["total"] == 41 and traces(ranged[1]) == traces(ranged[0])

        def names(rows) -> list[tuple]:
            return [(row["name"], row["trace_count"], row["message_count"], row["total"]) for row in rows]

        for search, limit, offset in [(None, 1000, 0), (None, 5, 0), (None, 6, 17), (None, 10, 20),
                                      (None, 10, 27), ("ORDER-1", 4, 2), ("ev", 10, 0), ("nope", 10, 0)]:
            pages = await pair.both("traces", "names", search, limit, offset)
            assert names(pages[1]) == names(pages[0]), (search, limit, offset)
        # the last trace's names, tied on their last use, by name
        assert names(await pair.fleet.traces.names(None, 3, 0)) == [("all", 72, 36, 27), ("odd", 6, 6, 27),
                                                                     ("order-35", 2, 1, 27)]

        # a trace is written on its partition's home only
        home = pair.home("p08")
        held = await pair.per_member("SELECT count(*) FROM rq_traces")
        await pair.both("traces", "add", str(uuid_utils.uuid7()), Id("p08"), "p08-t1", GROUP, "info", "null",
                        ["late"])
        assert await pair.per_member("SELECT count(*) FROM rq_traces") == [
            count + (ordinal == home) for ordinal, count in enumerate(held)]
        late = await pair.both("traces", "names", "late", 10, 0)
        assert names(late[1]) == names(late[0]) == [("late", 1, 1, 1)]


async def test_reads_answer_as_one_database(database_url):
    async with twins(database_url) as pair:
        await pair.both("message_admin", "delete", Id("p05"), "p05-t2")
        entries = [(QUEUE, partition, number % 3) for number, partition in enumerate(PARTITIONS)]
        entries += [(QUEUE, "p05", 0), (QUEUE, "nope", 0), ("no-such-queue", "p01", 0), (QUEUE, "p01", 99),
                    (OTHER, "x1", 1), (QUEUE, "p02", 2)]
        fetched = await pair.both("reads", "records", [e[0] for e in entries], [e[1] for e in entries],
                                  [e[2] for e in entries], [1 << 20] * len(entries), 1 << 24)

        def records(rows) -> list[tuple]:
            return [(row[0], row[1], row[2], row[3], row[4], row[6], None if row[7] is None else list(row[7]),
                     row[8]) for row in rows]

        assert [row[0] for row in fetched[0]] == sorted(row[0] for row in fetched[0])
        assert {row[0] for row in fetched[0]} == set(range(1, len(entries) + 1))
        assert records(fetched[1]) == records(fetched[0])
        assert [list(row[8]) for row in fetched[1] if row[8]] == [[2], [2]]  # p05-t2, deleted, asked twice

        def partitions(rows) -> list[tuple]:
            return [(row[0], row[3], row[4], row[5]) for row in rows]

        for queue, limit in [(QUEUE, 1000), (QUEUE, 5), (QUEUE, 36), (OTHER, 1)]:
            pages = []
            for target in (pair.single, pair.fleet):
                after, found = (None, None), []
                while True:
                    rows = await target.reads.changed(queue, None, *after, limit)
                    assert all(row[1] == rows[0][1] for row in rows)
                    found.append(partitions(rows))
                    if len(rows) <= limit:
                        break
                    after = (rows[limit - 1][7], rows[limit - 1][2])
                pages.append(found)
            assert pages[1] == pages[0], (queue, limit)
            assert sum(len(page) for page in pages[0]) - (len(pages[0]) - 1) == (36 if queue == QUEUE else 2)
        # a transaction open on one member: nothing written after its start is known to be in its
        # answer, so neither is it in the deployment's
        conn = await asyncpg.connect(pair.deployment.members[2].database.dsn)
        try:
            await conn.execute("BEGIN")
            started = await conn.fetchval("SELECT now()")
            rows = await pair.fleet.reads.changed(QUEUE, None, None, None, 5)
            assert {row[1] for row in rows} == {started}
        finally:
            await conn.close()
        missing = await pair.both("reads", "changed", "no-such-queue", None, None, None, 10)
        assert partitions(missing[1]) == partitions(missing[0]) == [(False, None, None, None)]


async def test_ties_across_members_are_broken_as_the_sql_breaks_them(database_url):
    async with twins(database_url) as pair:
        # one instant for every dead letter, trace name, message and partition, on every member
        moment = datetime(2026, 1, 1, tzinfo=UTC)
        for table, column in [("rq_dlq", "failed_at"), ("rq_trace_names", "created_at"),
                              ("rq_segments", "created_at"), ("rq_partitions", "created_at")]:
            await pair.execute_everywhere(f"UPDATE {table} SET {column} = $1", moment)
        # trace ids are the same in both, so are the pages
        for name, limit, offset in [("all", 1000, 0), ("all", 9, 31), ("EVEN", 3, 2)]:
            pages = await pair.both("traces", "by_name", name, None, None, limit, offset)
            assert traces(pages[1]) == traces(pages[0]), (name, limit, offset)
        for search, limit, offset in [(None, 1000, 0), (None, 4, 11), ("order", 5, 5)]:
            pages = await pair.both("traces", "names", search, limit, offset)
            assert [tuple(row) for row in pages[1]] == [tuple(row) for row in pages[0]], (search, limit, offset)
        # other ids are each database's own: a page follows them as the SQL does
        letters = await pair.fleet.dead_letters.page(QUEUE, None, None, None, None, 1000, 0)
        assert len(letters) == 60 and [row["id"] for row in letters] == sorted(row["id"] for row in letters)
        windows = [await pair.fleet.dead_letters.page(QUEUE, None, None, None, None, 7, offset)
                   for offset in range(0, 60, 7)]
        assert [row["id"] for rows in windows for row in rows] == [row["id"] for row in letters]
        listed = await pair.fleet.message_admin.page(QUEUE, None, QUEUE_MODE, None, None, None, 1000, 0)

        def position(row) -> tuple[str, int]:  # partition id, then offset from the last
            return row[0], -int(row[2].rsplit("-t", 1)[1])

        assert len(listed) == 144 and [position(row) for row in listed] == sorted(position(row) for row in listed)
        windows = [await pair.fleet.message_admin.page(QUEUE, None, QUEUE_MODE, None, None, None, 10, offset)
                   for offset in range(0, 144, 10)]
        assert [position(row) for rows in windows for row in rows] == [position(row) for row in listed]
        found = await pair.fleet.reads.changed(QUEUE, None, None, None, 1000)
        assert len(found) == 36 and [row[2] for row in found] == sorted(row[2] for row in found)
        page = await pair.fleet.reads.changed(QUEUE, None, moment, found[9][2], 5)
        assert [row[2] for row in page] == [row[2] for row in found[10:16]]
