"""Retention and the elected maintenance loop, against real broker processes.

The session broker runs its maintenance loop every 0.3 s (see conftest), so effects show up
within about a second of a message becoming eligible; a test that asserts retention left
something alone waits for a round that started once it was eligible to end.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import asyncpg
import pytest
import uuid_utils

from reginamq.store.schema import apply_schema
from tests.conftest import a_round_ran, eventually, start_broker, stop_process
from tests.integration.retention_helpers import (
    configure,
    consume_all,
    due_at,
    equals,
    push,
    segments,
)


async def test_completed_messages_are_deleted_after_the_completed_retention(http, db, queue):
    await configure(http, queue, completedRetentionSeconds=1)
    for n in range(3):
        await push(http, queue, "p", [n * 10 + i for i in range(10)])
    assert sorted(await consume_all(http, queue)) == list(range(30))
    assert await segments(db, queue) == 3
    assert await eventually(lambda: equals(segments(db, queue), 0), seconds=10) is True
    # a prefix every reader consumed goes without writing the partition row: log_start stays,
    # the first stored offset is past the deletion
    assert await offsets(db, queue, "p") == {"log_start": 0, "first": 30, "last_offset": 29}
    # the partition goes on working past the deleted prefix
    await push(http, queue, "p", ["after"])
    assert await consume_all(http, queue) == ["after"]


async def offsets(db, queue, partition) -> dict:
    row = await db.fetchrow("SELECT p.log_start, rq_first_offset(p.id, p.log_start, p.last_offset) AS first, "
                            "p.last_offset FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id "
                            "WHERE q.name = $1 AND p.name = $2", queue, partition)
    return dict(row)


async def test_readers_new_to_a_consumed_and_deleted_prefix_start_at_the_first_stored_message(http, db, queue):
    """Completed retention leaves log_start behind the deleted prefix. A reader that has no
    cursor there yet (a new group, queue mode after groups alone read it, a seek to before the
    log) starts at the first message still stored, its leases cover only stored messages (its
    acks complete them), and the counts an operator sees hold what is stored. (No ttl: a pop
    steps over expired messages, which would hide where a reader starts.)"""
    await configure(http, queue, completedRetentionSeconds=1, ttl=0)
    await push(http, queue, "p", [1, 2, 3])
    assert await consume_all(http, queue, group="first") == [1, 2, 3]
    assert await eventually(lambda: equals(segments(db, queue), 0), seconds=10) is True
    await push(http, queue, "p", [4, 5])
    assert await offsets(db, queue, "p") == {"log_start": 0, "first": 3, "last_offset": 4}

    detail = (await http.get(f"/api/v1/resources/queues/{queue}")).json()
    assert (detail["messages"], detail["pending"]) == (2, 2), detail
    [partition] = detail["partitions"]
    assert (partition["logStart"], partition["messages"], partition["pending"]) == (3, 2, 2), partition

    async def leased_span(group) -> tuple:
        return tuple(await db.fetchrow(
            "SELECT c.span_start, c.span_end FROM rq_consumers c JOIN rq_partitions p ON p.id = c.partition_id "
            "JOIN rq_queues q ON q.id = p.queue_id WHERE q.name = $1 AND c.consumer_group = $2",
            queue, group or "__QUEUE_MODE__"))

    async def read_stored(group) -> None:
        """One pop: it leases exactly the stored messages (offsets 3 and 4); then they are acked."""
        response = await http.get(f"/api/v1/pop/queue/{queue}", params={
            "batch": 10, "wait": "false", **({"consumerGroup": group, "subscriptionMode": "all"} if group else {})})
        assert response.status_code == 200, (group, response.text)
        messages = response.json()["messages"]
        assert [m["data"] for m in messages] == [4, 5]
        assert await leased_span(group) == (3, 4)
        answer = await http.post("/api/v1/ack/batch", json={"consumerGroup": group, "acknowledgments": [
            {"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"]}
            for m in messages]})
        assert all(r["success"] for r in answer.json())

    await read_stored("second")  # a new group: subscription "all"
    await read_stored(None)  # queue mode, never here before
    assert await consume_all(http, queue, group="first") == [4, 5]
    for group in ("second", "first"):
        seek = await http.post(f"/api/v1/consumer-groups/{group}/queues/{queue}/seek",
                               json={"timestamp": "2000-01-01T00:00:00Z"})
        assert seek.status_code == 200, seek.text
        await read_stored(group)
    # every lease was settled by the acks of what it delivered: each cursor is at the end
    cursors = await db.fetch("SELECT c.consumer_group, c.committed, c.span_end FROM rq_consumers c "
                             "JOIN rq_partitions p ON p.id = c.partition_id JOIN rq_queues q ON q.id = p.queue_id "
                             "WHERE q.name = $1 ORDER BY 1", queue)
    assert [tuple(c) for c in cursors] == [("__QUEUE_MODE__", 4, None), ("first", 4, None), ("second", 4, None)]


async def test_unconsumed_messages_stay_under_completed_retention(http, db, queue):
    await configure(http, queue, completedRetentionSeconds=1)
    await push(http, queue, "p", [1, 2])
    await a_round_ran(db, "retention", since=await due_at(db, queue, 1))
    assert await segments(db, queue) == 1
    assert sorted(await consume_all(http, queue)) == [1, 2]


async def test_a_group_that_has_not_read_a_partition_keeps_it(http, db, queue):
    await configure(http, queue, completedRetentionSeconds=1)
    await push(http, queue, "a", [1])
    assert await consume_all(http, queue, group="fast") == [1]
    # "slow" registers on the queue through another partition, and never reads "a"
    await push(http, queue, "b", [2])
    response = await http.get(f"/api/v1/pop/queue/{queue}/partition/b",
                              params={"consumerGroup": "slow", "subscriptionMode": "all"})
    assert response.status_code == 200
    await a_round_ran(db, "retention", since=await due_at(db, queue, 1))
    assert await segments(db, queue) == 2
    assert await consume_all(http, queue, group="slow") == [1]


async def test_retention_seconds_drops_old_messages_consumed_or_not(http, db, queue):
    await configure(http, queue, retentionEnabled=True, retentionSeconds=1)
    await push(http, queue, "p", [1, 2, 3])
    assert await eventually(lambda: equals(segments(db, queue), 0), seconds=10) is True
    response = await http.get(f"/api/v1/pop/queue/{queue}")
    assert response.status_code == 204


@pytest.mark.parametrize("options", [{"retentionSeconds": 1}, {"maxWaitTimeSeconds": 0}],
                         ids=["retentionSeconds-needs-retentionEnabled", "maxWaitTimeSeconds-0-is-off"])
async def test_options_that_delete_nothing(http, db, queue, options):
    await configure(http, queue, **options)
    await push(http, queue, "p", [1])
    await a_round_ran(db, "retention", since=await due_at(db, queue, 1))
    assert await segments(db, queue) == 1


@pytest.mark.parametrize("txid", ["once", str(uuid_utils.uuid7())], ids=["row", "run"])
async def test_expired_dedup_keys_are_purged_and_the_id_is_free_again(http, db, queue, txid):
    await configure(http, queue, dedupWindowSeconds=1)
    item = {"queue": queue, "partition": "p", "payload": 1, "transactionId": txid}
    first = (await http.post("/api/v1/push", json={"items": [item]})).json()[0]
    assert first["status"] == "queued"
    assert (await http.post("/api/v1/push", json={"items": [item]})).json()[0]["status"] == "duplicate"
    keys = ("SELECT (SELECT count(*) FROM rq_dedup WHERE partition_id = $1) "
            "+ (SELECT count(*) FROM rq_dedup_runs WHERE partition_id = $1)")
    partition_id = await db.fetchval("SELECT p.id FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id "
                                     "WHERE q.name = $1", queue)
    assert await eventually(lambda: equals(db.fetchval(keys, partition_id), 0), seconds=10) is True
    again = (await http.post("/api/v1/push", json={"items": [item]})).json()[0]
    assert again["status"] == "queued" and again["message_id"] != first["message_id"]


def test_one_process_of_many_holds_the_maintenance_lease(database_url):
    """Two nodes of two workers each on one database: exactly one holder, and it stays put."""
    import asyncpg

    first, _ = start_broker(database_url, workers=2)
    second, _ = start_broker(database_url, workers=2)
    try:
        async def holders():
            conn = await asyncpg.connect(database_url)
            try:
                seen = set()
                for _ in range(10):
                    row = await conn.fetchrow("SELECT holder, expires_at > now() AS live FROM rq_leader_leases "
                                              "WHERE name = 'retention'")
                    assert row is not None and row["live"]
                    seen.add(row["holder"])
                    await asyncio.sleep(0.2)
                return seen
            finally:
                await conn.close()

        assert len(asyncio.run(holders())) == 1
    finally:
        stop_process(first)
        stop_process(second)


async def test_the_dedup_purge_reads_what_it_deletes_after_the_table_turned_over(fresh_database):
    """Keys expire at the old end of the table, vacuum hands those pages to new keys, and the
    purge must still find the expired ones without reading every page (a BRIN index did not)."""
    await apply_schema(fresh_database)
    conn = await asyncpg.connect(fresh_database)
    try:
        keys = ("INSERT INTO rq_dedup SELECT gen_random_uuid(), 'k' || n, gen_random_uuid(), "
                "now() + $1::text::interval FROM generate_series(1, 40000) n")
        await conn.execute(keys, "-1 minute")  # a window that has passed
        while await conn.fetchval("SELECT rq_dedup_purge_step(10000)") > 0:
            pass
        await conn.execute("VACUUM rq_dedup")
        await conn.execute(keys, "1 hour")  # the next window's keys, in the freed pages
        await conn.execute(keys, "-1 second")  # and the keys expiring now
        pages = await conn.fetchval("SELECT pg_relation_size('rq_dedup') / current_setting('block_size')::int")
        while await conn.fetchval("SELECT rq_dedup_purge_step(10000)") > 0:
            pass
        await conn.execute("ANALYZE rq_dedup")  # as autovacuum would have by now
        assert await conn.fetchval("SELECT rq_dedup_purge_step(10000)") == 0  # planned again, after ANALYZE
        # a purge step with nothing expired: what it reads, the function's own statements included
        plan = json.loads(await conn.fetchval("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "
                                              "SELECT rq_dedup_purge_step(10000)"))[0]["Plan"]
        read = plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]
        assert pages > 500 and read < pages / 8, f"a purge step with nothing expired read {read} of {pages} pages"
        assert await conn.fetchval("SELECT count(*) FROM rq_dedup") == 40000
        assert await conn.fetchval("SELECT count(*) FROM rq_dedup WHERE expires_at < now()") == 0
    finally:
        await conn.close()


async def test_the_traces_purge_deletes_old_traces_and_their_names_oldest_first(fresh_database):
    await apply_schema(fresh_database)
    conn = await asyncpg.connect(fresh_database)
    try:
        add = "SELECT rq_trace_add(gen_random_uuid(), $1, $2, NULL, 'info', '{}'::jsonb, $3)"
        partition = uuid.uuid4()
        for n in range(5):
            await conn.execute(add, partition, f"t{n}", [f"name{n}", "shared"])
        cutoff = await conn.fetchval("SELECT clock_timestamp()")
        await conn.execute(add, partition, "later", ["shared"])
        left = "SELECT array_agg(transaction_id ORDER BY created_at) FROM rq_traces"
        assert await conn.fetchval("SELECT rq_traces_purge_step($1, 3)", cutoff) == 3
        assert await conn.fetchval(left) == ["t3", "t4", "later"]
        assert await conn.fetchval("SELECT rq_traces_purge_step($1, 3)", cutoff) == 2
        assert await conn.fetchval("SELECT rq_traces_purge_step($1, 3)", cutoff) == 0
        assert [r[0] for r in await conn.fetch("SELECT transaction_id FROM rq_traces")] == ["later"]
        assert [r[0] for r in await conn.fetch("SELECT name FROM rq_trace_names")] == ["shared"]
    finally:
        await conn.close()
