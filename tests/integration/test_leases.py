"""Leases: one live lease per (partition, group), expiry redelivery, renewal."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime

from tests.conftest import lease_runs_out, outlast_lease
from tests.integration.helpers import ISO_MILLIS, ack, pop, pop_messages, pop_until, push


def parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def test_leased_partition_is_skipped_by_the_same_group(http, queue):
    await push(http, queue, 1, 2, 3)
    first = await pop(http, queue, batch=1)
    assert [m["data"] for m in first["messages"]] == [1]
    # more messages wait in the partition, but it is leased: same group gets nothing
    assert await pop(http, queue) is None
    assert await pop(http, queue, "Default") is None
    result = await ack(http, first["messages"][0])
    assert result["leaseReleased"] is True
    assert [m["data"] for m in await pop_messages(http, queue)] == [2, 3]


async def test_exactly_one_live_lease_under_concurrent_pops(http, queue, broker_url):
    import httpx

    await push(http, queue, *range(5))

    async def one_pop():
        async with httpx.AsyncClient(base_url=broker_url, timeout=30) as client:
            response = await client.get(f"/api/v1/pop/queue/{queue}")
            return response.status_code, (response.json() if response.status_code == 200 else None)

    answers = await asyncio.gather(*[one_pop() for _ in range(8)])
    winners = [body for status, body in answers if status == 200]
    assert sorted(status for status, _ in answers) == [200] + [204] * 7
    assert [m["data"] for m in winners[0]["messages"]] == list(range(5))


async def test_other_partitions_stay_available_while_one_is_leased(http, queue):
    await push(http, queue, "a", partition="pa")
    await push(http, queue, "b", partition="pb")
    first = await pop(http, queue)
    second = await pop(http, queue)
    assert second is not None
    assert {first["partition"], second["partition"]} == {"pa", "pb"}
    assert first["leaseId"] != second["leaseId"]


async def test_different_groups_lease_independently(http, queue):
    await push(http, queue, "x", "y")
    g1 = await pop(http, queue, consumerGroup="g1", subscriptionMode="all")
    g2 = await pop(http, queue, consumerGroup="g2", subscriptionMode="all")
    queue_mode = await pop(http, queue)
    for body in (g1, g2, queue_mode):
        assert body is not None
        assert [m["data"] for m in body["messages"]] == ["x", "y"]
    assert len({g1["leaseId"], g2["leaseId"], queue_mode["leaseId"]}) == 3
    assert await pop(http, queue, consumerGroup="g1") is None
    assert await pop(http, queue, consumerGroup="g2") is None


async def test_lease_expiry_redelivers_with_growing_delivery_attempt(http, queue):
    await push(http, queue, "m1", "m2")
    first = await pop(http, queue, leaseSeconds=1)
    assert [m["data"] for m in first["messages"]] == ["m1", "m2"]
    assert [m["deliveryAttempt"] for m in first["messages"]] == [1, 1]
    assert await pop(http, queue, leaseSeconds=1) is None
    second = await pop_until(http, queue, leaseSeconds=1)  # once the lease ran out
    assert [m["id"] for m in second["messages"]] == [m["id"] for m in first["messages"]]
    assert [m["deliveryAttempt"] for m in second["messages"]] == [2, 2]
    assert second["leaseId"] != first["leaseId"]
    third = await pop_until(http, queue, leaseSeconds=1)
    assert [m["id"] for m in third["messages"]] == [m["id"] for m in first["messages"]]
    assert [m["deliveryAttempt"] for m in third["messages"]] == [3, 3]


async def test_expired_lease_cannot_ack(http, queue, db):
    await push(http, queue, "m")
    [message] = await pop_messages(http, queue, leaseSeconds=1)
    await lease_runs_out(db, message["leaseId"])
    result = await ack(http, message)
    assert result["success"] is False
    assert result["error"] == "invalid or expired lease"
    again = await pop_messages(http, queue)
    assert [m["id"] for m in again] == [message["id"]]


async def test_extend_without_body_or_content_type(http, queue):
    await push(http, queue, 1)
    body = await pop(http, queue)
    lease = body["leaseId"]
    request = http.build_request("POST", f"/api/v1/lease/{lease}/extend")
    assert "content-type" not in request.headers
    response = await http.send(request)
    assert response.status_code == 200
    answer = response.json()
    assert answer["success"] is True
    assert answer["leaseId"] == lease
    assert answer["renewed"] >= 1
    assert answer["newExpiresAt"] == answer["expiresAt"] == answer["lease_expires_at"]
    assert ISO_MILLIS.match(answer["newExpiresAt"])


async def test_extend_defaults_to_60_seconds(http, queue, db):
    await push(http, queue, 1)
    body = await pop(http, queue, leaseSeconds=2)
    response = await http.post(f"/api/v1/lease/{body['leaseId']}/extend")
    answer = response.json()
    now = await db.fetchval("SELECT now()")
    remaining = (parse(answer["newExpiresAt"]) - now).total_seconds()
    assert 50 < remaining <= 61


async def test_extend_renews_every_partition_of_a_multi_partition_lease(http, queue):
    for name in ("p1", "p2", "p3"):
        await push(http, queue, name, partition=name)
    body = await pop(http, queue, partitions=3)
    assert body["partitionsClaimed"] == 3
    response = await http.post(f"/api/v1/lease/{body['leaseId']}/extend", json={"seconds": 30})
    assert response.json()["renewed"] == 3


async def test_extend_unknown_lease_is_success_false(http):
    response = await http.post(f"/api/v1/lease/{uuid.uuid4()}/extend", json={"seconds": 10})
    assert response.status_code == 200
    assert response.json()["success"] is False


async def test_extend_keeps_a_short_lease_alive(http, queue):
    await push(http, queue, "keep", "also")
    body = await pop(http, queue, leaseSeconds=1)
    popped_at = time.monotonic()
    response = await http.post(f"/api/v1/lease/{body['leaseId']}/extend", json={"seconds": 5})
    assert response.status_code == 200
    assert response.json()["success"] is True
    await outlast_lease(popped_at, 1)
    # past the original expiry: still leased, so no redelivery, and the ack is accepted
    assert await pop(http, queue) is None
    for message in body["messages"]:
        result = await ack(http, message)
        assert result["success"] is True, result
    assert await pop(http, queue) is None


async def test_extend_never_shortens(http, queue):
    await push(http, queue, 1)
    body = await pop(http, queue, leaseSeconds=120)
    long = (await http.post(f"/api/v1/lease/{body['leaseId']}/extend", json={"seconds": 100})).json()
    short = (await http.post(f"/api/v1/lease/{body['leaseId']}/extend", json={"seconds": 1})).json()
    assert short["success"] is True
    assert parse(short["newExpiresAt"]) >= parse(long["newExpiresAt"])


async def test_extend_released_lease_is_success_false(http, queue):
    await push(http, queue, 1)
    body = await pop(http, queue)
    assert (await ack(http, body["messages"][0]))["leaseReleased"] is True
    response = await http.post(f"/api/v1/lease/{body['leaseId']}/extend", json={"seconds": 10})
    assert response.status_code == 200
    assert response.json()["success"] is False


async def test_only_a_lease_pop_commits_without_waiting_for_the_disk(http, queue, db):
    """rq_pop turns synchronous_commit off for its own transaction when it granted leases and
    registered no subscription: a crash can only forget the leases (their messages come again,
    as after an expiry) and cursors the next pop creates again. A group's
    first pop fixes where its subscription starts and an auto-ack pop consumes what it
    delivers: both wait for the disk, and so does a pop that delivered nothing."""
    for partition in ("a", "b", "c"):
        await push(http, queue, partition, partition=partition)

    async def pop_in_transaction(group: str, auto_ack: bool) -> tuple[list[str], str]:
        async with db.transaction():
            rows = await db.fetch(
                "SELECT partition_name FROM rq_pop($1, NULL, NULL, NULL, $2, 1, 1, $3, 0, gen_random_uuid(),"
                " 'all', NULL, NULL, NULL, true, '{}', NULL, true, NULL, false) WHERE partition_id IS NOT NULL",
                queue, group, auto_ack)
            return [row[0] for row in rows], await db.fetchval("SELECT current_setting('synchronous_commit')")

    first, mode = await pop_in_transaction("g", auto_ack=False)
    assert len(first) == 1 and mode == "on"  # registered the group's subscription
    second, mode = await pop_in_transaction("g", auto_ack=False)
    assert len(second) == 1 and second != first and mode == "off"  # a lease, nothing else
    third, mode = await pop_in_transaction("g", auto_ack=True)
    assert len(third) == 1 and third[0] not in first + second and mode == "on"  # consumed at once
    assert await pop_in_transaction("g", auto_ack=False) == ([], "on")  # all three are taken
    delivered, mode = await pop_in_transaction("__QUEUE_MODE__", auto_ack=False)
    assert len(delivered) == 1 and mode == "off"  # queue mode registers nothing
