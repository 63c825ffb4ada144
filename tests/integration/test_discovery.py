"""Wildcard pops find work without reading every partition of a queue.

Candidates come from expired leases, from the most recently written partitions, and from a
sweep that walks the rest; these tests make each source the only one that can find the work.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import asyncpg
import httpx
import msgspec
import orjson

from reginamq.engine import hot_partitions, push
from reginamq.engine.encryption import Sealer
from reginamq.store import Store
from reginamq.store.database import Database
from tests.conftest import broker_with_clean_log
from tests.integration.helpers import pop_messages
from tests.integration.helpers import push as push_messages


async def push_partitions(http, queue, names):
    for start in range(0, len(names), 2000):
        items = [{"queue": queue, "partition": name, "payload": name} for name in names[start:start + 2000]]
        response = await http.post("/api/v1/push", content=orjson.dumps({"items": items}),
                                   headers={"content-type": "application/json"})
        assert response.status_code == 201


async def drain(http, queue, group, partitions=100):
    """Everything the group has not read; a group new to the queue reads the backlog."""
    seen = []
    while True:
        response = await http.get(f"/api/v1/pop/queue/{queue}", params={
            "consumerGroup": group, "subscriptionMode": "all", "batch": 1000, "partitions": partitions,
            "autoAck": "true"})
        if response.status_code == 204:
            return seen
        seen += [m["data"] for m in response.json()["messages"]]


async def test_a_new_group_reads_a_backlog_older_than_the_recent_window(http):
    queue = f"d-{uuid.uuid4().hex[:8]}"
    names = [f"p{n:05d}" for n in range(5000)]
    await push_partitions(http, queue, names)
    assert sorted(await drain(http, queue, "first")) == names
    # a group arriving later still finds every partition, far beyond the 1,024 most recent
    assert sorted(await drain(http, queue, "late")) == names


async def test_a_failed_message_on_an_old_partition_comes_back_at_once(http):
    queue = f"d-{uuid.uuid4().hex[:8]}"
    await http.post("/api/v1/configure", json={"queue": queue, "options": {"retryDelay": 0}})
    await push_partitions(http, queue, ["old"])
    await push_partitions(http, queue, [f"p{n:05d}" for n in range(1500)])
    leased = (await http.get(f"/api/v1/pop/queue/{queue}/partition/old",
                             params={"consumerGroup": "g", "subscriptionMode": "all"})).json()
    [message] = leased["messages"]
    assert len(await drain(http, queue, "g")) == 1500  # everything else, "old" stays leased
    answer = (await http.post("/api/v1/ack", json={
        "transactionId": message["transactionId"], "partitionId": message["partitionId"],
        "leaseId": message["leaseId"], "consumerGroup": "g", "status": "retry"})).json()
    assert answer[0]["success"] and answer[0]["leaseReleased"]
    again = await http.get(f"/api/v1/pop/queue/{queue}", params={"consumerGroup": "g"})
    assert again.status_code == 200
    [redelivered] = again.json()["messages"]
    assert redelivered["transactionId"] == message["transactionId"] and redelivered["deliveryAttempt"] == 2


async def test_pollers_faster_than_the_sweep_pause_still_drain_an_old_backlog(http):
    """Empty pops inside the sweep's one-second pause must not push the pause on: pollers
    asking every 50 ms once starved the sweep for ever, stranding every partition beyond
    the 1,024 most recently written (found by benchmarks/partition_cost.py)."""
    queue = f"d-{uuid.uuid4().hex[:8]}"
    names = [f"p{n:05d}" for n in range(8000)]
    await push_partitions(http, queue, names)
    seen: list[str] = []
    deadline = asyncio.get_running_loop().time() + 60

    async def poller() -> None:
        while len(seen) < len(names) and asyncio.get_running_loop().time() < deadline:
            response = await http.get(f"/api/v1/pop/queue/{queue}", params={
                "batch": 500, "partitions": 500, "autoAck": "true"})
            if response.status_code == 204:
                await asyncio.sleep(0.05)
            else:
                seen.extend(m["data"] for m in response.json()["messages"])

    await asyncio.gather(*(poller() for _ in range(4)))
    assert sorted(seen) == names


async def test_among_20000_partitions_a_wildcard_pop_finds_the_one_with_data(http):
    queue = f"d-{uuid.uuid4().hex[:8]}"
    names = [f"p{n:05d}" for n in range(20_000)]
    await push_partitions(http, queue, names)
    assert len(await drain(http, queue, "g", partitions=1000)) == 20_000
    await push_partitions(http, queue, ["p07777"])  # an old partition gets one new message
    response = await http.get(f"/api/v1/pop/queue/{queue}", params={"consumerGroup": "g"})
    assert response.status_code == 200
    assert [(m["partition"], m["data"]) for m in response.json()["messages"]] == [("p07777", "p07777")]


async def test_a_hint_finds_a_partition_no_index_lookup_reaches(database_url):
    """rq_pop with the broker's hints (engine/hot_partitions.py): a pending partition outside the
    1,024 most recently written, with the sweep off, is found through its hint alone."""
    queue = f"d-{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(database_url)
    database = Database(database_url, 1)
    await database.open()
    store = Store(database)
    try:
        await push.write(store, push.prepare([push.PushItem(queue=queue, partition="old", payload=msgspec.Raw(b"1"))]),
                         Sealer())
        newer = [push.PushItem(queue=queue, partition=f"p{n:04d}", payload=msgspec.Raw(b"2")) for n in range(1100)]
        await push.write(store, push.prepare(newer), Sealer())
        await conn.execute("UPDATE rq_partitions SET last_write_at = now() + interval '1 minute' "
                           "WHERE name <> 'old' AND queue_id = (SELECT id FROM rq_queues WHERE name = $1)", queue)
        ids = dict(await conn.fetch("SELECT p.name, p.id FROM rq_partitions p JOIN rq_queues q ON q.id = p.queue_id "
                                    "WHERE q.name = $1", queue))

        async def pop(hints: list) -> list[str]:
            rows = await conn.fetch(
                "SELECT partition_name FROM rq_pop($1, NULL, NULL, NULL, '__QUEUE_MODE__', 2000, 2000, true, 0,"
                " gen_random_uuid(), 'all', NULL, NULL, NULL, false, $2, now(), false, NULL, false)"
                " WHERE partition_id IS NOT NULL",
                queue, hints)
            return [row[0] for row in rows]

        assert len(await pop([ids[f"p{n:04d}"] for n in range(1100)])) == 1100  # the newer ones, by hint
        assert await pop([]) == []  # "old" is not among the 1,024 most recent and the sweep is off
        assert await pop([ids["p0007"], ids["old"]]) == ["old"]  # a stale hint is skipped
    finally:
        await database.close()
        await conn.close()


async def outlast_the_catch_up(began: float) -> None:
    """Let a reader that began by ``began`` (a ``time.monotonic()`` reading taken once its first
    pop answered) pass its first ``CATCH_UP_SECONDS``, after which it looks for new data only
    through hints: how long a reader has been reading is time itself, no state stands for it."""
    await asyncio.sleep(max(0.0, began + hot_partitions.CATCH_UP_SECONDS - time.monotonic()) + 0.2)


async def test_a_namespace_reader_follows_a_queue_configured_into_its_namespace(database_url, tmp_path):
    """A namespace pop reads the hints of its queues, which each process places through a
    directory of queue -> namespace (engine/hot_partitions.py). Configuring a queue into the namespace
    must reach that directory: otherwise the reader, past its first seconds and with no hints,
    would not look for the queue's new data until its 16-second safety look-up. One worker, so
    that every pop meets the same reader."""
    namespace, queue = f"ns{uuid.uuid4().hex[:8]}", f"plain-{uuid.uuid4().hex[:8]}"
    with broker_with_clean_log(database_url, tmp_path / "broker.log", {}) as url:
        async with httpx.AsyncClient(base_url=url, timeout=30) as http:
            async def pop_namespace() -> list:
                messages = await pop_messages(http, namespace=namespace, wait=False, batch=10, autoAck=True)
                return [m["data"] for m in messages]

            # leases of another queue running out meanwhile: hinted to every selection while the
            # directory cannot place their queue, they must not crowd out the namespace's own
            other = f"other-{uuid.uuid4().hex[:8]}"
            response = await http.post("/api/v1/configure", json={"queue": other, "options": {"leaseTime": 1}})
            assert response.status_code == 200
            await push_partitions(http, other, [f"p{n}" for n in range(40)])
            response = await http.get(f"/api/v1/pop/queue/{other}", params={"batch": 100, "partitions": 40})
            assert len(response.json()["messages"]) == 40  # never acknowledged
            assert await pop_namespace() == []  # the reader begins
            began = time.monotonic()
            await push_messages(http, queue, "before", partition="p")
            assert await pop_namespace() == []  # the queue is not in the namespace (yet)
            response = await http.post("/api/v1/configure", json={"queue": queue, "namespace": namespace,
                                                                  "options": {}})
            assert response.status_code == 200 and response.json()["namespace"] == namespace
            await outlast_the_catch_up(began)
            await push_messages(http, queue, "after", partition="p")
            assert await pop_namespace() == ["before", "after"]


async def test_a_sweep_ends_at_once_when_nothing_was_written_before_the_hints_began(http, db, queue):
    """The backlog sweep looks only for partitions written before the reader's hints began; when
    there are none it ends without walking the queue window by window (at a million partitions
    written since, those windows cost more than retention). When there are, it walks."""
    await push_partitions(http, queue, [f"p{n:05d}" for n in range(3000)])
    qid = await db.fetchval("SELECT id FROM rq_queues WHERE name = $1", queue)
    sweep = "SELECT * FROM rq_pop_sweep($1, 'g', NULL, NULL, 100, now() + $2::text::interval)"
    nothing_older = await db.fetchrow(sweep, [qid], "-1 hour")
    assert (nothing_older["candidates"], nothing_older["next_queue"]) == ([], None)
    all_older = await db.fetchrow(sweep, [qid], "1 hour")
    assert len(all_older["candidates"]) == 100  # group g has read none of them


async def test_a_queue_whose_hints_may_come_early_is_swept_whole(http, db, queue):
    """A pop drops a hint of a delayed-processing queue that came before the delay had passed,
    so its sweep takes partitions written after the reader's hints began too: the probe that
    ends other sweeps at once does not end it."""
    response = await http.post("/api/v1/configure", json={"queue": queue, "options": {"delayedProcessing": 60}})
    assert response.status_code == 200
    await push_partitions(http, queue, [f"p{n}" for n in range(5)])
    qid = await db.fetchval("SELECT id FROM rq_queues WHERE name = $1", queue)
    swept = await db.fetchrow("SELECT * FROM rq_pop_sweep($1, 'g', NULL, NULL, 100, now() - interval '1 hour')",
                              [qid])
    assert len(swept["candidates"]) == 5
