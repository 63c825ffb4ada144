"""Reads by offset (POST /api/v1/fetch) and partition discovery (POST /api/v1/partitions/changed)
over raw HTTP: the answers' fields, the byte budget, tombstones, retention, paging, safe time,
and that a read leaves every consumer's position alone."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.conftest import eventually
from tests.integration.helpers import ack_batch, item, pop, pop_messages, push, push_items
from tests.integration.retention_helpers import configure, segments


async def fetch(http, *entries, **call) -> list[dict]:
    response = await http.post("/api/v1/fetch", json={"entries": list(entries), **call})
    assert response.status_code == 200, response.text
    answer = response.json()["entries"]
    assert len(answer) == len(entries)
    return answer


async def changed(http, *entries) -> dict:
    response = await http.post("/api/v1/partitions/changed", json={"entries": list(entries)})
    assert response.status_code == 200, response.text
    return response.json()


async def test_records_from_an_offset_with_the_partition_bounds(http, queue):
    pushed = await push(http, queue, *[{"n": n} for n in range(5)], partition="p")
    await push(http, queue, "later", partition="p")
    [whole] = await fetch(http, {"queue": queue, "partition": "p", "offset": 0})
    assert [r["payload"] for r in whole["records"]] == [{"n": n} for n in range(5)] + ["later"]
    assert [r["offset"] for r in whole["records"]] == list(range(6))
    assert [r["transactionId"] for r in whole["records"][:5]] == [p["transaction_id"] for p in pushed]
    assert whole["highWatermark"] == 6 and whole["logStartOffset"] == 0 and whole["nextOffset"] == 6
    assert "error" not in whole and whole["records"][0]["ts"].endswith("Z")

    [tail] = await fetch(http, {"queue": queue, "partition": "p", "offset": 4})
    assert [r["offset"] for r in tail["records"]] == [4, 5]
    [at_end] = await fetch(http, {"queue": queue, "partition": "p", "offset": 6})
    assert at_end["records"] == [] and "error" not in at_end and at_end["nextOffset"] == 6


async def test_unknown_partitions_and_offsets_past_the_end_are_entry_errors(http, queue):
    await push(http, queue, 1, partition="p")
    answer = await fetch(http, {"queue": queue, "partition": "p", "offset": 5},
                         {"queue": queue, "partition": "none"},
                         {"queue": f"no-{uuid.uuid4().hex[:8]}", "partition": "p"},
                         {"queue": queue, "partition": "p"})
    assert answer[0]["error"] == "OFFSET_OUT_OF_RANGE" and answer[0]["highWatermark"] == 1
    assert answer[1]["error"] == "UNKNOWN_TOPIC_OR_PARTITION" and answer[1]["highWatermark"] == 0
    assert answer[2]["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert [r["payload"] for r in answer[3]["records"]] == [1]  # the others do not spoil the call


async def test_the_byte_budget_bounds_an_entry_and_the_call_but_always_moves_on(http, queue):
    await push(http, queue, *["x" * 1000 for _ in range(10)], partition="a")
    await push(http, queue, *["y" * 1000 for _ in range(10)], partition="b")
    [small] = await fetch(http, {"queue": queue, "partition": "a", "maxBytes": 2500})
    assert 1 <= len(small["records"]) <= 3 and small["nextOffset"] == len(small["records"])
    [tiny] = await fetch(http, {"queue": queue, "partition": "a", "maxBytes": 1})
    assert [r["offset"] for r in tiny["records"]] == [0]  # one record even above the budget
    first, second = await fetch(http, {"queue": queue, "partition": "a"}, {"queue": queue, "partition": "b"},
                                maxBytes=3000)
    assert 1 <= len(first["records"]) < 10
    assert second["records"] == [] and second["highWatermark"] == 10  # the call's budget was spent


async def test_deleted_messages_are_skipped(http, queue):
    pushed = await push(http, queue, "a", "b", "c", partition="p")
    [listed] = await fetch(http, {"queue": queue, "partition": "p"})
    peeked = await pop(http, queue, batch=1, consumerGroup="peek", subscriptionMode="all")
    partition_id = peeked["messages"][0]["partitionId"]
    response = await http.delete(f"/api/v1/messages/{partition_id}/{pushed[1]['transaction_id']}")
    assert response.status_code == 200, response.text
    [after] = await fetch(http, {"queue": queue, "partition": "p"})
    assert [(r["offset"], r["payload"]) for r in after["records"]] == [(0, "a"), (2, "c")]
    assert len(listed["records"]) == 3


async def test_a_read_moves_no_cursor_and_takes_no_lease(http, queue):
    await push(http, queue, 1, 2, 3, partition="p")
    for _ in range(3):
        [read] = await fetch(http, {"queue": queue, "partition": "p"})
        assert len(read["records"]) == 3
    assert [m["data"] for m in await pop_messages(http, queue, batch=10)] == [1, 2, 3]


async def test_below_the_oldest_kept_offset_after_retention(http, db, queue):
    await configure(http, queue, completedRetentionSeconds=1)
    await push(http, queue, 0, 1, 2, partition="p")
    await push(http, queue, 3, 4, 5, partition="p")
    first = await pop_messages(http, queue, partition="p", batch=3)
    assert [m["data"] for m in first] == [0, 1, 2]
    await ack_batch(http, first)

    async def one_segment_left():
        return await segments(db, queue) == 1

    assert await eventually(one_segment_left, seconds=15)
    [gone] = await fetch(http, {"queue": queue, "partition": "p", "offset": 0})
    assert gone["error"] == "OFFSET_OUT_OF_RANGE" and gone["logStartOffset"] == 3 and gone["records"] == []
    [kept] = await fetch(http, {"queue": queue, "partition": "p", "offset": 3})
    assert [r["payload"] for r in kept["records"]] == [3, 4, 5]


async def test_discovery_pages_in_creation_order(http, queue):
    for name in ("c", "a", "b"):
        await push(http, queue, name, partition=name)
    answer = await changed(http, {"queue": queue})
    [entry] = answer["entries"]
    assert [p["name"] for p in entry["partitions"]] == ["c", "a", "b"] and entry["next"] is None
    assert entry["partitions"][0]["lastOffset"] == 0 and entry["partitions"][0]["logStart"] == 0
    names, after = [], None
    while True:
        [page] = (await changed(http, {"queue": queue, "limit": 1, **({"after": after} if after else {})}))["entries"]
        names += [p["name"] for p in page["partitions"]]
        after = page["next"]
        if after is None:
            break
    assert names == ["c", "a", "b"]


async def test_changed_since_the_safe_time_is_exactly_what_was_written_after_it(http, queue):
    await push_items(http, [item(queue, 1, "a"), item(queue, 1, "b"), item(queue, 1, "c")])

    async def quiet_since_a_safe_time():
        """A safe time is the start of the oldest transaction open on the database when that is
        earlier (other brokers of the session run theirs), and then earlier writes come back too:
        over-reporting is allowed, missing a write is not. Once no older transaction is open, the
        writes before the safe time are not reported."""
        safe = (await changed(http, {"queue": queue}))["safeTime"]
        [entry] = (await changed(http, {"queue": queue, "since": safe}))["entries"]
        return safe if entry["partitions"] == [] else None

    safe = await eventually(quiet_since_a_safe_time, seconds=10)
    assert safe, "every safe time reported the writes made before it"
    await push(http, queue, 2, partition="b")
    [moved] = (await changed(http, {"queue": queue, "since": safe}))["entries"]
    assert [p["name"] for p in moved["partitions"]] == ["b"]
    assert moved["partitions"][0]["lastWriteAt"] >= safe and moved["partitions"][0]["lastOffset"] == 1


async def test_the_safe_time_waits_for_a_transaction_still_open(http, db, queue):
    await push(http, queue, 1, partition="a")
    transaction = db.transaction()
    await transaction.start()
    try:
        await db.execute("SELECT 1")
        opened = await db.fetchval("SELECT now()")
        await asyncio.sleep(0.05)
        answer = await changed(http, {"queue": queue})
        assert answer["safeTime"] <= opened.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    finally:
        await transaction.rollback()


async def test_an_unknown_queue_has_no_partitions(http):
    answer = await changed(http, {"queue": f"no-{uuid.uuid4().hex[:8]}"})
    assert answer["entries"][0]["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert answer["entries"][0]["partitions"] == [] and answer["safeTime"]


@pytest.mark.parametrize("body", [
    {}, {"entries": []}, {"entries": [{"queue": "q"}]}, {"entries": [{"partition": "p"}]},
    {"entries": [{"queue": "q", "partition": "p", "offset": -1}]},
    {"entries": [{"queue": "q", "partition": "p", "maxBytes": 0}]},
    {"entries": [{"queue": "q", "partition": "p"}], "maxBytes": 0},
    {"entries": [{"queue": "q", "partition": "p", "offset": "0"}]},
    {"entries": [{"queue": "a/b", "partition": "p"}]}, {"entries": [{"queue": "q", "partition": ""}]},
    {"entries": [{"queue": "q", "partition": "p"}] * 1025},
])
async def test_bad_fetch_bodies_are_400(http, body):
    response = await http.post("/api/v1/fetch", json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]


@pytest.mark.parametrize("entry", [
    {}, {"queue": "q", "since": "yesterday"}, {"queue": "q", "after": "nope"},
    {"queue": "q", "after": "2026-01-01T00:00:00|not-a-uuid"}, {"queue": "q", "limit": 0},
    {"queue": "q", "limit": 1001}, {"queue": ""},
])
async def test_bad_discovery_bodies_are_400(http, entry):
    response = await http.post("/api/v1/partitions/changed", json={"entries": [entry]})
    assert response.status_code == 400, response.text
    assert response.json()["error"]
