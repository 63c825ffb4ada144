"""Retention beyond the basics of test_maintenance.py: maxWaitTimeSeconds eviction, parallel
retention workers, the cleanup of idle partitions, and a database that stops growing.

The parallel and idle-cleanup tests need a broker with settings of its own
(``REGINAMQ_RETENTION_PARALLELISM=4`` and an idle threshold of two seconds); it runs on a
database of its own in the session's PostgreSQL, so no other broker's retention touches it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import itertools
import os
import time
import uuid

import pytest

from reginamq.maintenance.retention import DUE_WORKER, RetentionLoop, id_ranges
from reginamq.store import Store
from reginamq.store.database import Database
from reginamq.store.retention import STEP_SQL
from reginamq.store.schema import apply_schema
from tests.conftest import a_round_ran, broker_with_clean_log, connection, create_database, eventually
from tests.integration.retention_helpers import configure, consume_all, equals, push, segments

IDLE_SECONDS = 2.0
PARALLELISM = 4


async def pop_all(http, queue, group=None, partition=None):
    """Pop until 204 without acknowledging; returns the messages."""
    path = f"/api/v1/pop/queue/{queue}" + (f"/partition/{partition}" if partition else "")
    seen = []
    while True:
        params = {"batch": 100, **({"consumerGroup": group, "subscriptionMode": "all"} if group else {})}
        response = await http.get(path, params=params)
        if response.status_code == 204:
            return seen
        seen += response.json()["messages"]


@contextlib.asynccontextmanager
async def draining(http, queue, pushed: list):
    """A queue-mode consumer beside the body of the ``with``; after it, it goes on until it has
    consumed as many messages as ``pushed`` holds. Yields the list of payloads it consumed."""
    consumed: list = []
    stop = asyncio.Event()

    async def consume():
        while not stop.is_set() or len(consumed) < len(pushed):
            consumed.extend(await consume_all(http, queue))
            await asyncio.sleep(0.02)

    task = asyncio.create_task(consume())
    try:
        yield consumed
        stop.set()
        await asyncio.wait_for(task, 60)
    finally:
        task.cancel()


async def retention_totals(http, queue) -> dict:
    entries = (await http.get("/metrics")).json()["retention"]
    return next((e for e in entries if e["queue"] == queue), {})


async def partition_row(db, queue, partition):
    return await db.fetchrow("SELECT p.* FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id "
                             "WHERE q.name = $1 AND p.name = $2", queue, partition)


# maxWaitTimeSeconds, on the session broker

async def test_max_wait_time_evicts_old_messages_consumed_or_not_leased_or_not(http, db, queue):
    await configure(http, queue, maxWaitTimeSeconds=1)
    await push(http, queue, "p", list(range(5)))
    leased = await pop_all(http, queue, group="reader")  # a lease in flight (leaseTime 300 s)
    assert [m["data"] for m in leased] == list(range(5))
    assert await eventually(lambda: equals(segments(db, queue), 0), seconds=10) is True
    assert (await partition_row(db, queue, "p"))["log_start"] == 5
    assert await pop_all(http, queue) == []
    browse = await http.get("/api/v1/messages", params={"queue": queue})
    assert browse.status_code == 200 and browse.json()["messages"] == []
    # every evicted message was unconsumed by some reader, and /metrics says so
    assert await eventually(lambda: equals(retention_totals(http, queue), {
        "queue": queue, "deletedSegments": 1, "deletedMessages": 5, "evictedMessages": 5,
        "deletedPartitions": 0}), seconds=5) is True
    prometheus = (await http.get("/metrics/prometheus")).text
    assert f'reginamq_retention_evicted_messages_total{{queue="{queue}"}} 5.0' in prometheus
    # the partition goes on past the evicted prefix, and the evicted lease was released: the
    # reader gets the next message now, not after its 300 s lease
    await push(http, queue, "p", ["fresh"])
    assert [m["data"] for m in await pop_all(http, queue)] == ["fresh"]
    assert [m["data"] for m in await pop_all(http, queue, group="reader")] == ["fresh"]


async def test_completed_retention_counts_nothing_as_evicted(http, db, queue):
    await configure(http, queue, completedRetentionSeconds=1)
    await push(http, queue, "p", [1, 2, 3])
    assert sorted(await consume_all(http, queue)) == [1, 2, 3]
    assert await eventually(lambda: equals(segments(db, queue), 0), seconds=10) is True
    totals = await retention_totals(http, queue)
    assert totals["deletedMessages"] == 3 and totals["evictedMessages"] == 0


# Parallel workers

def test_id_ranges_cover_every_id_exactly_once():
    ranges = id_ranges(PARALLELISM)
    assert ranges[0][0].int == 0 and ranges[-1][1] is None
    assert all(ranges[k][1] == ranges[k + 1][0] for k in range(PARALLELISM - 1))
    for pid in [uuid.UUID(int=0), uuid.UUID(int=(1 << 128) - 1), *(uuid.uuid4() for _ in range(1000))]:
        owners = [k for k, (start, end) in enumerate(ranges) if start <= pid and (end is None or pid < end)]
        assert len(owners) == 1


@pytest.fixture(scope="module")
def own_database(database_url):
    return create_database(database_url, "rq_retention")


@pytest.fixture(scope="module")
def own_broker(own_database, tmp_path_factory):
    log_path = tmp_path_factory.mktemp("retention-broker") / "broker.log"
    with broker_with_clean_log(own_database, log_path, {
            "REGINAMQ_RETENTION_PARALLELISM": str(PARALLELISM),
            "REGINAMQ_PARTITION_IDLE_DAYS": str(IDLE_SECONDS / 86_400)}) as url:
        yield url


async def let_a_started_round_end() -> None:
    """Let a round the broker had started before its lease was taken away end. A round does not
    look at the lease again and leaves no trace while it rests between steps, so this waits:
    a round over this module's few partitions takes a fraction of it."""
    await asyncio.sleep(1.0)


@contextlib.asynccontextmanager
async def retention_lease(db):
    """Hold the retention lease, so the broker's own retention stays out while a test runs
    retention steps by hand."""
    holder = "test:" + uuid.uuid4().hex
    await db.execute("INSERT INTO rq_leader_leases VALUES ('retention', $1, now() + interval '1 hour') "
                     "ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, "
                     "expires_at = EXCLUDED.expires_at", holder)
    await let_a_started_round_end()
    try:
        yield
    finally:
        await db.execute("UPDATE rq_leader_leases SET expires_at = now() - interval '1 second' "
                         "WHERE name = 'retention' AND holder = $1", holder)


async def test_each_worker_deletes_only_in_its_own_range(own_db, queue):
    """Run one worker's steps by hand: exactly the partitions of its range lose their
    segments, the others keep theirs."""
    async with retention_lease(own_db):
        await own_db.execute("INSERT INTO rq_queues (name, options) VALUES ($1, $2)", queue,
                             '{"retentionEnabled": true, "retentionSeconds": 1}')
        await own_db.execute(
            "INSERT INTO rq_partitions (queue_id, name, last_offset) SELECT q.id, 'p' || n, 0 "
            "FROM rq_queues q, generate_series(1, 80) n WHERE q.name = $1", queue)
        await own_db.execute(
            "INSERT INTO rq_segments (partition_id, base_offset, end_offset, created_at, txids, payloads) "
            "SELECT p.id, 0, 0, now() - interval '1 minute', '{t}', '{x}' "
            "FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1", queue)
        start, end = id_ranges(PARALLELISM)[1]
        position, steps = start, 0
        # 80 random ids give a quarter range ~20 of them (fewer than 3: odds below one in a million);
        # a window of 2 partitions per step makes that several steps
        while position is not None:
            row = await own_db.fetchrow("SELECT * FROM rq_retention_step($1, $2, 2, 1000, 1, 0)", position, end)
            position, steps = row["next_from"], steps + 1
            # how late the walk runs: a minute-old segment of a queue keeping them a second
            assert row["overdue"] >= 55 if row["segments"] else row["overdue"] == 0, dict(row)
        rows = await own_db.fetch(
            "SELECT p.id, p.log_start, EXISTS (SELECT 1 FROM rq_segments s WHERE s.partition_id = p.id) AS kept "
            "FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1", queue)
        inside = {r["id"] for r in rows if start <= uuid.UUID(str(r["id"])) < end}
        assert inside and len(inside) < len(rows) and steps > 1
        for r in rows:
            assert r["kept"] is (r["id"] not in inside)
            assert r["log_start"] == (1 if r["id"] in inside else 0)


# The due walks, run by hand on the module's database. Their segments are dated in a year of
# their own, so other tests' data never falls among them.

async def add_queue(db, queue, options: str) -> int:
    return await db.fetchval("INSERT INTO rq_queues (name, options) VALUES ($1, $2) RETURNING id", queue, options)


async def add_segment(db, partition, base: int, end: int, created_at: str):
    await db.execute(
        "INSERT INTO rq_segments (partition_id, base_offset, end_offset, created_at, txids, payloads) "
        "SELECT $1, $2::bigint, $3::bigint, $4::text::timestamptz, array_fill('t'::text, ARRAY[($3 - $2 + 1)::int]), "
        "array_fill('x'::bytea, ARRAY[($3 - $2 + 1)::int])", partition, base, end, created_at)
    await db.execute("UPDATE rq_partitions SET last_offset = greatest(last_offset, $2) WHERE id = $1", partition, end)


async def add_partition(db, qid: int):
    return await db.fetchval("INSERT INTO rq_partitions (queue_id, name) VALUES ($1, 'p') RETURNING id", qid)


async def unread_partition(db, queue: str, created_at: str):
    """A partition of a new queue keeping consumed messages an hour, holding one segment of ten
    messages created at ``created_at`` that its one reader has not read."""
    qid = await add_queue(db, queue, '{"completedRetentionSeconds": 3600}')
    partition = await add_partition(db, qid)
    await add_segment(db, partition, 0, 9, created_at)
    await db.execute("INSERT INTO rq_consumers (partition_id, consumer_group, committed) "
                     "VALUES ($1, '__QUEUE_MODE__', -1)", partition)
    return partition


async def log_start(db, partition) -> int:
    return await db.fetchval("SELECT log_start FROM rq_partitions WHERE id = $1", partition)


async def first_offset(db, partition) -> int:
    return await db.fetchval("SELECT rq_first_offset(id, log_start, last_offset) FROM rq_partitions WHERE id = $1",
                             partition)


async def due_step(db, period: int, position, window: int):
    return await db.fetchrow("SELECT * FROM rq_retention_due_step($1, $2, $3, $4, $5, $6)",
                             period, *position, window, DUE_WORKER)


async def sweep(db, grace: float) -> None:
    """One whole sweep of every partition, in one worker's steps, with this grace."""
    position = uuid.UUID(int=0)
    while position is not None:
        position = (await db.fetchrow("SELECT * FROM rq_retention_step($1, NULL, 1000, 1000, 0, $2)",
                                      position, grace))["next_from"]


def start_of(year: int):
    """A due walk's position before every segment created after ``year``."""
    return datetime.datetime(year, 12, 31, tzinfo=datetime.UTC), uuid.UUID(int=0), -1


def after(row):
    return row["next_at"], row["next_partition"], row["next_base"]


async def kept_segments(db, partition) -> list[int]:
    return [r["base_offset"] for r in await db.fetch(
        "SELECT base_offset FROM rq_segments WHERE partition_id = $1 ORDER BY base_offset", partition)]


async def test_the_due_walk_reads_on_in_creation_order_across_steps_and_equal_times(own_db, queue):
    """24 due segments, twelve of them created in the same instant, and twelve young ones:
    walking five at a time, each step reads on from where the last stopped, every due segment
    goes once (log_start moves past it) and no young one goes."""
    async with retention_lease(own_db):
        qid = await add_queue(own_db, queue, '{"retentionEnabled": true, "retentionSeconds": 3600}')
        partitions = await own_db.fetchval(
            "WITH p AS (INSERT INTO rq_partitions (queue_id, name) SELECT $1, 'p' || n FROM generate_series(1, 12) n "
            "RETURNING id) SELECT array_agg(id) FROM p", qid)
        for partition in partitions:
            await add_segment(own_db, partition, 0, 0, "2000-01-01 00:00:00+00")  # the same instant
        for second, partition in enumerate(partitions):
            await add_segment(own_db, partition, 1, 1, f"2000-01-01 00:00:{second + 1:02}+00")
            await add_segment(own_db, partition, 2, 2, "now")
        position, steps = start_of(1999), 0
        while True:
            row = await due_step(own_db, 3600, position, 5)
            position, steps = after(row), steps + 1
            if row["candidates"] < 5 or position[0].year > 2000:
                break
        assert steps >= 5  # 24 of them, five a step
        for partition in partitions:
            assert await kept_segments(own_db, partition) == [2]
            assert await log_start(own_db, partition) == 2
        assert await own_db.fetchrow("SELECT segments, messages, evicted FROM rq_retention_totals "
                                     "WHERE queue_id = $1 AND worker = $2", qid, DUE_WORKER) == (24, 24, 24)


async def test_a_segment_the_due_walk_passed_goes_with_the_sweep_once_consumed(own_db, queue):
    """A due segment nobody has consumed yet stays and the walk passes it; once consumed it is
    behind the walk, and the sweep deletes it."""
    async with retention_lease(own_db):
        partition = await unread_partition(own_db, queue, "2001-01-01 00:00:00+00")
        row = await due_step(own_db, 3600, start_of(2000), 1)
        assert (row["candidates"], row["segments"], row["next_partition"]) == (1, 0, partition)
        await own_db.execute("UPDATE rq_consumers SET committed = 9 WHERE partition_id = $1", partition)
        row = await due_step(own_db, 3600, after(row), 1)
        assert await kept_segments(own_db, partition) == [0]  # passed: the walk does not look back
        await sweep(own_db, 0)
        assert await kept_segments(own_db, partition) == []
        # consumed by every reader: the partition row is not written
        assert (await log_start(own_db, partition), await first_offset(own_db, partition)) == (0, 10)


async def test_the_sweep_leaves_what_fell_due_within_its_grace_to_the_walks(own_db, queue):
    """A segment that fell due 20 s ago is the walks' for a grace of a minute: the sweep does
    not look at its partition; without the grace it deletes it."""
    async with retention_lease(own_db):
        qid = await add_queue(own_db, queue, '{"retentionEnabled": true, "retentionSeconds": 10}')
        partition = await add_partition(own_db, qid)
        await add_segment(own_db, partition, 0, 4, await own_db.fetchval("SELECT (now() - interval '30 s')::text"))
        await sweep(own_db, 60)
        assert await kept_segments(own_db, partition) == [0]
        await sweep(own_db, 0)
        assert await kept_segments(own_db, partition) == []


async def test_a_due_segment_takes_the_older_segments_of_its_partition_along(own_db, queue):
    """The walk passed a segment that was not consumed; when a later segment of the same
    partition falls due, consumed, the older one goes with it: retention deletes prefixes."""
    async with retention_lease(own_db):
        partition = await unread_partition(own_db, queue, "2002-01-01 00:00:00+00")
        row = await due_step(own_db, 3600, start_of(2001), 1)
        assert (row["candidates"], row["segments"]) == (1, 0)
        await add_segment(own_db, partition, 10, 19, "2002-01-01 00:00:05+00")
        await own_db.execute("UPDATE rq_consumers SET committed = 19 WHERE partition_id = $1", partition)
        row = await due_step(own_db, 3600, after(row), 1)
        assert (row["candidates"], row["segments"], row["messages"], row["evicted"]) == (1, 2, 20, 0)
        assert await kept_segments(own_db, partition) == []
        assert (await log_start(own_db, partition), await first_offset(own_db, partition)) == (0, 20)


@pytest.mark.parametrize("by", ["walk", "sweep"])
async def test_a_named_group_keeps_the_partitions_it_has_not_read_in_its_own_queue_only(own_db, queue, by):
    """Two queues in one step, each with two consumed partitions: the first queue has a named
    group, which has read one of its partitions only; the second has none. Every partition goes
    but the one the group has not read (the groups are counted once per queue, and each
    partition is judged by its own queue's count)."""
    async with retention_lease(own_db):
        year = {"sweep": 2003, "walk": 2004}[by]  # what a sweep leaves is before the walk's window
        created = f"{year}-01-01 00:00:00+00"
        grouped = await add_queue(own_db, queue, '{"completedRetentionSeconds": 1}')
        plain = await add_queue(own_db, queue + "-plain", '{"completedRetentionSeconds": 1}')
        await own_db.execute("INSERT INTO rq_consumer_groups (queue_id, name, subscription_mode) "
                             "VALUES ($1, 'g', 'all')", grouped)
        partitions = {}
        for qid, label in ((grouped, "read"), (grouped, "unread"), (plain, "a"), (plain, "b")):
            partitions[label] = await own_db.fetchval(
                "INSERT INTO rq_partitions (queue_id, name) VALUES ($1, $2) RETURNING id", qid, label)
            await add_segment(own_db, partitions[label], 0, 4, created)
            await own_db.execute("INSERT INTO rq_consumers (partition_id, consumer_group, committed) "
                                 "VALUES ($1, '__QUEUE_MODE__', 4)", partitions[label])
        await own_db.execute("INSERT INTO rq_consumers (partition_id, consumer_group, committed) "
                             "VALUES ($1, 'g', 4)", partitions["read"])
        if by == "walk":
            row = await due_step(own_db, 1, start_of(year - 1), 4)  # these four, the oldest after it
            assert (row["candidates"], row["segments"]) == (4, 3)
        else:
            await sweep(own_db, 0)
        assert {label: await kept_segments(own_db, pid) for label, pid in partitions.items()} == {
            "read": [], "unread": [0], "a": [], "b": []}


async def test_each_retention_period_has_a_due_walk_of_its_own(own_db, own_database, queue):
    """A queue that keeps messages longer than another: its segments are passed by the shorter
    period's walk and deleted by its own period's walk when they fall due, not left to the
    sweep (whose next walk is a minute away)."""
    short, long_ = f"{queue}-short", f"{queue}-long"
    database = Database(own_database, 2)
    await database.open()
    try:
        async with retention_lease(own_db):
            await add_queue(own_db, short, '{"completedRetentionSeconds": 2}')
            qid = await add_queue(own_db, long_, '{"maxWaitTimeSeconds": 4}')
            partition = await add_partition(own_db, qid)
            await add_segment(own_db, partition, 0, 0, "now")
            await own_db.execute("UPDATE rq_segments SET created_at = now() - interval '2 seconds' "
                                 "WHERE partition_id = $1", partition)
            loop = RetentionLoop(Store(database), interval=5.0)
            await loop.round()  # the 2-s walk passes it (not due for its queue); the sweep too
            assert await kept_segments(own_db, partition) == [0]

            async def due_for_its_own_queue():
                return await own_db.fetchval("SELECT created_at < now() - interval '4 seconds' FROM rq_segments "
                                             "WHERE partition_id = $1", partition)

            assert await eventually(due_for_its_own_queue)
            await loop.round()  # within the sweep's walk period: only the walks run
            assert await kept_segments(own_db, partition) == []
            assert await own_db.fetchval("SELECT evicted FROM rq_retention_totals WHERE queue_id = $1 "
                                         "AND worker = $2", qid, DUE_WORKER) == 1
    finally:
        await database.close()


async def test_retention_keeps_up_with_pushes_without_deadlock(own_http, own_db, queue):
    """Pushes to 32 partitions and a consumer run while retention (the due walk, and four sweep
    workers beside it) deletes behind them: every push succeeds, every message arrives once,
    and everything consumed goes, counted once. The walk and the sweep lock and delete
    through the same code (rq_retention_delete)."""
    await configure(own_http, queue, completedRetentionSeconds=1)
    partitions = [f"p{n}" for n in range(32)]
    pushed = []
    async with draining(own_http, queue, pushed) as consumed:
        for round_ in range(30):
            items = [{"queue": queue, "partition": p, "payload": [round_, p]} for p in partitions]
            response = await own_http.post("/api/v1/push", json={"items": items})
            assert response.status_code == 201, response.text
            pushed.extend([round_, p] for p in partitions)
            await asyncio.sleep(0.1)
    assert sorted(consumed) == sorted(pushed)
    assert await eventually(lambda: equals(segments(own_db, queue), 0), seconds=20) is True
    workers = await own_db.fetch("SELECT t.worker, t.segments FROM rq_retention_totals t JOIN rq_queues q "
                                 "ON q.id = t.queue_id WHERE q.name = $1", queue)
    # the due walk deleted as segments fell due (a segment still unconsumed when its time came
    # is passed, and a sweep worker deletes it later)
    assert any(w["worker"] == DUE_WORKER and w["segments"] > 0 for w in workers), workers
    # one segment per push and partition, each counted once: a segment the walk and a sweep
    # worker both chose would be counted by both
    assert sum(w["segments"] for w in workers) == 30 * 32
    await let_postgres_publish_its_counters()
    assert await own_db.fetchval("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()") == 0


async def let_postgres_publish_its_counters() -> None:
    """PostgreSQL publishes a backend's statistics (a deadlock it met) within about a second, and
    nothing shows that a backend has published: this waits that long before counting."""
    await asyncio.sleep(1.0)


# Idle partitions

async def test_an_empty_idle_partition_is_deleted_and_a_later_push_recreates_it(own_http, own_db, queue):
    await configure(own_http, queue, completedRetentionSeconds=1, dedupWindowSeconds=1)
    await push(own_http, queue, "p", [1, 2])
    assert await consume_all(own_http, queue, group="g") == [1, 2]
    assert await consume_all(own_http, queue) == [1, 2]
    old = await partition_row(own_db, queue, "p")
    query = await own_db.fetchval("SELECT query_id FROM rq_stream_register($1, $2, NULL, 'h', false)",
                                  f"{queue}-query", queue)
    await own_db.execute("INSERT INTO rq_stream_state (query_id, partition_id, key, value) VALUES ($1, $2, 'k', '1')",
                         query, old["id"])
    assert await eventually(lambda: equals(partition_row(own_db, queue, "p"), None), seconds=20) is True
    for table in ("rq_consumers", "rq_dedup", "rq_dedup_runs", "rq_segments", "rq_stream_state"):
        assert await own_db.fetchval(f"SELECT count(*) FROM {table} WHERE partition_id = $1", old["id"]) == 0
    assert (await retention_totals(own_http, queue))["deletedPartitions"] == 1
    await push(own_http, queue, "p", [3])
    assert await consume_all(own_http, queue, group="g") == [3]
    assert await consume_all(own_http, queue) == [3]


async def test_a_partition_with_messages_or_a_live_lease_is_kept(own_http, own_db, own_database, queue):
    kept = f"{queue}-kept"
    await configure(own_http, kept, dedupWindowSeconds=0)
    await push(own_http, kept, "unread", [1])
    await configure(own_http, queue, maxWaitTimeSeconds=1, dedupWindowSeconds=0)
    await push(own_http, queue, "leased", [2])
    await push(own_http, queue, "evicted", [3])
    assert len(await pop_all(own_http, queue, group="g", partition="leased")) == 1  # leased for 300 s
    # While the eviction runs, an ack holds the cursor (as an ack in flight would): retention
    # cannot release the evicted lease, so it stays live after the messages are gone.
    async with connection(own_database) as acking, acking.transaction():
        await acking.execute("SELECT 1 FROM rq_consumers c JOIN rq_partitions p ON p.id = c.partition_id "
                             "JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1 AND p.name = 'leased' "
                             "FOR UPDATE OF c", queue)
        assert await eventually(lambda: equals(segments(own_db, queue), 0), seconds=10) is True
    # the partition without a lease goes once idle; the leased one and the unread one stay
    assert await eventually(lambda: equals(partition_row(own_db, queue, "evicted"), None), seconds=20) is True
    await a_round_ran(own_db, "retention")  # its cleanup step could have deleted "leased" too, as idle as "evicted"
    assert (await partition_row(own_db, queue, "leased"))["log_start"] == 1
    assert await partition_row(own_db, kept, "unread") is not None
    assert [m["data"] for m in await pop_all(own_http, kept)] == [1]


async def test_a_push_that_found_the_partition_before_the_cleanup_deleted_it_recreates_it(
        http, db, database_url, queue):
    """The race made deterministic: the cleanup step deletes a partition in a transaction that
    stays open while a push that already looked the partition up waits for its row lock. When
    the delete commits, the push must not write into the void: it is retried and recreates it."""
    await configure(http, queue, dedupWindowSeconds=0)
    old = await db.fetchval("INSERT INTO rq_partitions (queue_id, name) SELECT id, 'p' FROM rq_queues "
                            "WHERE name = $1 RETURNING id", queue)
    async with connection(database_url) as cleanup:
        async with cleanup.transaction():
            row = await cleanup.fetchrow("SELECT * FROM rq_idle_partitions_step($1, $2, 10, 1e-6, 0)",
                                         old, uuid.UUID(int=old.int + 1))
            assert row["partitions"] == 1
            pushing = asyncio.create_task(http.post("/api/v1/push", json={"items": [
                {"queue": queue, "partition": "p", "payload": "kept"}]}))
            waiting = ("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                       "AND query LIKE '%rq_push%'")
            assert await eventually(lambda: db.fetchval(waiting), seconds=10) == 1
        response = await pushing
    assert response.status_code == 201 and response.json()[0]["status"] == "queued"
    assert (await partition_row(db, queue, "p"))["id"] != old
    assert [m["data"] for m in await pop_all(http, queue)] == ["kept"]


async def test_pushes_racing_the_idle_cleanup_are_all_delivered(own_http, own_db, queue):
    """Partitions are emptied and deleted over and over while pushes keep naming them again
    right around the idle threshold: every acknowledged push is delivered, exactly once."""
    await configure(own_http, queue, completedRetentionSeconds=1, dedupWindowSeconds=0)
    partitions = [f"p{n}" for n in range(8)]
    pushed = []
    async with draining(own_http, queue, pushed) as consumed:
        deadline = time.monotonic() + 25
        while time.monotonic() < deadline:
            item = [len(pushed), partitions[len(pushed) % len(partitions)]]
            response = await own_http.post("/api/v1/push", json={"items": [
                {"queue": queue, "partition": item[1], "payload": item}]})
            assert response.status_code == 201 and response.json()[0]["status"] == "queued", response.text
            pushed.append(item)
            await asyncio.sleep(0.4)  # each partition is written every 3.2 s: deleted (2 s idle) in between
    assert sorted(consumed) == sorted(pushed)
    deleted = (await retention_totals(own_http, queue))["deletedPartitions"]
    assert deleted >= len(partitions)  # the cleanup really ran between the pushes


# The database stops growing

SIZE_SQL = ("SELECT sum(pg_total_relation_size(t))::bigint "
            "FROM unnest('{rq_segments,rq_partitions,rq_consumers,rq_dedup,rq_dedup_runs}'::regclass[]) t")


async def test_the_database_stops_growing_under_steady_load(own_http, own_db, queue):
    """Push and consume at a steady rate for 40 s with completedRetentionSeconds=2: the tables
    grow in the second half by far less than the bytes pushed in it. Without retention they
    would grow by at least those bytes (the payloads are incompressible)."""
    await configure(own_http, queue, completedRetentionSeconds=2, dedupWindowSeconds=4)
    seconds, partitions, per_push = 40.0, 10, 50
    started = time.monotonic()
    samples: list[tuple[float, int]] = []
    pushed_bytes: list[tuple[float, int]] = []
    pushed: list[str] = []

    async def producer():
        while time.monotonic() - started < seconds:
            items = [{"queue": queue, "partition": f"p{(len(pushed) + i) % partitions}",
                      "payload": base64.b64encode(os.urandom(600)).decode()} for i in range(per_push)]
            response = await own_http.post("/api/v1/push", json={"items": items})
            assert response.status_code == 201
            pushed_bytes.append((time.monotonic() - started, sum(len(i["payload"]) for i in items)))
            pushed.extend(i["payload"] for i in items)
            await asyncio.sleep(0.2)

    async def sampler():
        while time.monotonic() - started < seconds:
            samples.append((time.monotonic() - started, await own_db.fetchval(SIZE_SQL)))
            await asyncio.sleep(1.0)

    async with draining(own_http, queue, pushed) as consumed:
        await asyncio.gather(producer(), sampler())
    assert sorted(consumed) == sorted(pushed)
    half = seconds / 2
    first = max(size for at, size in samples if at < half)
    second = max(size for at, size in samples if at >= half)
    pushed_second_half = sum(n for at, n in pushed_bytes if at >= half)
    assert second - first < 0.4 * pushed_second_half, (first, second, pushed_second_half, samples)


async def test_a_worker_walks_its_range_again_only_after_the_walk_period(fresh_database, monkeypatch):
    """A finished sweep is not repeated at once: at a million partitions walking again at once
    kept PostgreSQL busy with data not due yet. Sweep steps are counted on a database of the
    test's own, so that one round walks every range whatever the session's other tests left.
    The sweep is not paced here (the next test covers that)."""
    from reginamq.maintenance import retention

    database_url = fresh_database
    await apply_schema(database_url)
    async with connection(database_url) as conn:  # a few partitions in each worker's range
        await conn.execute("SELECT rq_provision(array_fill('walked'::text, ARRAY[64]), "
                           "ARRAY(SELECT 'p' || n FROM generate_series(1, 64) n), '{}'::jsonb)")

    monkeypatch.setattr(retention, "WALK_SHARE", float("inf"))
    sweep_steps = []

    class CountingExecutor:
        def __init__(self, database):
            self._database = database

        async def fetchrow(self, sql, *args):
            if sql == STEP_SQL:
                sweep_steps.append(args[0])
            return await self._database.fetchrow(sql, *args)

        async def fetchval(self, sql, *args):
            return await self._database.fetchval(sql, *args)

    database = Database(database_url, 3)
    await database.open()
    try:
        loop = retention.RetentionLoop(Store(CountingExecutor(database)), interval=0.2, parallelism=2)
        await loop.round()
        walked = len(sweep_steps)
        assert walked >= 2  # both workers swept their ranges
        sweep_steps.clear()
        await loop.round()
        assert sweep_steps == []  # the workers rested
        await asyncio.sleep(retention.WALK_INTERVALS * 0.2)  # the walk period: time must pass here
        await loop.round()
        assert len(sweep_steps) >= 2  # swept again
    finally:
        await database.close()


def test_a_walk_that_runs_late_or_meets_backlog_does_not_rest():
    """The pacing must never let the database grow: a step that deleted a full step, or
    segments overdue by a walk period or more, is followed at once."""
    from reginamq.maintenance import retention

    loop = retention.RetentionLoop(store=None, interval=5.0, parallelism=4)
    period = retention.WALK_INTERVALS * 5.0
    assert loop.rest_after({"segments": 10, "overdue": period - 1}, 0.1) == pytest.approx(0.1 * 15)
    assert loop.rest_after({"segments": 0, "overdue": 0.0}, 0.02) == pytest.approx(0.02 * 15)
    assert loop.rest_after({"segments": retention.STEP_ROWS, "overdue": 0.0}, 0.1) == 0
    assert loop.rest_after({"segments": 10, "overdue": period}, 0.1) == 0


async def test_a_walk_that_finds_little_to_delete_rests_between_steps(http, queue, database_url, monkeypatch):
    """Unpaced, four workers walking the partitions that hold data took both cores of a small
    machine every walk period, and pushes and pops queued behind them. After a step that
    deleted less than a full step, a worker rests for ``rest_per_busy`` times the step's own
    duration. Steps are timed on the real database, through the executor they ran on."""
    from reginamq.maintenance import retention

    for partition in range(12):
        await push(http, queue, f"p{partition}", [partition])  # young data: nothing is due
    monkeypatch.setattr(retention, "WINDOW_PARTITIONS", 2)  # a walk of several steps
    steps = []

    class TimedExecutor:
        def __init__(self, database):
            self._database = database

        async def fetchrow(self, sql, *args):
            began = time.monotonic()
            row = await self._database.fetchrow(sql, *args)
            if sql == STEP_SQL:
                steps.append((began, time.monotonic(), row["segments"]))
            return row

        async def fetchval(self, sql, *args):
            return await self._database.fetchval(sql, *args)

    database = Database(database_url, 2)
    await database.open()
    try:
        await retention.RetentionLoop(Store(TimedExecutor(database)), interval=5.0, parallelism=1).round()
    finally:
        await database.close()
    assert len(steps) >= 6, steps  # twelve partitions of this queue alone, two a step
    rest = retention.rest_per_busy(1)
    assert rest == 3.0  # one worker keeps to a quarter of a core
    for (began, ended, deleted), (next_began, _, _) in itertools.pairwise(steps):
        assert deleted < retention.STEP_ROWS
        assert next_began - ended >= 0.95 * rest * (ended - began), steps
