"""Ephemeral queues over raw HTTP (/api/v1/ephemeral/*): push, pop and ack by group, leases and
the retry budget, bounds and TTL, long polls, declarations, and the refusals."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from tests.conftest import eventually, let_a_long_poll_park

BASE = "/api/v1/ephemeral"


@pytest.fixture
def eq() -> str:
    return f"eph-{uuid.uuid4().hex[:10]}"


async def push(http, queue, *payloads, partition=None, status=201) -> dict:
    body = {"queue": queue, "messages": [{"payload": p} for p in payloads]}
    if partition is not None:
        body["partition"] = partition
    response = await http.post(f"{BASE}/push", json=body)
    assert response.status_code == status, response.text
    return response.json()


async def pop(http, queue, **params) -> list[dict]:
    response = await http.get(f"{BASE}/pop", params={"queue": queue, "batch": 100, **params})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["queue"] == queue
    return body["messages"]


async def ack(http, queue, ids, group=None, status=None) -> list[str]:
    acks = [{"id": i, **({"status": status} if status else {})} for i in ids]
    response = await http.post(f"{BASE}/ack", json={"queue": queue, "acks": acks,
                                                    **({"group": group} if group else {})})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["id"] for r in results] == list(ids)
    return [r["outcome"] for r in results]


async def configure(http, queue, **options) -> dict:
    response = await http.post(f"{BASE}/configure", json={"queue": queue, "options": options})
    assert response.status_code == 201, response.text
    return response.json()


async def depth(http, queue, **params) -> dict:
    response = await http.get(f"{BASE}/queues/{queue}/depth", params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def test_messages_come_in_push_order_per_partition_and_acks_release_them(http, eq):
    assert await push(http, eq, {"n": 1}, {"n": 2}, [3], "four", None) == {"pushed": 5}
    messages = await pop(http, eq)
    assert [m["payload"] for m in messages] == [{"n": 1}, {"n": 2}, [3], "four", None]
    assert {m["partition"] for m in messages} == {"Default"} and {m["attempts"] for m in messages} == {1}
    assert await pop(http, eq) == []  # all leased
    assert await ack(http, eq, [m["id"] for m in messages]) == ["acked"] * 5
    assert await ack(http, eq, [messages[0]["id"]]) == ["unknown"]  # acked already
    assert (await depth(http, eq))["depth"] == 0  # consumed by the only group: gone


async def test_groups_fan_out_and_the_consumers_of_one_group_share(http, eq):
    await push(http, eq, *range(6))
    first, second = await pop(http, eq, group="workers", batch=3), await pop(http, eq, group="workers", batch=3)
    assert [m["payload"] for m in first] == [0, 1, 2] and [m["payload"] for m in second] == [3, 4, 5]
    tail = await pop(http, eq, group="tail")
    assert [m["payload"] for m in tail] == list(range(6))
    groups = {g["group"]: g["pending"] for g in (await depth(http, eq))["groups"]}
    assert groups == {"workers": 6, "tail": 6}
    assert await ack(http, eq, [m["id"] for m in first + second], group="workers") == ["acked"] * 6
    assert (await depth(http, eq))["depth"] == 6  # tail still holds leases on them


async def test_partitions_are_rings_of_their_own(http, eq):
    await push(http, eq, "a1", "a2", partition="a")
    await push(http, eq, "b1", partition="b")
    only_b = await pop(http, eq, partition="b")
    assert [(m["partition"], m["payload"]) for m in only_b] == [("b", "b1")]
    rest = await pop(http, eq)
    assert [(m["partition"], m["payload"]) for m in rest] == [("a", "a1"), ("a", "a2")]


async def test_a_pop_of_many_caught_up_rings_finds_the_one_with_work_for_each_group(http, eq):
    for n in range(40):
        await push(http, eq, f"first-{n}", partition=f"p{n}")
    leased = await pop(http, eq, group="a", batch=100)  # a's leases keep the messages for b
    assert len(leased) == 40 and len(await pop(http, eq, group="b", batch=100, autoAck="true")) == 40
    assert await ack(http, eq, [m["id"] for m in leased], group="a") == ["acked"] * 40
    # a group's first pop subscribes it to every ring, those it finds empty too
    assert await pop(http, eq, group="c", autoAck="true") == []
    for group in ("a", "b", "c"):
        assert await pop(http, eq, group=group, autoAck="true") == []  # every ring caught up
    await push(http, eq, "late", partition="p17")
    for group in ("a", "b", "c"):  # each cursor on p17 keeps the message there until its group passes
        assert [(m["partition"], m["payload"]) for m in await pop(http, eq, group=group, autoAck="true")] == [
            ("p17", "late")]
    assert (await depth(http, eq))["depth"] == 0


async def test_a_lease_that_falls_due_on_a_caught_up_ring_is_found_again(http, eq):
    await configure(http, eq, leaseSeconds=1)
    for n in range(10):
        await push(http, eq, f"m{n}", partition=f"p{n}")
    taken = await pop(http, eq, batch=100)
    assert len(taken) == 10 and await pop(http, eq) == []
    await ack(http, eq, [m["id"] for m in taken if m["partition"] != "p4"])
    [again] = await eventually(lambda: pop(http, eq))  # once p4's lease ran out; its cursor is past the message
    assert (again["partition"], again["payload"], again["attempts"]) == ("p4", "m4", 2)


async def test_a_failed_ack_or_an_expired_lease_redelivers_until_the_retry_budget_ends(http, eq):
    await configure(http, eq, leaseSeconds=1, retryLimit=1)
    await push(http, eq, "x")
    [first] = await pop(http, eq)
    assert await ack(http, eq, [first["id"]], status="failed") == ["redelivered"]
    [second] = await pop(http, eq)
    assert second["id"] == first["id"] and second["attempts"] == 2

    async def dropped():  # once the lease of the last delivery the budget allows ran out
        assert await pop(http, eq) == []
        return (await depth(http, eq))["drops"]["retry"] == 1

    assert await eventually(dropped)
    assert await ack(http, eq, [second["id"]]) == ["unknown"]


async def test_auto_ack_hands_out_without_a_lease(http, eq):
    await push(http, eq, 1, 2)
    messages = await pop(http, eq, autoAck="true")
    assert [m["payload"] for m in messages] == [1, 2]
    assert await ack(http, eq, [m["id"] for m in messages]) == ["unknown", "unknown"]
    assert (await depth(http, eq))["depth"] == 0


async def test_reject_refuses_a_push_past_the_bounds_whole(http, eq):
    await configure(http, eq, maxLength=3)
    await push(http, eq, 1, 2)
    refused = await http.post(f"{BASE}/push", json={"queue": eq, "messages": [{"payload": 3}, {"payload": 4}]})
    assert refused.status_code == 429 and refused.json()["code"] == "queue_full"
    assert [m["payload"] for m in await pop(http, eq, autoAck="true")] == [1, 2]


async def test_drop_oldest_makes_room_and_a_lagging_group_counts_what_it_missed(http, eq):
    await configure(http, eq, maxLength=3, policy="dropOldest")
    await push(http, eq, 1)
    assert [m["payload"] for m in await pop(http, eq, group="slow", autoAck="true")] == [1]
    await push(http, eq, 2, 3)
    await push(http, eq, 4, 5)  # 2 goes to make room
    assert [m["payload"] for m in await pop(http, eq, group="slow", autoAck="true")] == [3, 4, 5]
    figures = await depth(http, eq)
    assert figures["drops"]["bounds"] == 1 and {g["group"]: g["skipped"] for g in figures["groups"]} == {"slow": 1}
    too_big = await http.post(f"{BASE}/push", json={"queue": eq, "messages": [{"payload": n} for n in range(4)]})
    assert too_big.status_code == 429


async def test_messages_older_than_the_ttl_are_dropped(http, eq, db):
    await configure(http, eq, ttlSeconds=1)
    await push(http, eq, "old")

    async def older_than_the_ttl():
        return await db.fetchval("SELECT bool_and(pushed_at < now() - interval '1 second') "
                                 "FROM rq_eph_messages WHERE queue = $1", eq)

    assert await eventually(older_than_the_ttl)
    await push(http, eq, "new")
    assert [m["payload"] for m in await pop(http, eq)] == ["new"]
    assert (await depth(http, eq))["drops"]["ttl"] == 1


async def test_a_long_poll_is_woken_by_a_push_and_times_out_empty(http, eq):
    started = time.monotonic()
    assert await pop(http, eq, wait="true", timeout=300) == []
    assert time.monotonic() - started >= 0.25

    async def later():
        await let_a_long_poll_park()
        await push(http, eq, "wake")

    pusher = asyncio.create_task(later())
    started = time.monotonic()
    messages = await pop(http, eq, wait="true", timeout=10_000)
    await pusher
    assert [m["payload"] for m in messages] == ["wake"] and time.monotonic() - started < 2


async def test_a_window_buffer_fattens_a_waiting_pop(http, eq):
    await configure(http, eq, windowBuffer={"ms": 3000, "count": 3})
    await push(http, eq, 1)

    async def later():
        await let_a_long_poll_park()
        await push(http, eq, 2, 3)

    pusher = asyncio.create_task(later())
    messages = await pop(http, eq, wait="true", timeout=10_000)
    await pusher
    assert [m["payload"] for m in messages] == [1, 2, 3]


async def test_reset_and_delete_and_the_stale_ids_they_leave(http, eq):
    await configure(http, eq, maxLength=10)
    await push(http, eq, 1, 2)
    messages = await pop(http, eq)
    reset = await http.post(f"{BASE}/reset", json={"queue": eq})
    assert reset.json() == {"queue": eq, "dropped": 2}
    assert await ack(http, eq, [m["id"] for m in messages]) == ["stale", "stale"]
    assert await ack(http, eq, ["not-an-id"]) == ["unknown"]
    listed = {q["queue"]: q for q in (await http.get(f"{BASE}/queues")).json()["queues"]}
    assert listed[eq]["tier"] == "declared" and listed[eq]["options"]["maxLength"] == 10
    deleted = (await http.delete(f"{BASE}/queue/{eq}")).json()
    assert deleted == {"queue": eq, "deleted": True, "declared": True}
    missing = await http.get(f"{BASE}/queues/{eq}/depth")
    assert missing.status_code == 404 and missing.json()["code"] == "ephemeral_queue_not_found"
    assert (await http.delete(f"{BASE}/queue/{eq}")).json()["deleted"] is False
    assert (await http.post(f"{BASE}/reset", json={"queue": eq})).json()["dropped"] == 0


async def test_a_pop_names_a_queue_into_being_as_a_push_does(http, eq):
    assert (await http.get(f"{BASE}/queues/{eq}/depth")).status_code == 404
    assert await pop(http, eq) == []
    figures = await depth(http, eq)
    assert figures["tier"] == "implicit" and figures["pending"] == 0


async def test_empty_idle_rings_are_collected_and_a_later_push_starts_anew(http, db, eq):
    await push(http, eq, "kept", partition="full")
    await push(http, eq, "leased", partition="leased")
    await push(http, eq, "done", partition="done")
    [leased] = await pop(http, eq, partition="leased")
    assert [m["payload"] for m in await pop(http, eq, partition="done", autoAck="true")] == ["done"]
    collect = "SELECT rq_eph_collect_step(1000, 0)"
    await db.fetchval(collect)
    rings = "SELECT array_agg(partition ORDER BY partition) FROM rq_eph_rings WHERE queue = $1"
    assert await db.fetchval(rings, eq) == ["full", "leased"]  # holding a message, holding a lease
    assert await db.fetchval("SELECT count(*) FROM rq_eph_cursors WHERE queue = $1 AND partition = 'done'", eq) == 0
    await push(http, eq, "again", partition="done")
    [again] = await pop(http, eq, partition="done")
    assert again["payload"] == "again" and again["id"].split(":")[1] == "1"  # a new ring, from message 1
    assert await ack(http, eq, [leased["id"], again["id"]]) == ["acked", "acked"]
    await pop(http, eq, partition="full", autoAck="true")
    await db.fetchval(collect)
    assert await db.fetchval(rings, eq) is None
    assert (await http.get(f"{BASE}/queues/{eq}/depth")).status_code == 404  # an implicit queue, gone


async def test_pushes_and_pops_through_both_worker_processes_see_one_queue(http, eq):
    await asyncio.gather(*(push(http, eq, n) for n in range(40)))
    seen: list[int] = []

    async def drained():
        seen.extend(m["payload"] for m in await pop(http, eq, group="g", autoAck="true"))
        return len(seen) == 40

    assert await eventually(drained, seconds=5)
    assert sorted(seen) == list(range(40))


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/push", {"queue": "", "messages": [{"payload": 1}]}),
    ("POST", "/push", {"queue": "q\u0001", "messages": [{"payload": 1}]}),
    ("POST", "/push", {"queue": "q", "messages": [{}]}),
    ("POST", "/push", {"queue": "q", "messages": [{"payload": 1}] * 10_001}),
    ("POST", "/push", {"messages": []}),
    ("POST", "/configure", {"queue": "q", "options": {"maxLenght": 3}}),
    ("POST", "/configure", {"queue": "q", "options": {"policy": "newest"}}),
    ("POST", "/configure", {"queue": "q", "options": {"ttlSeconds": 1.5}}),
    ("POST", "/configure", {"queue": "q", "options": {"windowBuffer": {"ms": 1, "size": 2}}}),
    ("POST", "/ack", {"queue": "q", "acks": [{"status": "completed"}]}),
    ("GET", "/pop", None),
])
async def test_bad_requests_are_400_and_change_nothing(http, method, path, body):
    response = await http.request(method, BASE + path, json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]
    listed = (await http.get(f"{BASE}/queues")).json()["queues"]
    assert all(q["queue"] != "q" for q in listed)
