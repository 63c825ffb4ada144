"""Full and incremental statistics refreshes (012_stats.sql), against a real broker.

These tests decide when a refresh runs and of which kind, so they use a database and a broker
of their own whose stats loop refreshes once at start and then waits an hour (the session
broker's loop refreshes every 0.3 s). Incremental refreshes are asked for directly, as the
stats loop does between full passes.
"""

from __future__ import annotations

import asyncio

import asyncpg
import msgspec
import pytest

from reginamq.engine import ack as ack_engine
from reginamq.engine import analytics
from reginamq.engine.encryption import Sealer
from reginamq.engine.push import PushItem, execute, prepare
from reginamq.maintenance.stats_refresh import StatsLoop
from reginamq.store import Store
from reginamq.store.database import Session
from reginamq.store.statistics import REFRESH_LOCK_SQL, REFRESH_SQL
from tests.conftest import (
    broker_with_clean_log,
    connection,
    create_database,
    eventually,
    opened_store,
    stored_for,
)
from tests.integration.helpers import ack, ack_batch, configure, pop, push

TOTALS_SQL = ("SELECT t.pushed, t.popped, t.acked, t.failed, t.dead_lettered, t.depth, t.lag, t.dlq_depth, "
              "t.partitions FROM rq_stats_totals t JOIN rq_queues q ON q.id = t.queue_id WHERE q.name = $1")
BUCKETS_SQL = ("SELECT sum(s.pushed) AS pushed, sum(s.popped) AS popped, sum(s.acked) AS acked, "
               "sum(s.failed) AS failed FROM rq_stats s JOIN rq_queues q ON q.id = s.queue_id WHERE q.name = $1")
NOTES_SQL = "SELECT count(*) FROM rq_stats_notes n JOIN rq_queues q ON q.id = n.queue_id WHERE q.name = $1"
GROUPS_SQL = "SELECT consumer_group, backlog, partitions_behind FROM rq_stats_groups_of($1)"


@pytest.fixture(scope="module")
def own_database(database_url):
    url = create_database(database_url, "rq_stats")

    async def first_refresh():  # the history-only first refresh, done before any test's traffic
        async with opened_store(url) as store:
            await analytics.refresh(store)

    asyncio.run(first_refresh())
    return url


@pytest.fixture(scope="module")
def own_broker(own_database, tmp_path_factory):
    log_path = tmp_path_factory.mktemp("stats-broker") / "broker.log"
    with broker_with_clean_log(own_database, log_path, {"REGINAMQ_MAINTENANCE_INTERVAL": "3600"}) as url:
        yield url


@pytest.fixture
async def own_store(own_database):
    async with opened_store(own_database) as store:
        yield store


async def totals(db, queue) -> dict:
    return dict(await db.fetchrow(TOTALS_SQL, queue))


async def groups(db, queue) -> list[tuple]:
    return [tuple(r) for r in await db.fetch(GROUPS_SQL, queue)]


async def test_incremental_refreshes_book_what_a_full_pass_would(own_http, own_db, own_store, queue):
    await push(own_http, queue, *range(6), partition="a")
    await push(own_http, queue, *range(4), partition="b")
    audit = (await pop(own_http, queue, "a", consumerGroup="audit", subscriptionMode="all", batch=2))["messages"]
    await ack_batch(own_http, audit, consumer_group="audit")
    await analytics.refresh(own_store, full=True)  # what the incremental refreshes below carry forward
    before = await totals(own_db, queue)
    assert (before["pushed"], before["popped"], before["acked"], before["depth"], before["lag"]) == (10, 2, 2, 10, 8)

    # deliveries: the queue-mode reader leases 3 messages of "a" and 4 of "b", and reads 2 of a
    # new partition with auto-ack (rq_pop moves the cursor itself); the named group leases the
    # rest of "a" and reads "b" for the first time
    on_a = (await pop(own_http, queue, "a", batch=3))["messages"]
    on_b = (await pop(own_http, queue, "b", batch=4))["messages"]
    await push(own_http, queue, *range(5), partition="c")
    assert len((await pop(own_http, queue, "c", batch=2, autoAck=True))["messages"]) == 2
    audit_a = (await pop(own_http, queue, "a", consumerGroup="audit", batch=10))["messages"]
    assert len((await pop(own_http, queue, "b", consumerGroup="audit", batch=2))["messages"]) == 2
    await push(own_http, queue, 6, 7, partition="a")
    await analytics.refresh(own_store, full=False)  # forgets what the pops noted: the acks must note their own
    assert [(await totals(own_db, queue))[key] for key in ("pushed", "popped", "acked")] == [17, 17, 4]

    # acknowledgements: whole spans at once (rq_ack's set-based path), and one by one (its
    # loop): one completed, one failed (a charge of the retry budget)
    await ack_batch(own_http, on_a)
    await ack_batch(own_http, audit_a, consumer_group="audit")
    await ack(own_http, on_b[0])
    await ack(own_http, on_b[1], "failed", error="x")
    await analytics.refresh(own_store, full=False)

    incremental = await totals(own_db, queue)
    incremental_groups = await groups(own_db, queue)
    # by hand: pushed 10 + 5 + 2; popped 2 + (3 + 4 + 2) + (4 + 2); acked 2 + (3 + 1 + 2) + 4;
    # depth a 8-3, b 4-1, c 5-2; the group's backlog a 8-6, b 4-0, c 5
    assert incremental == {"pushed": 17, "popped": 17, "acked": 12, "failed": 1, "dead_lettered": 0,
                           "depth": 11, "lag": 11, "dlq_depth": 0, "partitions": 3}
    assert [(g, backlog) for g, backlog, _ in incremental_groups] == [("audit", 11)]
    buckets = await own_db.fetchrow(BUCKETS_SQL, queue)  # the queue came after the first refresh
    assert dict(buckets) == {key: incremental[key] for key in ("pushed", "popped", "acked", "failed")}

    await analytics.refresh(own_store, full=True)
    assert await totals(own_db, queue) == incremental  # nothing left for the full pass to book
    assert await groups(own_db, queue) == [("audit", 11, 3)]


async def test_refreshes_empty_the_notes_table(own_http, own_db, own_store, queue):
    await push(own_http, queue, *range(3), partition="a")
    await ack_batch(own_http, (await pop(own_http, queue, "a", batch=3))["messages"])
    assert await own_db.fetchval(NOTES_SQL, queue) == 4  # partition created, push, pop, ack
    await analytics.refresh(own_store, full=False)
    assert await own_db.fetchval(NOTES_SQL, queue) == 0
    assert [(await totals(own_db, queue))[key] for key in ("pushed", "popped", "acked", "partitions")] == [3, 3, 3, 1]


async def test_a_pop_over_several_queues_notes_each_queue(own_http, own_db, own_store, queue):
    first, second = f"{queue}.one", f"{queue}.two"
    await push(own_http, first, *range(3), partition="a")
    await push(own_http, second, *range(2), partition="a")
    await push(own_http, second, *range(4), partition="b")
    response = await own_http.get("/api/v1/pop", params={"namespace": queue, "batch": 100, "partitions": 10,
                                                         "autoAck": "true"})
    assert response.status_code == 200, response.text
    assert len(response.json()["messages"]) == 9
    await analytics.refresh(own_store, full=False)
    keys = ("pushed", "popped", "acked", "depth", "partitions")
    assert [(await totals(own_db, name))[key] for name in (first, second) for key in keys] == [
        3, 3, 3, 0, 1, 6, 6, 6, 0, 2]


async def test_messages_a_pop_skips_move_the_depth_and_count_as_nothing_consumed(own_http, own_db, own_store, queue):
    """Expired messages leave the depth at the incremental refresh (the reader's position moved
    past them) without counting as popped or acked; the full pass agrees."""
    await configure(own_http, queue, {"ttl": 1})
    await push(own_http, queue, "old-1", "old-2", partition="a")
    await stored_for(own_db, queue, 1)
    await push(own_http, queue, "fresh", partition="a")
    await analytics.refresh(own_store, full=True)
    assert (await totals(own_db, queue))["depth"] == 3

    assert [m["data"] for m in (await pop(own_http, queue, "a", autoAck=True))["messages"]] == ["fresh"]
    await analytics.refresh(own_store, full=False)
    incremental = await totals(own_db, queue)
    assert [incremental[key] for key in ("pushed", "popped", "acked", "depth")] == [3, 1, 1, 0]
    await analytics.refresh(own_store, full=True)
    assert await totals(own_db, queue) == incremental


async def test_every_charged_failure_counts_once_also_the_one_that_dead_letters(own_http, own_db, own_store, queue):
    await configure(own_http, queue, {"retryLimit": 1, "retryDelay": 0, "deadLetterQueue": True,
                                     "dlqAfterMaxRetries": True})
    await push(own_http, queue, "m", partition="a")
    for _ in range(2):  # the first failure spends the one retry, the second dead-letters the message
        message = (await pop(own_http, queue, "a"))["messages"][0]
        assert (await ack(own_http, message, "failed", error="x"))["success"]
    assert await pop(own_http, queue, "a") is None

    async def behind_the_refresh_instant():  # a refresh counts the dead letters stamped 2 s before it
        return await own_db.fetchval(
            "SELECT bool_and(d.failed_at < now() - interval '2 seconds') FROM rq_dlq d "
            "JOIN rq_queues q ON q.id = d.queue_id WHERE q.name = $1", queue)

    assert await eventually(behind_the_refresh_instant)
    await analytics.refresh(own_store, full=False)
    after = await totals(own_db, queue)
    assert [after[key] for key in ("popped", "acked", "failed", "dead_lettered", "depth", "dlq_depth")] == [
        1, 1, 2, 1, 0, 1]


async def test_an_ack_committed_after_a_refresh_keeps_its_note_for_the_next(own_http, own_db, own_store, own_database,
                                                                            queue):
    """A refresh deletes only the touched rows its snapshot sees: an ack still committing
    during a refresh keeps its note, and the next refresh books it."""
    await push(own_http, queue, *range(2), partition="a")
    popped = (await pop(own_http, queue, "a", batch=2))["messages"]
    await analytics.refresh(own_store, full=True)
    before = (await totals(own_db, queue))["acked"]
    acks = ack_engine.prepare([ack_engine.Ack(transactionId=m["transactionId"], partitionId=m["partitionId"],
                                              leaseId=m["leaseId"]) for m in popped])
    async with connection(own_database) as writer, writer.transaction():
        assert all(row["success"] for row in await ack_engine.write(Store(Session(writer)), acks))
        await analytics.refresh(own_store, full=False)
        assert (await totals(own_db, queue))["acked"] == before  # not visible yet
    assert await own_db.fetchval(NOTES_SQL, queue) == 1  # its note outlived the refresh
    await analytics.refresh(own_store, full=False)
    assert (await totals(own_db, queue))["acked"] == before + 2
    assert await own_db.fetchval(NOTES_SQL, queue) == 0


async def test_a_seek_moves_the_gauges_at_the_next_full_pass_and_counts_nothing(own_http, own_db, own_store, queue):
    await push(own_http, queue, *range(5), partition="a")
    await ack(own_http, (await pop(own_http, queue, "a", consumerGroup="audit", subscriptionMode="all"))["messages"][0])
    await analytics.refresh(own_store, full=True)
    assert ((await totals(own_db, queue))["acked"], await groups(own_db, queue)) == (1, [("audit", 4, 1)])

    response = await own_http.post(f"/api/v1/consumer-groups/audit/queues/{queue}/seek", json={"toEnd": True})
    assert response.status_code == 200, response.text
    await analytics.refresh(own_store, full=False)  # a seek writes no note: an incremental refresh misses it
    assert ((await totals(own_db, queue))["acked"], await groups(own_db, queue)) == (1, [("audit", 4, 1)])

    response = await own_http.post("/api/v1/stats/refresh", json={})  # an explicit refresh is a full pass
    assert response.status_code == 200, response.text
    after = await totals(own_db, queue)
    # the backlog is recounted; the skipped messages were not consumed, so acked stays
    assert (after["acked"], after["lag"], await groups(own_db, queue)) == (1, 0, [("audit", 0, 0)])


async def test_the_state_records_full_passes_only(own_db, own_store):
    await analytics.refresh(own_store, full=True)
    full_at, took = await own_db.fetchrow("SELECT full_at, full_seconds FROM rq_stats_state")
    assert took >= 0
    await analytics.refresh(own_store, full=False)
    row = await own_db.fetchrow("SELECT full_at, full_seconds, refreshed_at FROM rq_stats_state")
    assert (row["full_at"], row["full_seconds"]) == (full_at, took) and row["refreshed_at"] > full_at
    since, last_took = await analytics.last_full_pass(own_store)
    assert since > 0 and last_took == took


async def test_the_stats_loop_spaces_full_passes_by_their_cost(own_db, own_store):
    loop = StatsLoop(own_store, interval=5)
    full_at_sql = "SELECT full_at FROM rq_stats_state"
    cases = [  # (seconds since the last full pass began, how long it took, whether a full pass is due)
        (150, 2.0, False),  # full passes of 2 s at most every 200 s (1% of the time)
        (201, 2.0, True),
        (0.5, 0.001, True),  # a small database: nearly every refresh is a full pass
        (599, 100.0, False),
        (601, 100.0, True),  # and at least every 10 minutes, however long they take
    ]
    for since, took, due in cases:
        await own_db.execute("UPDATE rq_stats_state SET full_at = clock_timestamp() - make_interval(secs => $1), "
                             "full_seconds = $2", since, took)
        last = await own_db.fetchval(full_at_sql)
        await loop.round()
        assert (await own_db.fetchval(full_at_sql) != last) is due, (since, took)


async def test_a_refresh_outside_repeatable_read_is_refused(own_db):
    with pytest.raises(asyncpg.RaiseError, match="REPEATABLE READ"):
        await own_db.fetchval("SELECT rq_stats_refresh(10, 86400, false)")


async def test_a_refresh_waits_for_one_in_progress_and_books_nothing_twice(own_http, own_database, own_db, own_store,
                                                                           queue):
    await push(own_http, queue, *range(4), partition="a")
    async with connection(own_database) as other:
        async with other.transaction(isolation="repeatable_read"):
            await other.execute(REFRESH_LOCK_SQL)
            waiting = asyncio.create_task(analytics.refresh(own_store, full=True))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await other.fetchval(REFRESH_SQL, analytics.BUCKET_SECONDS, analytics.KEEP_SECONDS, True)
        await waiting  # took its snapshot after the other refresh committed, so it books nothing again
    assert (await totals(own_db, queue))["pushed"] == 4


async def let_the_open_push_age() -> None:
    """Let a second pass while a push stays uncommitted, so its stamp falls behind the next
    refresh's instant by more than any rounding: a refresh that booked notes by time, not by
    its snapshot, would pass that push by for good. No state can stand in for time here."""
    await asyncio.sleep(1.0)


async def test_a_push_committed_after_a_refresh_is_booked_by_the_next(own_http, own_db, own_store, own_database, queue):
    """A push's note commits with its messages: a push left uncommitted across a refresh, for
    however long, is booked by the first refresh after it commits, and only once."""
    await push(own_http, queue, 1, partition="a")
    await analytics.refresh(own_store, full=True)
    before = (await totals(own_db, queue))["pushed"]
    items = [PushItem(queue=queue, partition="a", payload=msgspec.Raw(b"2")),
             PushItem(queue=queue, partition="a", payload=msgspec.Raw(b"3"))]
    async with connection(own_database) as writer, writer.transaction():
        await execute(Store(Session(writer)), prepare(items), Sealer())
        await let_the_open_push_age()
        await analytics.refresh(own_store, full=False)
        assert (await totals(own_db, queue))["pushed"] == before  # not visible yet
    await analytics.refresh(own_store, full=False)
    assert (await totals(own_db, queue))["pushed"] == before + 2
    await analytics.refresh(own_store, full=True)
    assert (await totals(own_db, queue))["pushed"] == before + 2
