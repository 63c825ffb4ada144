"""Deduplication of UUIDv7 transactionIds, kept in runs (rq_dedup_runs) rather than a row a key:
the same answers as for any other key, whichever store a key lives in, and the runs go with
their queue, their partition, their message and their window."""

from __future__ import annotations

import string
import uuid

import asyncpg
import uuid_utils
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reginamq.store.dedup_keys import bucket
from reginamq.store.schema import apply_schema
from tests.integration.helpers import configure, item, pop_messages, push, push_items, unique


def v7() -> str:
    return str(uuid_utils.uuid7())


async def stored_where(db, partition_id: str, txid: str) -> tuple[int, int]:
    """How many times the key is in rq_dedup and in rq_dedup_runs for this partition."""
    rows = await db.fetchval("SELECT count(*) FROM rq_dedup WHERE partition_id = $1 AND transaction_id = $2",
                             uuid.UUID(partition_id), txid)
    runs = await db.fetchval("SELECT count(*) FROM rq_dedup_runs r, unnest(r.keys) k "
                             "WHERE r.partition_id = $1 AND k::text = $2", uuid.UUID(partition_id), txid)
    return rows, runs


async def test_a_uuid7_key_pushed_again_answers_the_original_and_is_kept_in_a_run(http, db, queue):
    key = v7()
    [first] = await push(http, queue, {"v": 1}, partition="p", txids=[key])
    [second] = await push(http, queue, {"v": 2}, partition="p", txids=[key])
    assert first["status"] == "queued"
    assert second["status"] == "duplicate" and second["message_id"] == first["message_id"]
    [message] = await pop_messages(http, queue, "p")
    assert message["data"] == {"v": 1}
    assert await stored_where(db, message["partitionId"], key) == (0, 1)


async def test_the_same_uuid7_key_in_another_partition_is_a_key_of_its_own(http, queue):
    key = v7()
    [a] = await push(http, queue, "a", partition="p1", txids=[key])
    [b] = await push(http, queue, "b", partition="p2", txids=[key])
    assert a["status"] == b["status"] == "queued"
    assert [m["data"] for m in await pop_messages(http, queue, "p2")] == ["b"]


async def test_a_key_in_another_spelling_is_another_key(http, db, queue):
    """Keys are strings: the upper-case spelling of a UUIDv7 is another transactionId, kept a row
    a key, and neither spelling is taken for the other."""
    key = v7()
    [lower] = await push(http, queue, "lower", txids=[key])
    [upper] = await push(http, queue, "upper", txids=[key.upper()])
    assert lower["status"] == upper["status"] == "queued"
    [again] = await push(http, queue, "again", txids=[key.upper()])
    assert again["status"] == "duplicate" and again["message_id"] == upper["message_id"]
    messages = await pop_messages(http, queue)
    partition = messages[0]["partitionId"]
    assert await stored_where(db, partition, key) == (0, 1)
    assert await stored_where(db, partition, key.upper()) == (1, 0)


async def test_one_push_mixing_keys_of_both_stores_live_expired_and_new(http, db, queue):
    live, lapsed, row_key = v7(), v7(), unique("row")
    [old_live] = await push(http, queue, "old-live", partition="a", txids=[live])
    [old_lapsed] = await push(http, queue, "old-lapsed", partition="b", txids=[lapsed])
    [old_row] = await push(http, queue, "old-row", partition="a", txids=[row_key])
    await db.execute("UPDATE rq_dedup_runs SET expires_at = now() - interval '1 second' WHERE $1 = ANY (message_ids)",
                     uuid.UUID(old_lapsed["message_id"]))
    fresh = v7()
    body = await push_items(http, [item(queue, "new-a", partition="a", txid=fresh),
                                   item(queue, "dup-a", partition="a", txid=live),
                                   item(queue, "dup-row", partition="a", txid=row_key),
                                   item(queue, "new-b", partition="b", txid=lapsed),
                                   item(queue, "also-b", partition="b", txid=live)])
    assert [r["status"] for r in body] == ["queued", "duplicate", "duplicate", "queued", "queued"]
    assert body[1]["message_id"] == old_live["message_id"]
    assert body[2]["message_id"] == old_row["message_id"]
    assert body[3]["message_id"] != old_lapsed["message_id"]
    assert [m["data"] for m in await pop_messages(http, queue, "a")] == ["old-live", "old-row", "new-a"]
    assert [m["data"] for m in await pop_messages(http, queue, "b")] == ["old-lapsed", "new-b", "also-b"]
    [again] = await push(http, queue, "again", partition="b", txids=[lapsed])
    assert again["status"] == "duplicate" and again["message_id"] == body[3]["message_id"]


async def test_an_item_without_a_transaction_id_is_kept_in_a_run_under_its_minted_id(http, db, queue):
    [pushed] = await push(http, queue, "minted")
    assert bucket(pushed["transaction_id"]) is not None
    [again] = await push(http, queue, "again", txids=[pushed["transaction_id"]])
    assert again["status"] == "duplicate" and again["message_id"] == pushed["message_id"]
    [message] = await pop_messages(http, queue)
    assert await stored_where(db, message["partitionId"], pushed["transaction_id"]) == (0, 1)


async def test_a_deleted_message_frees_its_uuid7_key_and_keeps_the_others(http, queue):
    gone, kept = v7(), v7()
    pushed = await push(http, queue, "gone", "kept", txids=[gone, kept])
    [message, _] = await pop_messages(http, queue)
    response = await http.delete(f"/api/v1/messages/{message['partitionId']}/{gone}")
    assert response.status_code == 200 and response.json()["deleted"] == 1
    [again, still] = await push(http, queue, "again", "dup", txids=[gone, kept])
    assert again["status"] == "queued" and again["message_id"] != pushed[0]["message_id"]
    assert still["status"] == "duplicate" and still["message_id"] == pushed[1]["message_id"]


async def test_deleting_the_queue_deletes_its_runs(http, db):
    queue = unique("q")
    await push(http, queue, 1, 2, partition="p", txids=[v7(), v7()])
    partition = await db.fetchval("SELECT p.id FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id "
                                  "WHERE q.name = $1", queue)
    assert await db.fetchval("SELECT count(*) FROM rq_dedup_runs WHERE partition_id = $1", partition) == 1
    assert (await http.delete(f"/api/v1/resources/queues/{queue}")).status_code == 200
    assert await db.fetchval("SELECT count(*) FROM rq_dedup_runs WHERE partition_id = $1", partition) == 0


async def test_the_purge_deletes_expired_runs_and_leaves_live_ones(http, db, queue):
    await configure(http, queue, {"dedupWindowSeconds": 3600})
    await push(http, queue, "old", partition="old", txids=[v7()])
    await push(http, queue, "live", partition="live", txids=[v7()])
    partitions = dict(await db.fetch("SELECT p.name, p.id FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id "
                                     "WHERE q.name = $1", queue))
    await db.execute("UPDATE rq_dedup_runs SET expires_at = now() - interval '1 second' WHERE partition_id = $1",
                     partitions["old"])
    while await db.fetchval("SELECT rq_dedup_purge_step(1000)") > 0:
        pass
    counts = {name: await db.fetchval("SELECT count(*) FROM rq_dedup_runs WHERE partition_id = $1", pid)
              for name, pid in partitions.items()}
    assert counts == {"old": 0, "live": 1}


async def test_live_uuid7_keys_stored_a_row_a_key_move_to_runs_once(fresh_database):
    await apply_schema(fresh_database)
    conn = await asyncpg.connect(fresh_database)
    try:
        partition, live, lapsed, other = uuid.uuid4(), v7(), v7(), unique("row")
        ids = {key: uuid.uuid4() for key in (live, lapsed, other)}
        await conn.executemany(
            "INSERT INTO rq_dedup VALUES ($1, $2, $3, now() + $4::text::interval)",
            [(partition, live, ids[live], "1 hour"), (partition, lapsed, ids[lapsed], "-1 second"),
             (partition, other, ids[other], "1 hour")])
        await conn.execute("DELETE FROM rq_migrations WHERE name = 'dedup-uuid7-runs'")
        await conn.execute("UPDATE rq_schema_state SET digest = 'before'")
        assert await apply_schema(fresh_database)
        runs = await conn.fetch("SELECT bucket, keys, message_ids FROM rq_dedup_runs WHERE partition_id = $1",
                                partition)
        assert [(r["bucket"], r["keys"], r["message_ids"]) for r in runs] == [
            (bucket(live), [uuid.UUID(live)], [ids[live]])]
        assert await conn.fetchval("SELECT array_agg(transaction_id) FROM rq_dedup") == [other]
    finally:
        await conn.close()


_HEX = "0123456789abcdef"
_UUID_LIKE = st.builds(
    lambda digits, version, variant: "-".join((digits[:8], digits[8:12], version + digits[12:15],
                                                variant + digits[15:18], digits[18:30])),
    st.text(alphabet=_HEX + "ABCDEF", min_size=30, max_size=30),
    st.sampled_from("47f"), st.sampled_from("89abc"))


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(txid=st.one_of(_UUID_LIKE, st.text(alphabet=string.printable.strip() + "é", min_size=1, max_size=40)))
async def test_the_broker_and_postgresql_put_a_key_in_the_same_store(db, txid):
    assert bucket(txid) == await db.fetchval("SELECT rq_uuid7_bucket($1)", txid)
