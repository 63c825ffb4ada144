"""The key/value store and the locks through the official client: ``client.kv``, a transaction's
``tx.kv`` / ``tx.once`` / ``tx.guard(lock)``, ``client.lock()`` and ``client.semaphore()``."""

from __future__ import annotations

import uuid

import pytest

from tests.conformance.helpers import create_queue, pop_now
from tests.conftest import eventually


@pytest.fixture
def ns() -> str:
    return f"ns-{uuid.uuid4().hex[:10]}"


async def test_the_kv_surface_reads_writes_and_fences(queen, ns):
    put = await queen.kv.put(ns, "cfg", {"mode": "fast"}, ttl_seconds=60)
    assert put and put["version"] > 0
    got = await queen.kv.get(ns, "cfg")
    assert got and got["value"] == {"mode": "fast"} and got["version"] == put["version"]
    assert not await queen.kv.get(ns, "absent")

    stale = await queen.kv.put(ns, "cfg", {"mode": "slow"}, forever=True, expect=put["version"] + 1)
    assert not stale and stale["reason"] == "version" and stale["value"] == {"mode": "fast"}
    assert await queen.kv.put(ns, "cfg", {"mode": "slow"}, forever=True, expect=put["version"])

    assert await queen.kv.once(ns, "job-1", ttl_seconds=60) is True
    assert await queen.kv.once(ns, "job-1", ttl_seconds=60) is False

    assert (await queen.kv.incr(ns, "hits", delta=2, max=3, forever=True))["value"] == 2
    refused = await queen.kv.incr(ns, "hits", delta=2, max=3, forever=True)
    assert not refused and refused["reason"] == "limit"

    many = await queen.kv.get_many(ns, ["cfg", "nope"])
    assert [row["key"] for row in many["rows"]] == ["cfg"] and many["missing"] == ["nope"]
    for n in range(5):
        await queen.kv.put(ns, f"item:{n}", n, forever=True)
    rows = await queen.kv.list_all(ns, "item:", limit=2)
    assert [row["value"] for row in rows] == [0, 1, 2, 3, 4]

    assert await queen.kv.delete(ns, "cfg")
    assert not await queen.kv.delete(ns, "cfg")
    checked = await queen.kv.check(ns, "cfg", expect=0)
    assert checked["applied"] is True


async def test_a_transaction_commits_its_marker_with_the_ack_and_a_redelivery_meets_it(queen, ns, queue, queue2,
                                                                                        group):
    await create_queue(queen, queue, lease_time=1)
    await queen.queue(queue).push({"data": {"order": 7}})
    [message] = await pop_now(queen, queue, group=group)
    committed = await (
        queen.transaction()
        .ack(message, "completed", {"consumer_group": group})
        .queue(queue2).push([{"data": {"charged": 7}}])
        .once(ns, f"charge:{message['transactionId']}", ttl_seconds=600)
        .kv.incr(ns, "charged", delta=1, forever=True)
        .commit()
    )
    assert committed["success"] is True
    assert [r["type"] for r in committed["results"]] == ["ack", "push", "kv", "kv"]

    # the same step sent again: a verdict returned, not raised, and nothing of it commits
    again = await (
        queen.transaction()
        .queue(queue2).push([{"data": {"charged": 7}}])
        .once(ns, f"charge:{message['transactionId']}", ttl_seconds=600)
        .kv.incr(ns, "charged", delta=1, forever=True)
        .commit()
    )
    assert not again and again["reason"] == "kv_precondition" and again["kvReason"] == "exists"
    assert again["failedIndex"] == 1
    assert (await queen.kv.get(ns, "charged"))["value"] == 1
    assert len(await pop_now(queen, queue2)) == 1


async def test_a_lock_admits_one_holder_and_a_guarded_step_commits_only_while_held(queen, queue, ns):
    name = f"report-{uuid.uuid4().hex[:8]}"
    first, second = queen.lock(name, ttl_seconds=1, auto_renew=False), queen.lock(name, ttl_seconds=30)
    assert await first.acquire() is True and first.token
    assert await second.acquire() is False
    holders = await queen.locks.get(name)
    assert holders and holders["holders"][0]["owner"] == first.owner

    step = await queen.transaction().guard(first).queue(queue).push([{"data": "by first"}]).commit()
    assert step["success"] is True
    kept_guard, kept_token = first.guard(), first.token  # what a holder paused past its lifetime still has

    assert await eventually(second.acquire) is True  # once the first one's lifetime ran out
    assert first.held is False
    late = await (queen.transaction()
                  .kv.check("queen-locks", f"{name}#0", expect=kept_token, required=True)
                  .queue(queue).push([{"data": "late"}]).commit())
    assert not late and late["reason"] == "kv_precondition" and late["kvReason"] == "version"
    assert late["value"]["owner"] == second.owner
    assert await queen.kv.batch([kept_guard, queen.kv.op.put(ns, "late", 1, forever=True)]) == []
    assert not await queen.kv.get(ns, "late")
    assert [m["data"] for m in await pop_now(queen, queue)] == ["by first"]
    assert await second.release() is True


async def test_a_semaphore_hands_out_its_permits_and_renews_them(queen):
    name = f"pool-{uuid.uuid4().hex[:8]}"
    handles = [queen.semaphore(name, 2, ttl_seconds=30) for _ in range(3)]
    granted = [await handle.acquire() for handle in handles]
    assert granted == [True, True, False]
    assert sorted(handle.slot for handle in handles[:2]) == [0, 1]
    token, freed = handles[0].token, handles[0].slot
    assert await handles[0].renew() is True and handles[0].token != token
    assert await handles[0].release() is True and handles[0].slot is None
    assert await handles[2].acquire() is True and handles[2].slot == freed
    for handle in handles[1:]:
        assert await handle.release() is True
