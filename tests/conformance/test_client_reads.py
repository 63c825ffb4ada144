"""Reads by offset and partition discovery through the official client's ``queue(...).fetch()``
and ``.changed_since()`` (queen-mq's reads module drives the loops over the raw routes)."""

from __future__ import annotations

import uuid

from tests.conformance.helpers import drain


async def test_fetch_reads_every_partition_by_offset_without_consuming(queen, queue):
    await queen.queue(queue).partition("a").push([{"data": {"n": n}} for n in range(5)])
    await queen.queue(queue).partition("b").push([{"data": "b0"}])
    read = await queen.queue(queue).fetch(["a", "b", "never-written"])
    assert list(read) == ["a", "b", "never-written"]
    assert [r["payload"] for r in read["a"]["records"]] == [{"n": n} for n in range(5)]
    assert [r["offset"] for r in read["a"]["records"]] == [0, 1, 2, 3, 4]
    assert read["a"]["highWatermark"] == 5 and read["a"]["nextOffset"] == 5
    assert [r["payload"] for r in read["b"]["records"]] == ["b0"]
    assert read["never-written"]["records"] == []

    again = await queen.queue(queue).fetch("a", offsets={"a": 3})
    assert [r["offset"] for r in again["a"]["records"]] == [3, 4]
    assert len(await drain(queen, queue)) == 6  # the reads took nothing from the consumers


async def test_fetch_loops_over_a_small_byte_budget(queen, queue):
    await queen.queue(queue).partition("p").push([{"data": "x" * 500} for _ in range(20)])
    read = await queen.queue(queue).fetch("p", max_bytes=1200)
    assert [r["offset"] for r in read["p"]["records"]] == list(range(20))


async def test_changed_since_follows_pages_and_the_safe_time(queen, queue):
    for name in ("p1", "p2", "p3"):
        await queen.queue(queue).partition(name).push([{"data": name}])
    everything = await queen.queue(queue).changed_since()
    assert [p["name"] for p in everything["partitions"]] == ["p1", "p2", "p3"]
    assert everything["safeTime"]

    await queen.queue(queue).partition("p2").push([{"data": "again"}])
    later = await queen.queue(queue).changed_since(everything["safeTime"])
    [again] = [p for p in later["partitions"] if p["name"] == "p2"]
    assert again["lastOffset"] == 1
    # safeTime is conservative: a transaction open elsewhere (a background loop's) holds it back,
    # and a partition written after it is listed again, never one written only before it
    for partition in later["partitions"]:
        assert partition["lastWriteAt"] >= everything["safeTime"], partition

    assert (await queen.queue(f"none-{uuid.uuid4().hex[:8]}").changed_since())["partitions"] == []
